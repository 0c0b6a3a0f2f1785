"""The embeddings artifact: the frozen encoder's features of the train and test splits.

``data/embeddings.safetensors`` (kind ``"embeddings"``) holds the frozen encoder's features of the
train and test splits: ``{split}_backbone`` float32 (N, F), ``{split}_projection`` float32 (N, P) and
``{split}_labels`` int64 (N,), with the dataset's ``classes`` in the sidecar, and under ``inputs`` the
sha256 of the encoder and of the prepared dataset's files they embed (:mod:`hcl_cli.artifacts.binding`),
beside the encoder's own record of the prepared dataset it trained on (``encoder.inputs``).
:func:`save_embeddings` is the only writer and :func:`load_embeddings` the only reader; both refuse an
inconsistent file with one line naming it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from hcl_cli.artifacts import TensorSpec, check_made_from, library_versions, load_artifact, read_inputs, save_artifact, tensor_output
from hcl_cli.config.base import FEATURES
from hcl_cli.errors import InputError, UsageError

EMBEDDINGS_KIND = "embeddings"
EMBEDDINGS_OUTPUT = tensor_output("embeddings artifact", (EMBEDDINGS_KIND,))
"""The embeddings as an output (:func:`~hcl_cli.artifacts.check_replaceable`)."""
SPLITS = ("train", "test")
TENSOR_SPECS: dict[str, TensorSpec] = {
    **{f"{split}_{feature}": TensorSpec(torch.float32, 2) for split in SPLITS for feature in FEATURES},
    **{f"{split}_labels": TensorSpec(torch.int64, 1) for split in SPLITS},
}


@dataclass(frozen=True)
class EvalSet:
    """One feature's labelled embeddings: the train split is the kNN bank / readout training set, the test split is scored."""

    feature: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: list[str]
    scored: dict[str, str]
    """What a metrics file of these embeddings records it scored (:mod:`hcl_cli.artifacts.binding`): the sha256 of the
    embeddings file (its sidecar's, checked on reading) and, when they record it, of their encoder."""
    modality: str = "image"
    """The modality of the embedded samples (:mod:`hcl_cli.modality`; ``image`` in a file written before graphs recorded theirs)."""
    encoder_config: dict[str, Any] = field(default_factory=dict)
    """The pretrain configuration of their encoder, as its sidecar records it (empty when the file records none)."""

    @property
    def num_classes(self) -> int:
        return len(self.classes)


def save_embeddings(path: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> None:
    """Write the embeddings artifact atomically; ``meta`` holds ``dataset``, ``modality``, ``classes``, ``encoder`` and ``inputs``."""
    for name, spec in TENSOR_SPECS.items():
        tensor = tensors.get(name)
        if tensor is None or tensor.dtype != spec.dtype or tensor.ndim != spec.ndim:
            raise InputError(f"{path}: embeddings need {name!r} as {str(spec.dtype).removeprefix('torch.')} with {spec.ndim} dims")
    _check_consistent(path, tensors, FEATURES)
    save_artifact(path, tensors, EMBEDDINGS_KIND, {"versions": library_versions(), **meta})


def load_embeddings(path: str | os.PathLike[str], feature: str) -> EvalSet:
    """Read one feature's train and test embeddings with their labels, on the CPU.

    Raises a one-line :class:`UsageError` for an unknown feature and :class:`HclError` for a file
    whose embeddings and labels differ in length, whose train and test dimensions differ, whose
    embeddings are not finite, whose labels are missing, unlabelled (-1) or outside the listed classes,
    or that embeds another prepared dataset than its encoder trained on.
    """
    if feature not in FEATURES:
        raise UsageError(f"--feature {feature!r} is unknown: {path} holds {', '.join(FEATURES)}")
    names = [f"{split}_{kind}" for split in SPLITS for kind in (feature, "labels")]
    tensors, sidecar = load_artifact(path, EMBEDDINGS_KIND, {name: TENSOR_SPECS[name] for name in names})
    classes = sidecar.get("classes")
    if not isinstance(classes, list) or not classes:
        raise InputError(f"{path}: the sidecar lists no classes, so the labels cannot be evaluated")
    _check_consistent(path, tensors, (feature,))
    encoder = sidecar.get("encoder")
    trained_on = read_inputs(encoder, f"{path}: encoder") if isinstance(encoder, dict) else {}
    made_from = read_inputs(sidecar, str(path))
    embedded = made_from.get("corpus", made_from.get("prepared"))  # a SentEval task's encoder trained on its corpus
    check_made_from("its encoder", trained_on, "prepared", f"{path} (the prepared dataset it embeds)", embedded)
    for split in SPLITS:
        if not tensors[f"{split}_{feature}"].isfinite().all():
            raise InputError(f"{path}: {split}_{feature} holds NaN or infinite values")
        labels = tensors[f"{split}_labels"]
        if (labels < 0).any():
            raise InputError(
                f"{path}: {split}_labels holds -1 (unlabelled images); kNN and linear evaluation need labelled {split} embeddings"
            )
        if (labels >= len(classes)).any():
            raise InputError(f"{path}: {split}_labels holds label {int(labels.max())}, but the sidecar lists {len(classes)} classes")
    return EvalSet(
        feature=feature,
        train_x=tensors[f"train_{feature}"],
        train_y=tensors["train_labels"],
        test_x=tensors[f"test_{feature}"],
        test_y=tensors["test_labels"],
        classes=[str(name) for name in classes],
        scored={"embeddings": sidecar["sha256"], **{role: made_from[role] for role in ("encoder",) if role in made_from}},
        modality=str(sidecar.get("modality", "image")),
        encoder_config=dict(encoder["config"]) if isinstance(encoder, dict) and isinstance(encoder.get("config"), dict) else {},
    )


def _check_consistent(path: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor], features: Sequence[str]) -> None:
    """Each split is non-empty with one label per embedding, and train and test share each feature's dimension."""
    for split in SPLITS:
        count = len(tensors[f"{split}_labels"])
        if count == 0:
            raise InputError(f"{path}: the {split} split holds no embeddings")
        for feature in features:
            rows = len(tensors[f"{split}_{feature}"])
            if rows != count:
                raise InputError(f"{path}: {split}_{feature} holds {rows} embeddings but {split}_labels holds {count} labels")
    for feature in features:
        train_dim, test_dim = tensors[f"train_{feature}"].shape[1], tensors[f"test_{feature}"].shape[1]
        if train_dim != test_dim:
            raise InputError(f"{path}: train_{feature} has dimension {train_dim} but test_{feature} has {test_dim}")
