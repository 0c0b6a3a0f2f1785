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
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from hcl_cli.errors import UsageError, first_line, shown
from hcl_cli.option import Option, either, option_name

DEVICES = ("auto", "cpu", "cuda")
IMAGE_ARCHS = ("small_cnn", "resnet18", "resnet50")
"""The image encoders hcl builds (pretrain's --arch adds auto and gin; embed --init names one of these)."""
PROJECTION_DIM = 128
"""The image projection head's output size by default (HCL's; pretrain's --projection-dim, embed --init's untrained head)."""
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
DATA_DEFAULT_TEXT = f"{PREPARED} if a hand hcl prepare made it, else {PIPELINE_PREPARED}"
"""How ``--help`` shows the default of a stage's ``--data`` (:func:`default_data`'s choice)."""
SEED_LIMIT = 2**32 - 1
"""The largest seed NumPy accepts (torch takes 64 bits, NumPy's legacy seeding 32)."""
BATCH_LIMIT = 2**20
"""The largest batch or chunk size any stage takes (a million samples)."""
COUNT_LIMIT = 10**12
"""The largest step count or period (``max_steps``, ``checkpoint_every``, ...)."""


PARAMS_SIZE_LIMIT = 1 << 20
"""The largest params file hcl reads, 1 MiB (``hcl params`` writes about 4 KiB): a larger one is refused unread."""
PARAMS_VALUE_LIMIT = 1_000_000
"""The most values (scalars, lists and mappings, each alias counted as the values it stands for) a params file may hold:
more than a file of :data:`PARAMS_SIZE_LIMIT` bytes can spell without aliases, so only an alias bomb reaches it."""


def load_params(path: str | Path) -> dict[str, Any]:
    """Read a params.yaml as DVC does (:func:`parse_params`), a missing, unreadable, oversized or malformed file being a one-line usage error."""
    source = Path(path)
    if source.exists() and not source.is_file():  # a folder, or a FIFO whose reading would wait forever
        raise UsageError(f"cannot read {shown(path)}: not a regular file")
    try:
        with open(source, "rb") as handle:
            data = handle.read(PARAMS_SIZE_LIMIT + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {shown(path)}: {first_line(exc)}") from exc
    if len(data) > PARAMS_SIZE_LIMIT:
        raise UsageError(f"cannot read {shown(path)}: it is over {PARAMS_SIZE_LIMIT >> 20} MiB, more than any params file needs")
    return parse_params(text, path)


def parse_params(text: str, path: str | Path) -> dict[str, Any]:
    """The params file ``text`` (read from ``path``) as DVC reads it: YAML 1.2 with ruamel.yaml's safe loader, the loader of
    ``dvc.utils.serialize.parse_yaml``, so a stage runs with the value ``dvc params diff`` and ``dvc exp show`` record.

    So ``010`` is 10, ``1:30`` and ``on`` are strings, and a key given twice in one mapping (a second group included)
    is refused, as DVC refuses it. Anything that is not a mapping of groups, nesting deeper than the parser can follow,
    and aliases that expand past :data:`PARAMS_VALUE_LIMIT` values (checked before anything is built from them) are
    one-line usage errors.
    """
    from ruamel.yaml import YAML, YAMLError
    from ruamel.yaml.constructor import DuplicateKeyError

    try:
        _check_expansion(YAML(typ="safe").compose(text), path)
        params = load_yaml12(text)
    except DuplicateKeyError as exc:
        key = (exc.problem or "").partition('key "')[2].partition('" with value')[0]
        raise UsageError(f"{shown(path)}: duplicate key {key[:60]!r}{_line_of(exc)}, which DVC refuses: keep one of them") from None
    except RecursionError:
        raise UsageError(f"cannot read {shown(path)}: its lists or mappings nest too deeply") from None
    except YAMLError as exc:
        raise UsageError(f"cannot read {shown(path)}: {(getattr(exc, 'problem', None) or first_line(exc))[:200]}{_line_of(exc)}") from None
    except ValueError as exc:  # an integer of over 4300 digits
        raise UsageError(f"cannot read {shown(path)}: {first_line(exc)[:200]}") from None
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise UsageError(f"{shown(path)} must be a mapping of stage groups")
    return params


def load_yaml12(text: str) -> Any:
    """``text`` as DVC reads YAML (1.2, ruamel.yaml's safe loader): ``on`` and ``1:30`` stay strings, ``010`` is 10.
    Raises ruamel.yaml's ``YAMLError`` on text that is not YAML."""
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


def _line_of(exc: Exception) -> str:
    """`` at line N`` where a ruamel.yaml error marks its problem (1-based), else nothing."""
    mark = getattr(exc, "problem_mark", None)
    return f" at line {mark.line + 1}" if mark is not None else ""


def _check_expansion(root: Any, path: str | Path) -> None:
    """A usage error when the YAML node graph ``root`` (aliases are shared nodes) stands for more than
    :data:`PARAMS_VALUE_LIMIT` values or refers to itself, counted once per node without expanding anything."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)] if root is not None else []
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = [item for pair in node.value for item in pair] if node.id == "mapping" else node.value if node.id == "sequence" else []
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            open_nodes.discard(id(node))
            if sizes[id(node)] > PARAMS_VALUE_LIMIT:
                raise UsageError(
                    f"cannot read {shown(path)}: its aliases expand to over {PARAMS_VALUE_LIMIT:,} values (a YAML alias bomb?)"
                )
            continue
        if id(node) in open_nodes:
            raise UsageError(f"cannot read {shown(path)}: an alias refers to the value that contains it")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


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


def output_file(default: str, help: str) -> Any:
    """A runtime option naming the file a stage writes: a path that names a folder (``newdir/``, ``x/.``) is refused,
    not written as a file named after the folder."""
    return runtime(default, help, parse=file_path)


def file_path(path: str) -> str:
    """``path``, or a ``ValueError`` when its last part names a folder (empty, ``.`` or ``..``)."""
    if os.path.basename(path) in ("", ".", ".."):
        raise ValueError("must name a file, not a folder")
    return path


THREADS_LIMIT = 1024
"""The most CPU threads ``--threads`` asks torch for."""
CUDA_THREADS = 2
"""torch's CPU threads under ``--threads auto`` on CUDA (:func:`hcl_cli.runtime.set_cpu_threads`): a step there is GPU work
that one thread launches, while runs that each hold every core slow one another down when several share a GPU machine
(issue 28); benchmarks/device_check.sh measures it (``concurrency_cuda.json``)."""


def parse_threads(value: str | int) -> int | None:
    """``--threads``: ``auto`` (None: :func:`hcl_cli.runtime.set_cpu_threads` decides, with :data:`CUDA_THREADS`) or a whole
    number of threads."""
    text = str(value)
    if text == "auto":
        return None
    if text.isdigit() and 1 <= int(text) <= THREADS_LIMIT:
        return int(text)
    raise ValueError(f"must be auto or a whole number from 1 to {THREADS_LIMIT}")


def threads_option() -> Any:
    """The ``--threads`` runtime option of every stage that computes with torch (pretrain, embed, knn-eval, linear-eval)."""
    return runtime(
        "auto",
        f"torch's CPU threads: a number, or auto: at most {CUDA_THREADS} when the device is CUDA (so that several runs share "
        "one GPU machine's cores, e.g. dvc queue start -j 4), torch's default on a CPU.",
        parse=parse_threads,
    )


def shown_value(value: Any) -> Any:
    """A parameter's value as params.yaml spells it in a message: ``true``, not ``True``."""
    return str(value).lower() if isinstance(value, bool) else value


AnyConfig = TypeVar("AnyConfig", bound="StageConfig")


@dataclass(init=False, frozen=True)
class StageConfig:
    """A stage's validated options. ``Config(**values)`` checks every value; an unknown name or a
    bad value is a one-line :class:`~hcl_cli.errors.UsageError`; omitted ones take their defaults."""

    group: ClassVar[str]
    """The stage's params.yaml group."""
    command: ClassVar[str]
    """The stage's ``hcl`` subcommand and its dvc.yaml stage name."""
    _given: tuple[dict[str, Any], dict[str, str]] = field(default=({}, {}), init=False, repr=False, compare=False)
    """The values given (command line, params file) and their sources: what :meth:`for_modality` rebuilds from."""

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
        object.__setattr__(self, "_given", (dict(values), dict(where)))
        own = {f.name for f in dataclasses.fields(self)}
        for name in own & checked.keys():
            object.__setattr__(self, name, checked[name])
        self.keep_extra({name: value for name, value in checked.items() if name not in own})
        self.check()

    def for_modality(self: AnyConfig, modality: str) -> AnyConfig:
        """This configuration on ``modality``'s data: every option given neither on the command line nor in the params
        file at that modality's default (:meth:`~hcl_cli.option.Option.default_for`); itself when none differs."""
        given, where = self._given
        options = [option for option in self.declared_options() if option.name not in given]
        changed = {option.name: option.default_for(modality) for option in options if option.default_for(modality) != option.default}
        return type(self).from_sources({**given, **changed}, where) if changed else self  # type: ignore[return-value]

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

    def unread_changes(self) -> list[str]:
        """Warnings for the parameters set away from their defaults that another option's value leaves unread
        (:attr:`Option.read_when`): ``image_size = 32 is not read with dataset tu``."""
        params = self.params()
        return [
            f"{option.name} = {params[option.name]!r} is not read with {key} {params[key]} (only with {key} {', '.join(values)})"
            for option, (key, values) in self.unread_options()
        ]

    def unread_options(self) -> list[tuple[Option, tuple[str, tuple[str, ...]]]]:
        """The options set away from their defaults that another option's value leaves unread, with their ``read_when``."""
        params = self.params()
        return [
            (option, option.read_when)
            for option in self.declared_options()
            if option.read_when and params[option.name] != option.default and params[option.read_when[0]] not in option.read_when[1]
        ]

    def refuse_unread(self) -> None:
        """Refuse (a usage error) a parameter set away from its default, from the command line or the params file, that
        another option's value leaves unread (:attr:`Option.read_when`), as :meth:`check_modality` refuses one of the
        other modality: ``--nesterov true`` under ``--optimizer adam``, ``--anneal-steps 5`` under ``--anneal none``."""
        params = self.params()
        for option, (key, values) in self.unread_options()[:1]:
            value, default = (shown_value(v) for v in (params[option.name], option.default))
            raise UsageError(
                f"{option.flag} ({self.group}.{option.name}) {value} is read only with {option_name(key)} {either(values)} "
                f"and does nothing with {option_name(key)} {params[key]}: leave it at its default ({default})"
            )

    def check_modality(self, modality: str, data: str) -> None:
        """Refuse (a usage error) a parameter set away from its default, from the command line or the params file, that
        ``modality``'s data (image, graph; ``data`` names it in the message) never reads (:attr:`Option.modality`):
        ``--gin-layers 5`` on images, ``--blur true`` on graphs, ``--image-size 32`` for a TU dataset."""
        params = self.params()
        for option in self.declared_options():
            if option.runtime or option.modality in (None, modality) or params[option.name] == option.default:
                continue
            value, default = (shown_value(v) for v in (params[option.name], option.default))
            raise UsageError(
                f"{option.flag} ({self.group}.{option.name}) {value} is for {option.modality}s and does nothing on {data}: "
                f"leave it at its default ({default})"
            )

    @classmethod
    def param_names(cls) -> list[str]:
        return [option.name for option in cls.declared_options() if not option.runtime]

    def params(self) -> dict[str, Any]:
        """The values of this stage's params.yaml group."""
        return {name: getattr(self, name) for name in self.param_names()}

    @classmethod
    def read_params(cls, values: Mapping[str, Any], modality: str | None) -> list[str]:
        """The parameters a run of this stage with ``values`` (its params group, a missing key at its default) reads on
        ``modality``'s data (None: not known): not those of the other modality (:attr:`Option.modality`), nor those
        another option's value leaves unread (:attr:`Option.read_when`)."""
        options = {option.name: option for option in cls.declared_options() if not option.runtime}

        def value(name: str) -> Any:
            return values.get(name, options[name].default)

        return [
            name
            for name, option in options.items()
            if (modality is None or option.modality in (None, modality))
            and (option.read_when is None or value(option.read_when[0]) in option.read_when[1])
        ]

    def used_params(self, modality: str | None = None) -> dict[str, Any]:
        """The parameters this run reads on ``modality``'s data (:meth:`read_params`), with their values."""
        params = self.params()
        return {name: params[name] for name in self.read_params(params, modality)}
