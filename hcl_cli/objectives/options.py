"""The values a sampler reads, checked against the registry's declarations."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hcl_cli.errors import UsageError
from hcl_cli.objectives.registry import RUNTIME_INPUTS, SAMPLERS, Sampler, sampler_options
from hcl_cli.options import option_name


class SamplerOptions(Mapping[str, Any]):
    """The options of one loss evaluation, by attribute (``options.beta``) or by key.

    Built by :meth:`resolve`: every declared option (:func:`~hcl_cli.objectives.registry.sampler_options`)
    with its declared default unless given, checked, and parsed (``undimix_weights`` becomes three
    floats); then the sampler's scheduled values at the first epoch unless given
    (``threshold`` of hscl-threshold); then the trainer's tensors of
    :data:`~hcl_cli.objectives.registry.RUNTIME_INPUTS` (undimix: ``head_inputs``, the two views'
    inputs of the projection head's last layer, ``head_layer`` and ``undimix_attention``), None
    unless given.
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    @classmethod
    def resolve(cls, sampler: Sampler, given: Mapping[str, Any]) -> SamplerOptions:
        """The options for ``sampler`` from the keyword arguments ``given``; an unknown name is a usage error."""
        declared = {option.name: option for option in sampler_options()}
        scheduled = scheduled_names()
        unknown = sorted(set(given) - declared.keys() - scheduled - RUNTIME_INPUTS.keys())
        if unknown:
            raise UsageError(f"unknown sampler option(s): {', '.join(unknown)} (known: {', '.join(declared)})")
        raw = {name: option.check(given.get(name, option.default), where=option_name(name)) for name, option in declared.items()}
        values: dict[str, Any] = {name: declared[name].value(value) for name, value in raw.items()}
        if sampler.schedule is not None:
            values |= {name: value for name, value in sampler.schedule(raw, 0, 1).items() if name not in given}
        values |= {name: given[name] for name in scheduled - declared.keys() if name in given}
        values |= {name: given.get(name) for name in RUNTIME_INPUTS}
        return cls(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def defaults() -> dict[str, Any]:
    """Every declared option at its default (raw, as params.yaml holds it)."""
    return {option.name: option.default for option in sampler_options()}


def scheduled_names() -> set[str]:
    """The values the samplers' schedules set (``beta``, ``threshold``): a direct call of the loss may give them."""
    return {name for spec in SAMPLERS.values() if spec.schedule for name in spec.schedule(defaults(), 0, 1)}
