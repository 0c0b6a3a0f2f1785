"""A stage's configuration, validated once at the stage's entry, and the field declarations of its options.

One subclass per stage (one module each). Its *parameters* (``param(...)``) are the keys of that
stage's group in ``params.yaml``; its *runtime* options (``runtime(...)``: input and output paths,
the device) are command-line only. ``hcl_cli.cli`` builds each subcommand from
:meth:`StageConfig.declared_options`, ``hcl params`` writes the params.yaml groups from it, and
the constructor checks every value against it, once: the configuration is then frozen, and the
code below a stage's entry receives its plain typed values and checks none of them again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from hcl_cli.errors import UsageError, first_line
from hcl_cli.option import Option

DEVICES = ("auto", "cpu", "cuda")
FEATURES = ("backbone", "projection")
"""The two embeddings ``embed`` writes, in the order the encoder returns them."""
RUNS = "runs"
"""Where a stage run by hand writes what it trains and measures by default: the pipeline's layout
under ``runs/``, so that hand runs never touch the models, embeddings, metrics and reports that
``dvc repro`` owns (dvc.yaml passes every path explicitly)."""
PREPARED = f"{RUNS}/prepared"
"""Where ``hcl prepare`` by hand writes the prepared dataset, and where a hand stage reads it."""
PIPELINE_PREPARED = "data/prepared"
"""The pipeline's prepared dataset (dvc.yaml's prepare ``--out``): what a hand stage reads when no
hand ``hcl prepare`` made :data:`PREPARED`, so that ``dvc repro`` then ``hcl pretrain`` works."""
SEED_LIMIT = 2**32 - 1
"""The largest seed NumPy accepts (torch takes 64 bits, NumPy's legacy seeding 32)."""
BATCH_LIMIT = 2**20
"""The largest batch or chunk size any stage takes (a million samples)."""
COUNT_LIMIT = 10**12
"""The largest step count or period (``max_steps``, ``checkpoint_every``, ...)."""


def load_params(path: str | Path) -> dict[str, Any]:
    """Read a params.yaml, turning a missing, unreadable or malformed file into a one-line usage error."""
    if Path(path).exists() and not Path(path).is_file():  # a folder, or a FIFO whose reading would wait forever
        raise UsageError(f"cannot read {path}: not a regular file")
    try:
        params = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:  # ValueError: an integer of over 4300 digits
        raise UsageError(f"cannot read {path}: {first_line(exc)}") from exc
    if not isinstance(params, dict):
        raise UsageError(f"{path} must be a mapping of stage groups")
    return params


def prepared_input() -> str:
    """The prepared dataset a stage reads when ``--data`` is not given: :data:`PREPARED` when a hand
    ``hcl prepare`` made it, else the pipeline's :data:`PIPELINE_PREPARED` if that exists."""
    if not Path(PREPARED).exists() and Path(PIPELINE_PREPARED).is_dir():
        return PIPELINE_PREPARED
    return PREPARED


def param(default: Any, help: str, **rules: Any) -> Any:
    """A tunable parameter: a key of the stage's params.yaml group and a command-line option.

    ``rules`` are :class:`~hcl_cli.option.Option`'s (``choices``, ``minimum``, ``maximum``, ...).
    """
    return field(default=default, metadata={"option": {"help": help, **rules}})


def runtime(default: Any, help: str, **rules: Any) -> Any:
    """A command-line-only option: an input or output path, or where to run."""
    return field(default=default, metadata={"option": {"help": help, "runtime": True, **rules}})


@dataclass(init=False, frozen=True)
class StageConfig:
    """A stage's validated options. ``Config(**values)`` checks every value; an unknown name or a
    bad value is a one-line :class:`~hcl_cli.errors.UsageError`; omitted ones take their defaults."""

    group: ClassVar[str]
    """The stage's params.yaml group."""
    command: ClassVar[str]
    """The stage's ``hcl`` subcommand and its dvc.yaml stage name."""

    def __init__(self, **values: Any) -> None:
        self._build(values, {})

    @classmethod
    def from_sources(cls, values: Mapping[str, Any], where: Mapping[str, str]) -> StageConfig:
        """The configuration of ``values``, a value's error message naming its source in ``where``
        (``params.yaml: pretrain.beta``; the command-line flag for names not in it)."""
        config = cls.__new__(cls)
        config._build(values, where)
        return config

    def _build(self, values: Mapping[str, Any], where: Mapping[str, str]) -> None:
        declared = {option.name: option for option in self.declared_options()}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise UsageError(f"hcl {self.command} has no option(s) {', '.join(unknown)}")
        if "data" in declared and "data" not in values and declared["data"].default == PREPARED:
            values = {**values, "data": prepared_input()}
        checked = {name: option.check(values.get(name, option.default), where=where.get(name)) for name, option in declared.items()}
        own = {f.name for f in dataclasses.fields(self)}
        for name in own & checked.keys():
            object.__setattr__(self, name, checked[name])
        self.keep_extra({name: value for name, value in checked.items() if name not in own})
        self.check()

    @classmethod
    def declared_options(cls) -> tuple[Option, ...]:
        """Every option of the stage: its fields', then :meth:`extra_options`."""
        fields = tuple(Option(f.name, f.default, **f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata)
        return fields + cls.extra_options()

    @classmethod
    def extra_options(cls) -> tuple[Option, ...]:
        """Options declared elsewhere that this stage also takes (none by default)."""
        return ()

    def keep_extra(self, values: dict[str, Any]) -> None:
        """Store the checked values of :meth:`extra_options`."""

    def check(self) -> None:
        """Cross-field rules; subclasses override."""

    @classmethod
    def param_names(cls) -> list[str]:
        return [option.name for option in cls.declared_options() if not option.runtime]

    def params(self) -> dict[str, Any]:
        """The values of this stage's params.yaml group."""
        return {name: getattr(self, name) for name in self.param_names()}
