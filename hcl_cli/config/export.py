"""``hcl export``'s options: the trained encoder's backbone written for use outside hcl (no params.yaml group: not a pipeline stage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import RUNS, StageConfig, output_file, runtime

EXPORT_FORMATS = ("pytorch", "safetensors", "pt2", "torchscript", "onnx")
"""What ``hcl export`` writes: a state dict (``torch.save``, or safetensors), or the backbone as a program: torch.export's
``ExportedProgram`` (``pt2``), TorchScript (which torch deprecates for torch.export) or ONNX (hcl_cli/image/transfer.py writes each)."""


@dataclass(init=False, frozen=True)
class ExportConfig(StageConfig):
    """Write a trained image encoder's backbone for use outside hcl (fine-tuning, detection), with its input normalisation in OUT.json."""

    group: ClassVar[str] = "export"
    command: ClassVar[str] = "export"
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Image encoder from hcl pretrain.")
    format: str = runtime(
        "pytorch",
        "pytorch: the backbone's state dict by torch.save (torchvision's ResNet keys less fc, or small_cnn's); "
        "safetensors: the same state dict as safetensors (what hcl pretrain --init reads); pt2: torch.export's program "
        "(torch.export.load); torchscript: a traced TorchScript module (torch.jit.load); onnx: needs the onnx and onnxscript "
        "packages, which hcl does not install.",
        choices=EXPORT_FORMATS,
    )
    out: str = output_file(
        f"{RUNS}/export/encoder.pt", "Output file; OUT.json beside it records the input normalisation, image size, channels and stem."
    )
