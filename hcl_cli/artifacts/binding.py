"""Artifacts bound to the artifacts they were made from, by the sha256 every tensor artifact's sidecar records.

What a stage makes records under :data:`INPUTS` (in its sidecar; a metrics file at its top level) what it
was made from, by role: ``prepared`` (the sha256 of each tensor file of the prepared folder, by name),
``encoder`` and ``embeddings`` (the sha256 of that tensor file), ``training_log`` (the sha256 of each file of
the training log, :func:`log_sha256`), ``init`` (the sha256 of the weights ``hcl pretrain --init`` started from). The encoder records the prepared folder it trained on and the
training log its training wrote, the embeddings the encoder and the prepared folder they embed, a metrics file the
embeddings it scored (the linear readout's ``paper`` protocol: the encoder and the prepared folder). A
reader given one of those inputs compares (:func:`check_made_from`), and refuses in one line inputs that
do not belong together: a prepared folder replaced since the encoder trained on it, another run's
embeddings beside an encoder, another encoder's metrics. An artifact written before hcl recorded its
inputs records none, and is not compared.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hcl_cli.artifacts.owned import owned_files
from hcl_cli.artifacts.record import sha256_of
from hcl_cli.artifacts.tensors import sidecar_path
from hcl_cli.errors import InputError, shown

INPUTS = "inputs"
"""The key under which an artifact records what it was made from."""
ROLES = {
    "prepared": "prepared dataset",
    "corpus": "prepared text corpus",
    "encoder": "encoder",
    "embeddings": "embeddings",
    "training_log": "training log",
    "init": "initial weights",
}
"""Each input's role, and its name in messages."""

Digests = str | dict[str, str]
"""An input's record: the sha256 of a tensor file, or of each tensor file of a folder, by name."""


def recorded_sha256(path: str | os.PathLike[str]) -> str | None:
    """The sha256 that the sidecar of the tensor artifact ``path`` records (None when it records none or cannot be
    read: the artifact's own reader says why, and checks the file against it)."""
    try:
        values = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    digest = values.get("sha256") if isinstance(values, dict) else None
    return digest if isinstance(digest, str) else None


def prepared_sha256(folder: str | os.PathLike[str]) -> dict[str, str]:
    """The sha256 of each tensor file of the prepared ``folder``, by name, as their sidecars record them (the files its
    manifest lists, else every ``*.safetensors`` in it); a file whose sidecar records none is left out."""
    root = Path(folder)
    listed = owned_files(root)
    try:
        names = sorted(listed) if listed is not None else sorted(os.listdir(root))
    except OSError:
        return {}
    digests = {name: recorded_sha256(root / name) for name in names if name.endswith(".safetensors")}
    return {name: digest for name, digest in digests.items() if digest is not None}


LOG_SUMMARY = "metrics.json"
LOG_CURVES = Path("plots") / "metrics"


def log_sha256(folder: str | os.PathLike[str]) -> dict[str, str]:
    """The sha256 of each file of the training log in ``folder`` (its ``metrics.json`` and ``plots/metrics/*.tsv``), by
    path relative to it; empty when it holds none."""
    root = Path(folder)
    curves = root / LOG_CURVES
    names = (
        [LOG_SUMMARY, *(f"{LOG_CURVES.as_posix()}/{name}" for name in sorted(os.listdir(curves)) if name.endswith(".tsv"))]
        if curves.is_dir()
        else [LOG_SUMMARY]
    )
    digests = {name: sha256_of(root / name) for name in names if (root / name).is_file() and not (root / name).is_symlink()}
    return {name: digest for name, digest in digests.items() if digest is not None}


def read_inputs(values: Mapping[str, Any], source: str) -> dict[str, Digests]:
    """The :data:`INPUTS` record of an artifact's ``values`` (empty when absent), checked: roles of :data:`ROLES`, each a
    sha256 or an object of them; anything else is a one-line HclError naming ``source``."""
    inputs = values.get(INPUTS, {})
    if not isinstance(inputs, dict):
        raise InputError(f"{source}: {INPUTS!r} must be an object (got {type(inputs).__name__})")
    for role, digests in inputs.items():
        files = digests.values() if isinstance(digests, dict) else [digests]
        if role not in ROLES or not all(isinstance(digest, str) for digest in files):
            raise InputError(f"{source}: {INPUTS}.{shown(role)} must be one of {', '.join(ROLES)}, recording sha256 strings")
    return inputs


def check_made_from(made: str, inputs: Mapping[str, Digests], role: str, given: str, actual: Digests | None) -> None:
    """One-line HclError when ``made`` (an artifact, as messages name it) records in ``inputs`` another ``role`` input than
    ``actual`` (the digests of ``given``, e.g. ``--data data/prepared``). Nothing is compared when either is unknown."""
    recorded = inputs.get(role)
    if not recorded or not actual or recorded == actual:
        return
    detail = ""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        differing = sorted(name for name in recorded.keys() | actual.keys() if recorded.get(name) != actual.get(name))
        detail = f" ({', '.join(shown(name) for name in differing[:3])} {'differs' if len(differing) == 1 else 'differ'})"
    raise InputError(
        f"{given} is not the {ROLES[role]} that {made} was made from{detail}: they come from different runs; "
        "run the stages again, or give the inputs of one run"
    )
