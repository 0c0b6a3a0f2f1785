"""What every encoder artifact records beside its architecture, and the checks every encoder reader shares.

An encoder artifact is a safetensors state_dict with a JSON sidecar (:mod:`hcl_cli.artifacts.tensors`);
each modality's encoder module (:mod:`hcl_cli.image.encoder`, :mod:`hcl_cli.graph.encoder`) adds the
fields that rebuild its model and ends its reader in :func:`load_recorded_weights`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from hcl_cli.artifacts.binding import read_inputs
from hcl_cli.artifacts.tensors import SCHEMA_VERSION
from hcl_cli.errors import InputError

RECORDED_FIELDS = {
    "config": (dict, "a JSON object"),
    "epoch": (int, "an integer"),
    "seed": (int, "an integer"),
    "dataset": (str, "a string"),
    "world_size": (int, "an integer"),
    "run": (dict, "a JSON object"),
    "learned": (dict, "a JSON object"),
    "versions": (dict, "a JSON object"),
    "inputs": (dict, "a JSON object"),
}
"""What pretraining records in an encoder's sidecar beside the architecture, with its JSON type; each may be absent."""
ARTIFACT_KEYS = ("schema_version", "kind", "tensors", "sha256")
"""The sidecar keys of the artifact itself, checked by :func:`~hcl_cli.artifacts.load_artifact`."""


@dataclass(frozen=True, kw_only=True)
class RecordedEncoder:
    """What every encoder's sidecar holds beside its architecture: how it was trained, and the artifact's own keys.

    The recorded fields (:data:`RECORDED_FIELDS`): the ``config`` (the pretrain parameters), the
    ``epoch`` count, the ``seed``, the ``dataset`` name, the ``world_size`` (processes), the ``run``
    record (when, where, which commit), the ``learned`` loss tensors, the library ``versions``, and the
    ``inputs`` it was trained on (the sha256 of the prepared dataset's files, :mod:`hcl_cli.artifacts.binding`);
    a sidecar that lacks one reads it as None (``world_size`` as 1, ``learned``, ``versions`` and
    ``inputs`` as empty). ``schema_version``, ``kind``, ``tensors`` and ``sha256`` are the artifact's own keys, as
    :func:`~hcl_cli.artifacts.save_artifact` wrote and :func:`~hcl_cli.artifacts.load_artifact` checked them.
    """

    config: dict[str, Any] | None = None
    epoch: int | None = None
    seed: int | None = None
    dataset: str | None = None
    world_size: int = 1
    run: dict[str, Any] | None = None
    learned: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    kind: str
    tensors: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""


def load_recorded_weights(
    path: str | os.PathLike[str], model: nn.Module, tensors: dict[str, Tensor], values: Mapping[str, Any]
) -> dict[str, Any]:
    """Load checked ``tensors`` into ``model`` after checking the sidecar's :data:`RECORDED_FIELDS` and the weights' finiteness.

    Returns the :class:`RecordedEncoder` fields: the recorded fields the sidecar has and the
    artifact's own keys. A field of the wrong JSON type or a NaN or infinite weight is a one-line
    HclError naming the file. Every encoder reader (images, graphs) ends here.
    """
    recorded = {name: values[name] for name in RECORDED_FIELDS if values.get(name) is not None}
    for name, value in recorded.items():
        kind, expected = RECORDED_FIELDS[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError(f"{path}: sidecar field {name!r} must be {expected} (got {value!r})")
    read_inputs(recorded, str(path))
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not tensor.isfinite().all():
            raise InputError(f"{path}: tensor {name!r} holds NaN or infinite weights")
    model.load_state_dict(tensors)
    return {**recorded, **{key: values[key] for key in ARTIFACT_KEYS}}


def key_mismatch(expected: Mapping[str, Any], found: Mapping[str, Any]) -> str:
    """How the keys of ``found`` differ from those of ``expected``, the counts that are not 0 with two examples each:
    ``2 keys missing (e.g. conv1.weight, bn1.bias); 1 unexpected (e.g. fc.weight)``; "" when they are the same."""
    parts = []
    for count, keys in (("missing", sorted(expected.keys() - found.keys())), ("unexpected", sorted(found.keys() - expected.keys()))):
        if keys:
            noun = ("key " if len(keys) == 1 else "keys ") if not parts else ""
            parts.append(f"{len(keys)} {noun}{count} (e.g. {', '.join(keys[:2])})")
    return "; ".join(parts)


def check_state_dict(path: str | os.PathLike[str], expected: dict[str, Tensor], found: dict[str, Tensor]) -> None:
    """Raise a one-line HclError unless ``found`` has exactly the keys, shapes and dtypes of ``expected``."""
    if mismatch := key_mismatch(expected, found):
        raise InputError(f"{path}: weights do not match the architecture its sidecar names ({mismatch})")
    for name, reference in expected.items():
        tensor = found[name]
        if tensor.shape != reference.shape or tensor.dtype != reference.dtype:
            raise InputError(
                f"{path}: tensor {name!r} is {str(tensor.dtype).removeprefix('torch.')} {list(tensor.shape)}, "
                f"the architecture needs {str(reference.dtype).removeprefix('torch.')} {list(reference.shape)}"
            )
