"""Resolved sampler values: :class:`SamplerOptions`, what a sampler function reads, checked once and frozen.

Two ways in. The public loss (:func:`~hcl_cli.objectives.contrastive_loss`) checks its keyword
arguments on every call with :meth:`SamplerOptions.resolve`. A stage checks its configuration
once at its entry (:class:`~hcl_cli.config.pretrain.PretrainConfig`) and builds the options from
those values with :meth:`SamplerOptions.from_checked`, which checks nothing; the training loop
then derives each epoch's values (:meth:`SamplerOptions.at_epoch`) and each step's tensors
(:meth:`SamplerOptions.with_inputs`) without resolving anything again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hcl_cli.errors import UsageError
from hcl_cli.objectives.registry import LOSS_OPTIONS, RUNTIME_INPUTS, SAMPLERS, Sampler, sampler_options
from hcl_cli.option import option_name


class SamplerOptions(Mapping[str, Any]):
    """The frozen options of one sampler, by attribute (``options.beta``) or by key.

    Attributes: every declared option (:func:`~hcl_cli.objectives.registry.sampler_options`), at
    its declared default unless given, parsed (``undimix_weights`` is three floats); the values of
    the sampler's schedule (``threshold`` of hscl-threshold; the first epoch's unless given or
    :meth:`at_epoch`); and the trainer's tensors of :data:`~hcl_cli.objectives.registry.RUNTIME_INPUTS`
    (undimix: ``head_inputs``, ``head_layer``, ``undimix_attention``; ``momentum_keys``), None
    unless given. Keys: the options this sampler reads (the loss's own, the sampler's, its
    scheduled ones), with these values, so that ``contrastive_loss(..., **options)`` is the same loss.
    """

    _values: dict[str, Any]
    _read: tuple[str, ...]
    _inputs: dict[str, Any]

    def __init__(self, sampler: Sampler, values: Mapping[str, Any], inputs: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_values", dict(values))
        scheduled = sampler.schedule(defaults(), 0, 1) if sampler.schedule is not None else {}
        read = (*(option.name for option in LOSS_OPTIONS), *sampler.option_names, *scheduled)
        object.__setattr__(self, "_read", tuple(dict.fromkeys(read)))
        object.__setattr__(self, "_inputs", dict(inputs or {}))

    @classmethod
    def resolve(cls, sampler: Sampler, given: Mapping[str, Any]) -> SamplerOptions:
        """The options for ``sampler`` from the keyword arguments ``given``, each checked; an unknown name is a usage error."""
        declared = {option.name: option for option in sampler_options()}
        scheduled = scheduled_names()
        unknown = sorted(set(given) - declared.keys() - scheduled - RUNTIME_INPUTS.keys())
        if unknown:
            raise UsageError(f"unknown sampler option(s): {', '.join(unknown)} (known: {', '.join(declared)})")
        raw = {name: option.check(given.get(name, option.default), where=option_name(name)) for name, option in declared.items()}
        options = cls.from_checked(sampler, raw)
        values = {name: given[name] for name in scheduled - declared.keys() if name in given}
        inputs = {name: given[name] for name in RUNTIME_INPUTS if name in given}
        return options.replaced(values, inputs)

    @classmethod
    def from_checked(cls, sampler: Sampler, raw: Mapping[str, Any]) -> SamplerOptions:
        """The options of already checked raw values (every declared option, as params.yaml holds them), at the first epoch.

        Checks nothing: the caller checked ``raw`` (a stage's configuration did, at its entry)."""
        values = {option.name: option.value(raw[option.name]) for option in sampler_options()}
        if sampler.schedule is not None:
            values |= sampler.schedule(raw, 0, 1)
        return cls(sampler, values)

    def at_epoch(self, sampler: Sampler, epoch: int, epochs: int) -> SamplerOptions:
        """These options with ``sampler``'s scheduled values of ``epoch`` (0-based) of ``epochs`` (beta annealed, threshold)."""
        return self if sampler.schedule is None else self.replaced(sampler.schedule(self._values, epoch, epochs), {})

    def with_inputs(self, **inputs: Any) -> SamplerOptions:
        """These options with one step's tensors (:data:`~hcl_cli.objectives.registry.RUNTIME_INPUTS`, by name); checks nothing."""
        return self.replaced({}, inputs)

    def replaced(self, values: Mapping[str, Any], inputs: Mapping[str, Any]) -> SamplerOptions:
        """A copy with ``values`` and ``inputs`` set (the same sampler's keys)."""
        copy = object.__new__(SamplerOptions)
        object.__setattr__(copy, "_values", self._values | dict(values))
        object.__setattr__(copy, "_read", self._read)
        object.__setattr__(copy, "_inputs", self._inputs | dict(inputs))
        return copy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not an option (and unpickling asks before the state is back)
            raise AttributeError(name)
        if name in RUNTIME_INPUTS:
            return self._inputs.get(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"SamplerOptions are frozen: use with_inputs() or at_epoch() for {name}")

    def __getitem__(self, name: str) -> Any:
        if name not in self._read:
            raise KeyError(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read)

    def __len__(self) -> int:
        return len(self._read)

    def __repr__(self) -> str:
        return f"SamplerOptions({dict(self)!r})"


def defaults() -> dict[str, Any]:
    """Every declared option at its default (raw, as params.yaml holds it)."""
    return {option.name: option.default for option in sampler_options()}


def scheduled_names() -> set[str]:
    """The values the samplers' schedules set (``beta``, ``threshold``): a direct call of the loss may give them."""
    return {name for spec in SAMPLERS.values() if spec.schedule for name in spec.schedule(defaults(), 0, 1)}
