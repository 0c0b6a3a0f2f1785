"""``hcl linear-eval``'s options: the linear readout of the frozen encoder."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import (
    BATCH_LIMIT,
    DEVICES,
    FEATURES,
    PREPARED,
    RUNS,
    SEED_LIMIT,
    StageConfig,
    output_file,
    param,
    runtime,
    threads_option,
)
from hcl_cli.errors import UsageError

SVM = ("protocol", ("svm",))
"""What the options of the SVM protocol alone declare as their ``read_when``."""
TRAINED = ("protocol", ("fixed", "paper"))
"""What the options of the two protocols that train a linear layer declare as their ``read_when``."""


C_RANGE = (1e-6, 1e6)
"""The C values the SVM protocol takes: three decades either side of the papers' grid (1e-3 to 1e3, HCL's
graph/evaluate_embedding.py line 22, ``'C':[0.001, 0.01,0.1,1,10,100,1000]``); a C of 1e-320 (subnormal) fits nothing and predicts the majority class."""


def parse_c_grid(text: str | tuple[float, ...] | list[float]) -> tuple[float, ...]:
    """``"1e-3,1,1000"`` (or a sequence of numbers) as floats in :data:`C_RANGE`, at least one."""
    try:
        values = tuple(float(part) for part in (text.split(",") if isinstance(text, str) else text))
    except (TypeError, ValueError):
        raise ValueError("must be comma-separated numbers (the C values)") from None
    low, high = C_RANGE
    if not values or not all(math.isfinite(value) and low <= value <= high for value in values):
        raise ValueError(f"must be numbers in [{low:g}, {high:g}]")
    return values


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
        "the papers use epochs 100, batch_size 512, lr 0.001, weight_decay 1e-6); "
        "svm (graphs): the graph papers' SVM, C chosen by an inner cross-validation within --svm-folds stratified folds over all "
        "graphs (train and test) of the embeddings, --svm-repeats times; "
        "senteval (sentences): SentEval's logistic regression, L2 by inner cross-validation, --senteval-folds folds over every "
        "item of MR, CR, SUBJ, MPQA, the train/test split of TREC and MRPC (MRPC on [|u-v|, u*v]); needs --data, the task's folder.",
        choices=("fixed", "paper", "svm", "senteval"),
    )
    senteval_folds: int = param(
        10,
        "Protocol senteval: outer and inner folds (SentEval's kfold: 10).",
        minimum=2,
        maximum=100,
        read_when=("protocol", ("senteval",)),
    )
    senteval_baselines: bool = param(
        True,
        "Protocol senteval: also read out the untrained encoder (the run's architecture and seed) and the mean untrained word "
        "embeddings on the task, the baselines that say whether training helped.",
        read_when=("protocol", ("senteval",)),
    )
    svm_folds: int = param(10, "Protocol svm: outer stratified folds (HCL App. D.2: 10).", minimum=2, maximum=1000, read_when=SVM)
    svm_repeats: int = param(
        1,
        "Protocol svm: outer cross-validations, each with its own seeded split (mean and std over all folds).",
        minimum=1,
        maximum=1000,
        read_when=SVM,
    )
    svm_c_grid: str = param(
        "1e-3,1e-2,1e-1,1,10,100,1000",
        "Protocol svm: the C values the inner search picks from, comma-separated (evaluate_embedding.py's grid).",
        parse=parse_c_grid,
        read_when=SVM,
    )
    svm_inner_folds: int = param(
        5, "Protocol svm: inner folds of the search for C (GridSearchCV's cv=5).", minimum=2, maximum=1000, read_when=SVM
    )
    feature: str = param("backbone", "Which embedding to read out: backbone or projection.", choices=FEATURES)
    optimizer: str = param(
        "lbfgs", "Full-batch lbfgs, or adam (minibatch under protocol paper).", choices=("lbfgs", "adam"), read_when=TRAINED
    )
    epochs: int = param(100, "Iterations of L-BFGS, or epochs of Adam.", minimum=1, maximum=1_000_000, read_when=TRAINED)
    batch_size: int = param(
        512,
        "Train images per Adam step under protocol paper (fixed fits the whole split at once).",
        minimum=1,
        maximum=BATCH_LIMIT,
        read_when=("protocol", ("paper",)),
    )
    lr: float = param(1.0, "Learning rate (L-BFGS step size, or Adam lr).", minimum=1e-8, maximum=100.0, read_when=TRAINED)
    weight_decay: float = param(
        1e-3,
        "L2 penalty (weight_decay / 2) * ||W||^2 added to the mean cross-entropy (protocol paper: Adam's weight_decay, on W and the bias, as the papers' code).",
        minimum=0.0,
        maximum=1000.0,
        read_when=TRAINED,
    )
    seed: int = param(
        0,
        "Seed of the initialisation (protocol paper: also of shuffling and augmentation; svm: of the folds).",
        minimum=0,
        maximum=SEED_LIMIT,
    )
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings from hcl embed (read by protocols fixed and svm).")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder from hcl pretrain (read by protocol paper).")
    data: str = runtime(PREPARED, "Prepared dataset folder (read by protocols paper and senteval).")
    out: str = output_file(f"{RUNS}/metrics/linear.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)
    threads: str = threads_option()

    def check(self) -> None:
        if self.protocol == "paper" and self.optimizer != "adam":
            raise UsageError("linear protocol paper trains by minibatch Adam: set optimizer adam (--optimizer adam)")
