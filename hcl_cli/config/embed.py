"""``hcl embed``'s options: frozen-encoder features of the train and test splits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import BATCH_LIMIT, DEVICES, PREPARED, RUNS, StageConfig, output_file, param, runtime, threads_option


@dataclass(init=False, frozen=True)
class EmbedConfig(StageConfig):
    """Frozen-encoder features of the train and test splits."""

    group: ClassVar[str] = "embed"
    command: ClassVar[str] = "embed"
    batch_size: int = param(512, "Images per forward pass.", minimum=1, maximum=BATCH_LIMIT)
    data: str = runtime(PREPARED, "Prepared dataset folder.")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder from hcl pretrain.")
    out: str = output_file(f"{RUNS}/data/embeddings.safetensors", "Output embeddings file.")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)
    threads: str = threads_option()
