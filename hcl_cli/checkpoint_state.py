"""What a checkpoint holds besides the model, as safetensors tensors and JSON (no pickle): the optimizer's state and every RNG's.

:mod:`hcl_cli.checkpoint` writes and reads them; they are kept apart so that the checkpoint format
(its files, their names, resume's checks) reads in one place and these conversions in another.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def flatten_optimizer(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """The optimizer's per-parameter state as ``optimizer.<index>.<slot>`` tensors, and its param_groups as JSON (a
    learning rate held as a tensor, which a schedule writes, as its number)."""
    state = optimizer.state_dict()
    tensors = {
        f"optimizer.{index}.{slot}": torch.as_tensor(value) for index, slots in state["state"].items() for slot, value in slots.items()
    }
    groups = [
        {key: value.item() if isinstance(value, torch.Tensor) else value for key, value in group.items()} for group in state["param_groups"]
    ]
    return tensors, groups


def unflatten_optimizer(tensors: Mapping[str, torch.Tensor], param_groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Rebuild a state_dict for ``Optimizer.load_state_dict`` from :func:`flatten_optimizer`'s output."""
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, tensor in tensors.items():
        if name.startswith("optimizer."):
            _, index, slot = name.split(".", 2)
            state.setdefault(int(index), {})[slot] = tensor
    return {"state": state, "param_groups": param_groups}


def match_parameter_layouts(optimizer: torch.optim.Optimizer) -> None:
    """Give each restored per-parameter state tensor its parameter's strides (e.g. channels_last).

    safetensors stores tensors contiguous, and fused Adam refuses states whose layout differs from
    the parameter's ("params, grads, exp_avgs, and exp_avg_sqs must have same ... layout").
    """
    for parameter, slots in optimizer.state.items():
        for slot, value in slots.items():
            if value.shape == parameter.shape:
                slots[slot] = torch.empty_like(parameter, dtype=value.dtype).copy_(value)


def capture_rng() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Every RNG that training draws from: torch (CPU, each CUDA device), NumPy's and Python's global ones."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    version, python_state, gauss_next = random.getstate()
    tensors = {"rng.torch": torch.get_rng_state(), "rng.numpy": torch.from_numpy(keys.astype(np.int64))}
    if torch.cuda.is_available():
        tensors |= {f"rng.cuda.{index}": state for index, state in enumerate(torch.cuda.get_rng_state_all())}
    rng_json = {
        "numpy": {"kind": kind, "position": int(position), "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)},
        "python": {"version": version, "state": list(python_state), "gauss_next": gauss_next},
    }
    return tensors, rng_json


def restore_rng(tensors: Mapping[str, torch.Tensor], rng_json: Mapping[str, Any]) -> None:
    torch.set_rng_state(tensors["rng.torch"])
    for index in range(torch.cuda.device_count()):
        if f"rng.cuda.{index}" in tensors:
            torch.cuda.set_rng_state(tensors[f"rng.cuda.{index}"], index)
    numpy_state = rng_json["numpy"]
    keys = tensors["rng.numpy"].numpy().astype(np.uint32)
    np.random.set_state((numpy_state["kind"], keys, numpy_state["position"], numpy_state["has_gauss"], numpy_state["cached_gaussian"]))
    python_state = rng_json["python"]
    random.setstate((python_state["version"], tuple(python_state["state"]), python_state["gauss_next"]))
