"""The pipeline's stages, in order: what the command line and ``hcl params`` iterate over (no stage imports this)."""

from __future__ import annotations

from hcl_cli.config.base import StageConfig
from hcl_cli.config.embed import EmbedConfig
from hcl_cli.config.knn import KnnConfig
from hcl_cli.config.linear import LinearConfig
from hcl_cli.config.prepare import PrepareConfig
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.config.report import ReportConfig

STAGE_CONFIGS: tuple[type[StageConfig], ...] = (PrepareConfig, PretrainConfig, EmbedConfig, LinearConfig, KnnConfig, ReportConfig)
