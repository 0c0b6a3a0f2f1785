"""Every stage's options, each declared once, one module per stage.

:mod:`~hcl_cli.config.base` holds :class:`StageConfig` (one validated, frozen configuration per
run) and the ``param``/``runtime`` field declarations; :mod:`~hcl_cli.config.prepare`,
:mod:`~hcl_cli.config.pretrain`, :mod:`~hcl_cli.config.embed`, :mod:`~hcl_cli.config.linear`,
:mod:`~hcl_cli.config.knn` and :mod:`~hcl_cli.config.report` each hold one stage's options, and
:mod:`~hcl_cli.config.pipeline` lists them in pipeline order; :mod:`~hcl_cli.config.export` holds those of ``hcl export``,
which is no pipeline stage (no params.yaml group). A stage's code imports only its own
module, so that a stage's dvc.yaml deps (its import closure) hold no other stage's declarations:
editing the help text of a ``knn-eval`` option reruns ``knn-eval``, not pretraining.

The names below are importable from this package too (``from hcl_cli.config import KnnConfig``),
each loaded from its own module on first use: importing one stage's module never loads another's.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "DEVICES": "hcl_cli.config.base",
    "FEATURES": "hcl_cli.config.base",
    "PREPARED": "hcl_cli.config.base",
    "RUNS": "hcl_cli.config.base",
    "StageConfig": "hcl_cli.config.base",
    "DATASETS": "hcl_cli.config.prepare",
    "PrepareConfig": "hcl_cli.config.prepare",
    "ARCHS": "hcl_cli.config.pretrain",
    "PretrainConfig": "hcl_cli.config.pretrain",
    "EmbedConfig": "hcl_cli.config.embed",
    "LinearConfig": "hcl_cli.config.linear",
    "KnnConfig": "hcl_cli.config.knn",
    "ReportConfig": "hcl_cli.config.report",
    "ExportConfig": "hcl_cli.config.export",
    "STAGE_CONFIGS": "hcl_cli.config.pipeline",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'hcl_cli.config' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
