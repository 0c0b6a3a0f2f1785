"""``hcl linear-eval``'s options: the linear readout of the frozen encoder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import BATCH_LIMIT, DEVICES, FEATURES, PREPARED, RUNS, SEED_LIMIT, StageConfig, param, runtime
from hcl_cli.errors import UsageError


@dataclass(init=False, frozen=True)
class LinearConfig(StageConfig):
    """Linear readout of the frozen encoder: on its fixed, standardised embeddings, or the papers' protocol on augmented views."""

    group: ClassVar[str] = "linear"
    command: ClassVar[str] = "linear-eval"
    protocol: str = param(
        "fixed",
        "fixed: one linear layer fitted on the standardised embeddings of hcl embed (--embeddings), quick; "
        "paper: the linear evaluation of HCL's code that H-SCL, HCL-OT and UnDiMix reuse: minibatch Adam on the raw features "
        "of freshly augmented train images through the frozen encoder, every epoch (--model, --data; needs optimizer adam; "
        "the papers use epochs 100, batch_size 512, lr 0.001, weight_decay 1e-6).",
        choices=("fixed", "paper"),
    )
    feature: str = param("backbone", "Which embedding to read out: backbone or projection.", choices=FEATURES)
    optimizer: str = param("lbfgs", "Full-batch lbfgs, or adam (minibatch under protocol paper).", choices=("lbfgs", "adam"))
    epochs: int = param(100, "Iterations of L-BFGS, or epochs of Adam.", minimum=1, maximum=1_000_000)
    batch_size: int = param(
        512, "Train images per Adam step under protocol paper (fixed fits the whole split at once).", minimum=1, maximum=BATCH_LIMIT
    )
    lr: float = param(1.0, "Learning rate (L-BFGS step size, or Adam lr).", minimum=1e-8, maximum=100.0)
    weight_decay: float = param(
        1e-3,
        "L2 penalty (weight_decay / 2) * ||W||^2 added to the mean cross-entropy (protocol paper: Adam's weight_decay, on W and the bias, as the papers' code).",
        minimum=0.0,
        maximum=1000.0,
    )
    seed: int = param(0, "Seed of the initialisation (protocol paper: also of shuffling and augmentation).", minimum=0, maximum=SEED_LIMIT)
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings from hcl embed (read by protocol fixed).")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder from hcl pretrain (read by protocol paper).")
    data: str = runtime(PREPARED, "Prepared dataset folder (read by protocol paper).")
    out: str = runtime(f"{RUNS}/metrics/linear.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)

    def check(self) -> None:
        if self.protocol == "paper" and self.optimizer != "adam":
            raise UsageError("linear protocol paper trains by minibatch Adam: set optimizer adam (--optimizer adam)")
