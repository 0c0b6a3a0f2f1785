"""Resumable training checkpoints, without pickle.

A checkpoint holds everything a bitwise-exact resume needs: the model's state_dict (with a
momentum queue, the key encoder's and the queue's too: the trainer hands its ``state``), the
optimizer's state (its per-parameter tensors flattened into safetensors, its ``param_groups`` in
JSON), the RNG states of torch (CPU and every CUDA device), NumPy and Python, the position in
training (the next epoch and the steps of it already done), the training loop's JSON state (the
sampler's current beta and threshold, the epoch's running sums) and the run's identity (the
config's parameters, the dataset, and the sha256 of the prepared dataset's files it trains on),
which a resume must match except for ``epochs``. Tensors
go to ``NAME.safetensors`` and the rest to its JSON sidecar, both through
:func:`hcl_cli.artifacts.save_artifact` (atomic). Nothing is pickled.

The folder keeps the newest checkpoint pair, named by its position (``epoch-EEEE-step-SSSSSS``), and
a pointer file ``latest.json`` naming it. A save writes the new pair first, then replaces the pointer
(atomically), then deletes the older pairs; so a process killed at any moment of a save leaves
the pointer on a complete checkpoint, the previous one or the new one, never on half of one. A
folder whose pointer is gone (deleted by hand) resumes from its newest complete pair, one whose
tensor file matches the sha256 its sidecar records; the pointer is never the only record of a run.
The store deletes only checkpoint pairs and their temporary files, and ``pretrain`` refuses a folder
whose pointer or checkpoint-named files hcl did not write (:meth:`CheckpointStore.check_replaceable`).
The optimizer's and the RNGs' states are converted by :mod:`hcl_cli.checkpoint_state`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hcl_cli.artifacts import (
    TensorSpec,
    check_replaceable,
    first_line,
    is_finite_number,
    library_versions,
    load_artifact,
    read_json,
    recorded_output,
    save_artifact,
    sidecar_path,
    tensor_output,
    write_output,
)
from hcl_cli.checkpoint_state import capture_rng, flatten_optimizer, match_parameter_layouts, restore_rng, unflatten_optimizer
from hcl_cli.errors import HclError, InputError, UsageError, shown
from hcl_cli.history import read_history

CHECKPOINT_KIND = "checkpoint"
POINTER_FILE = "latest.json"
CHECKPOINT_TENSORS = {"rng.torch": TensorSpec(torch.uint8, 1), "rng.numpy": TensorSpec(torch.int64, 1)}
RESUMABLE_CHANGES = ("epochs",)
CHECKPOINT_NAME = re.compile(r"epoch-(\d{4,})-step-(\d{6,})\.safetensors")
"""The file name :attr:`TrainingPosition.name` gives a checkpoint's tensors."""
CHECKPOINT_FILE = re.compile(r"epoch-\d{4,}-step-\d{6,}\.(safetensors|json)")
"""A checkpoint's tensors or sidecar: the only files of the folder a save or a fresh start deletes, with their temporary files."""
CHECKPOINT_TEMPORARY = re.compile(r"\.(hcl\.)?(epoch-\d{4,}-step-|latest\.json).*\.tmp")
"""The temporary file of a checkpoint or of the pointer that a killed save left (:func:`~hcl_cli.artifacts.temp_sibling`;
``.NAME.<random>.tmp`` from earlier versions)."""
CHECKPOINT_OUTPUT = tensor_output("checkpoint", (CHECKPOINT_KIND,))
POINTER_OUTPUT = recorded_output("checkpoint pointer")


@dataclass(frozen=True)
class TrainingPosition:
    """Where training stands: ``epoch`` is the next epoch to run (0-based), ``step`` the steps of it already done."""

    epoch: int
    step: int

    @property
    def name(self) -> str:
        """The checkpoint file stem for this position."""
        return f"epoch-{self.epoch:04d}-step-{self.step:06d}"

    def describe(self) -> str:
        """For messages, 1-based: ``after epoch 3`` at an epoch boundary, else ``epoch 4, step 12``."""
        return f"after epoch {self.epoch}" if self.step == 0 else f"epoch {self.epoch + 1}, step {self.step}"


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint's position, the training loop's JSON state saved with it, and its file."""

    position: TrainingPosition
    loop_state: dict[str, Any]
    path: Path


class CheckpointMismatch(UsageError):
    """``--resume`` found a checkpoint of another run: other parameters, another dataset, or more epochs than asked for.

    Raised before any state is restored, so the caller may start over instead; ``reason`` says why.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"--resume: {reason}; only --epochs may grow: run without --resume to start over")
        self.reason = reason


class CheckpointStore:
    """The resumable checkpoints of one run, in ``folder`` (``OUT/checkpoints``)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @property
    def pointer(self) -> Path:
        return self.folder / POINTER_FILE

    def check_replaceable(self, option: str) -> None:
        """Refuse, before training, a folder whose files a save or a fresh start would replace or delete (the pointer, a
        file named as a checkpoint) when one is not hcl's own (:func:`~hcl_cli.artifacts.check_replaceable`); ``option``
        names the output that holds the folder. Its other files are never touched."""
        check_replaceable(option, self.pointer, POINTER_OUTPUT)
        names = os.listdir(self.folder) if self.folder.is_dir() else []
        for path in sorted({(self.folder / name).with_suffix(".safetensors") for name in names if CHECKPOINT_FILE.fullmatch(name)}):
            check_replaceable(option, path, CHECKPOINT_OUTPUT)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None when the folder holds none.

        The pointer names it; without a pointer, the complete pair (:func:`_is_complete`) of the
        furthest position is the newest, as a save leaves at most the previous pair beside it.
        """
        if not self.pointer.is_file():
            return self._newest_complete()
        name = read_json(self.pointer, what="checkpoint pointer").get("checkpoint")
        if not isinstance(name, str) or Path(name).name != name or not name.endswith(".safetensors"):
            raise InputError(f"{self.pointer}: 'checkpoint' must name a .safetensors file in {self.folder} (got {name!r})")
        return self.folder / name

    def _newest_complete(self) -> Path | None:
        """The checkpoint of the furthest position whose pair is complete; None when no pair is.

        A single incomplete checkpoint is a first save that a kill interrupted: there is nothing to
        resume, and None lets the run start over. Several checkpoints of which none is complete
        is a one-line HclError: a save leaves the previous pair complete beside the new one, so
        this is damage, and starting over silently would throw away a run that may be days old.
        """
        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputError(f"cannot read {self.folder}: {exc.strerror or exc}") from exc
        found = [(int(match[1]), int(match[2]), name) for name in names if (match := CHECKPOINT_NAME.fullmatch(name))]
        for *_, name in sorted(found, reverse=True):
            if _is_complete(self.folder / name):
                return self.folder / name
        if len(found) > 1:
            raise InputError(
                f"{self.folder} has no {POINTER_FILE} and none of its checkpoints is complete "
                f"({', '.join(name for *_, name in found[:3])}): run without --resume to start over"
            )
        return None

    def save(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        position: TrainingPosition,
        loop_state: Mapping[str, Any],
        identity: Mapping[str, Any],
    ) -> Path:
        """Write a checkpoint at ``position``, point ``latest.json`` at it, and delete the older ones.

        ``loop_state`` is JSON the training loop needs back (the sampler's current beta and
        threshold, the epoch's running sums). ``identity`` (the config's params and the dataset's
        name) must match on resume, except for the keys in :data:`RESUMABLE_CHANGES`. A position
        already saved (the newest checkpoint) is not written again: its state is the same.
        """
        path = self.folder / f"{position.name}.safetensors"
        if self.latest() == path:
            return path
        optimizer_tensors, optimizer_groups = flatten_optimizer(optimizer)
        rng_tensors, rng_json = capture_rng()
        tensors = {**{f"model.{name}": t for name, t in model.state_dict().items()}, **optimizer_tensors, **rng_tensors}
        meta = {
            "position": {"epoch": position.epoch, "step": position.step},
            "loop_state": dict(loop_state),
            "identity": dict(identity),
            "optimizer": {"param_groups": optimizer_groups},
            "rng": rng_json,
            "versions": library_versions(),
        }
        save_artifact(path, tensors, CHECKPOINT_KIND, meta)
        write_output(self.pointer, json.dumps({"checkpoint": path.name}, indent=2) + "\n", POINTER_OUTPUT, "--out")
        self._remove_all_but(path)
        return path

    def load(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        identity: Mapping[str, Any],
        epochs: int,
        *,
        finished_run: bool = True,
        steps_per_epoch: int | None = None,
        epoch_total_fields: Collection[str] | None = None,
    ) -> Checkpoint | None:
        """Restore model, optimizer and RNG states from the newest checkpoint; None when there is none.

        A checkpoint made with other parameters (other than ``epochs``), on another dataset, past
        ``epochs``, (with ``finished_run=False``) of a run that already did all ``epochs``, with a
        step past the end of an epoch of ``steps_per_epoch`` steps, or written by an hcl that did
        not bind its files with a hash, raises :class:`CheckpointMismatch` before anything is
        restored. A corrupt or foreign one is a one-line HclError naming the file and the field:
        among them a ``loop_state.epoch_totals`` that is not an object of numbers, or (when
        ``epoch_total_fields`` is given) one whose keys are not exactly those fields.
        """
        path = self.latest()
        if path is None:
            return None
        try:
            if "sha256" not in read_json(sidecar_path(path), what="checkpoint sidecar"):
                raise CheckpointMismatch(f"{path} was written by an older hcl (its sidecar records no 'sha256')")
            tensors, sidecar = load_artifact(path, CHECKPOINT_KIND, CHECKPOINT_TENSORS)
        except CheckpointMismatch:
            raise
        except HclError as exc:  # truncated, corrupt or missing: say how to go on, under dvc.yaml's --resume too
            raise UsageError(
                f"{first_line(exc)}; to go on, move {shown(self.folder)} aside (pretrain then starts over), "
                "or run without --resume to start over"
            ) from exc
        position = _read_position(path, sidecar.get("position"))
        _check_identity(path, sidecar.get("identity"), identity)
        if position.epoch > epochs:
            raise CheckpointMismatch(f"{path} has done {position.epoch} epochs, more than --epochs {epochs}")
        if position.epoch == epochs and not finished_run:
            raise CheckpointMismatch(f"{path} is a finished run of {epochs} epochs")
        if steps_per_epoch is not None and position.step > steps_per_epoch:
            raise CheckpointMismatch(f"{path}: 'position.step' {position.step} lies past the end of an epoch of {steps_per_epoch} steps")
        loop_state = _read_loop_state(path, sidecar.get("loop_state"), epoch_total_fields)
        try:
            model.load_state_dict({name.removeprefix("model."): t for name, t in tensors.items() if name.startswith("model.")})
            optimizer.load_state_dict(unflatten_optimizer(tensors, sidecar["optimizer"]["param_groups"]))
            match_parameter_layouts(optimizer)
            restore_rng(tensors, sidecar["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise InputError(f"{path}: not a checkpoint of this model ({first_line(exc)})") from exc
        return Checkpoint(position, loop_state, path)

    def unfinished(self, identity: Mapping[str, Any]) -> str | None:
        """The newest checkpoint when it is an unfinished run, which a fresh start is about to delete: where it stopped
        and whether ``identity`` differs from its (:func:`identity_changes`); None when there is none, or when it is a
        finished run's or cannot be read (nothing to warn of)."""
        try:
            path = self.latest()
            if path is None:
                return None
            sidecar = read_json(sidecar_path(path), what="checkpoint sidecar")
            saved, position = sidecar["identity"], _read_position(path, sidecar["position"])
            if position.epoch >= saved["epochs"]:
                return None
        except (HclError, KeyError, TypeError):
            return None
        changes = identity_changes(saved, identity)
        settings = f"other settings ({changes})" if changes else "these settings (--resume continues it)"
        return f"{path} is an unfinished run ({position.describe()} of {saved['epochs']} epochs) of {settings}"

    def clear(self) -> None:
        """Delete every checkpoint (a fresh run starts over), the pointer first."""
        self.pointer.unlink(missing_ok=True)
        self._remove_all_but(None)

    def _remove_all_but(self, keep: Path | None) -> None:
        """Delete the older checkpoint pairs and the temporary files of a killed save; nothing else in the folder."""
        kept = {keep.name, sidecar_path(keep).name} if keep else set()
        for name in os.listdir(self.folder) if self.folder.is_dir() else []:
            if name not in kept and (CHECKPOINT_FILE.fullmatch(name) or CHECKPOINT_TEMPORARY.fullmatch(name)):
                (self.folder / name).unlink(missing_ok=True)


def _is_complete(path: Path) -> bool:
    """Whether ``path`` and its sidecar form a whole checkpoint: the tensor file's sha256 is the one the sidecar records."""
    if not (path.is_file() and sidecar_path(path).is_file()):
        return False
    try:
        sidecar = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
        with open(path, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(sidecar, dict) and sidecar.get("kind") == CHECKPOINT_KIND and sidecar.get("sha256") == digest


def _read_position(path: Path, recorded: Any) -> TrainingPosition:
    """The sidecar's ``position``: non-negative integers ``epoch`` and ``step``."""
    if not isinstance(recorded, dict):
        raise InputError(f"{path}: the sidecar records no 'position' object (got {recorded!r})")
    for field in ("epoch", "step"):
        value = recorded.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"{path}: the sidecar's 'position.{field}' must be a non-negative integer (got {value!r})")
    return TrainingPosition(recorded["epoch"], recorded["step"])


def _read_loop_state(path: Path, recorded: Any, epoch_total_fields: Collection[str] | None) -> dict[str, Any]:
    """The sidecar's ``loop_state``, its ``epoch_totals`` (if any, or if fields are asked for) an object of numbers, its
    ``history`` (if any) rows of metrics under the names the training log writes (:func:`~hcl_cli.history.read_history`)."""
    if not isinstance(recorded, dict):
        raise InputError(f"{path}: the sidecar records no 'loop_state' object (got {recorded!r})")
    if "history" in recorded:
        recorded = {**recorded, "history": read_history(recorded["history"], f"{path}: the sidecar's 'loop_state.history'")}
    if "epoch_totals" not in recorded and epoch_total_fields is None:
        return dict(recorded)
    totals = recorded.get("epoch_totals")
    if not isinstance(totals, dict):
        raise InputError(f"{path}: the sidecar's 'loop_state.epoch_totals' must be an object of numbers (got {totals!r})")
    for key, value in totals.items():
        if not is_finite_number(value):
            raise InputError(f"{path}: the sidecar's 'loop_state.epoch_totals.{key}' must be a finite number (got {value!r})")
    if epoch_total_fields is not None:
        missing, extra = sorted(set(epoch_total_fields) - totals.keys()), sorted(totals.keys() - set(epoch_total_fields))
        if missing or extra:
            raise InputError(
                f"{path}: the sidecar's 'loop_state.epoch_totals' lacks {', '.join(missing) or 'nothing'} "
                f"and has unknown {', '.join(extra) or 'nothing'} (expected {', '.join(epoch_total_fields)})"
            )
    return dict(recorded)


def identity_changes(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """Every key (but those of :data:`RESUMABLE_CHANGES`) whose value differs, ``beta 1.0 -> 2.0, ...``; empty when none does."""
    changed = [key for key in sorted(saved.keys() | current.keys()) if key not in RESUMABLE_CHANGES and saved.get(key) != current.get(key)]
    return ", ".join(f"{key} {saved.get(key)!r} -> {current.get(key)!r}" for key in changed)


def _check_identity(path: Path, saved: Any, current: Mapping[str, Any]) -> None:
    """Raise :class:`CheckpointMismatch` naming every key (but ``epochs``) whose value differs."""
    if not isinstance(saved, dict):
        raise InputError(f"{path}: the sidecar records no 'identity' (parameters and dataset)")
    if differences := identity_changes(saved, current):
        raise CheckpointMismatch(f"{path} was made with other settings ({differences})")
