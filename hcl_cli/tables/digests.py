"""The bitwise identity of a table's run: the sha256 of its trained weights and of its embeddings.

Two runs are the same bit for bit only when these digests are equal; the same commit, torch and seed give equal digests
only on a CPU that chooses the same float kernels (:func:`~hcl_cli.provenance.float_kernels`), so a digest is compared
only where the run's commit (clean), torch, CPU and kernels are the recorded run's (:func:`bitwise_comparable`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import torch

SAME_MACHINE_KIND = ("cpu_model", "float_kernels")
"""What a run's ``machine`` says of the float kernels it ran: the runs compared bitwise must agree on every one."""


def tensors_sha256(named: Iterable[tuple[str, torch.Tensor]]) -> str:
    """The sha256 of named tensors in order: each name, dtype, shape and bytes (a changed weight changes it)."""
    digest = hashlib.sha256()
    for name, tensor in named:
        value = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{value.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()


def weights_sha256(model: torch.nn.Module) -> str:
    """The sha256 of a model's state (its parameters and buffers, by name)."""
    return tensors_sha256(model.state_dict().items())


def bitwise_comparable(recorded: dict[str, Any] | None, now: dict[str, Any]) -> str | None:
    """Why the run whose provenance is ``recorded`` cannot be compared bit for bit with the one of ``now`` (None: it can):
    no digest, another or a dirty commit, another torch, another CPU or float kernels."""
    recorded = recorded or {}
    if not recorded.get("weights_sha256"):
        return "the record has no weights digest"
    if recorded.get("commit") != now.get("commit") or recorded.get("dirty") is not False or now.get("dirty") is not False:
        return "another commit, or a tree that differs from it"
    if (recorded.get("versions") or {}).get("torch") != (now.get("versions") or {}).get("torch"):
        return "another torch"
    then, here = recorded.get("machine") or {}, now.get("machine") or {}
    if any(then.get(key) != here.get(key) for key in SAME_MACHINE_KIND):
        return "another CPU or float kernels"
    return None
