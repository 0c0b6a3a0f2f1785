"""``hcl embed``'s options: frozen-encoder features of the train and test splits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import BATCH_LIMIT, DEVICES, IMAGE_ARCHS, PREPARED, RUNS, StageConfig, output_file, param, runtime, threads_option
from hcl_cli.errors import UsageError

DEFAULT_MODEL = f"{RUNS}/models/encoder.safetensors"
RECORDED = "recorded"
"""``--arch``'s default: the architecture that the export record beside ``--init`` names."""


@dataclass(init=False, frozen=True)
class EmbedConfig(StageConfig):
    """Frozen-encoder features of the train and test splits."""

    group: ClassVar[str] = "embed"
    command: ClassVar[str] = "embed"
    batch_size: int = param(512, "Images per forward pass.", minimum=1, maximum=BATCH_LIMIT)
    data: str = runtime(PREPARED, "Prepared dataset folder.")
    model: str = runtime(DEFAULT_MODEL, "Encoder from hcl pretrain.")
    init: str = runtime(
        "",
        "Instead of --model: the backbone weights of this safetensors state dict (hcl export --format safetensors's, or "
        "torchvision's ResNet, fc left out); the projection is an untrained head's. See docs/api.md.",
    )
    arch: str = runtime(
        RECORDED,
        f"With --init: small_cnn, resnet18 or resnet50; {RECORDED}: the architecture hcl export's record INIT.json names.",
        choices=(RECORDED, *IMAGE_ARCHS),
    )
    out: str = output_file(f"{RUNS}/data/embeddings.safetensors", "Output embeddings file.")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)
    threads: str = threads_option()

    def check(self) -> None:
        if self.arch != RECORDED and not self.init:
            raise UsageError("--arch names the architecture of --init's weights: give --init, or leave --arch out")
        if self.init and self.model != DEFAULT_MODEL:
            raise UsageError("--model and --init name two encoders to embed with: give one of them")
