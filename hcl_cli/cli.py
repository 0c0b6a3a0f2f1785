"""The ``hcl`` command: parse options, build the stage's config, call the stage.

Each subcommand's options are its config's declared options (:mod:`hcl_cli.config`), so every
option has help text and maps one to one to a params.yaml key. ``--params FILE`` reads the
stage's group from FILE (what dvc.yaml passes, so no parameter value ever reaches a shell);
options given on the command line win; the stage's configuration checks every value once, and
the stage receives it frozen. Stage modules, and with them torch, are imported only when a stage
runs, so ``--help`` stays instant. This module is the front end: no stage imports it, so editing
a help text here or in another stage's declarations reruns no pipeline stage.

One room: the Typer app is one object whose commands are listed in one place; each command is a
thin call of its stage's ``run`` (``hcl table`` and ``hcl compare`` included), the work is in ``stages/``.
"""

from __future__ import annotations

import errno
import inspect
import os
import sys
import textwrap
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import typer.core

from hcl_cli.config.base import DATA_DEFAULT_TEXT, PREPARED, StageConfig
from hcl_cli.config.embed import EmbedConfig
from hcl_cli.config.export import ExportConfig
from hcl_cli.config.knn import KnnConfig
from hcl_cli.config.linear import LinearConfig
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.config.prepare import PrepareConfig
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.config.report import ReportConfig
from hcl_cli.errors import HclError, UsageError
from hcl_cli.logs import LOG, set_level
from hcl_cli.option import Option, option_name, parse_bool, parse_number
from hcl_cli.params import default_params_yaml, read_group, sampler_options_markdown
from hcl_cli.training.signals import Interrupted, exit_with, interrupt_policy
from hcl_cli.versions import check_torch_pair

# Typer vendors click in recent releases; find its exception base either way (torch 2.11 GPU images ship an older Typer).
_CLICK_EXCEPTION: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

FLAG_COLUMN = 24
"""The widest first column of a help listing (a flag with its value, a command); a longer one puts its text on the next line."""


def write_definitions(formatter: Any, rows: Sequence[tuple[str, str]]) -> None:
    """click's definition list (``HelpFormatter.write_dl``: a term, its text wrapped beside it) without splitting a word at
    its hyphens, so that a flag named in a text (``--gin-hidden``) stays whole."""
    if not rows:
        return
    column = min(max(len(term) for term, _ in rows), FLAG_COLUMN) + 2
    margin = " " * formatter.current_indent
    wrapper = textwrap.TextWrapper(width=max(formatter.width - formatter.current_indent - column, 20), break_on_hyphens=False)
    for term, text in rows:
        lines = wrapper.wrap(text)
        if lines and len(term) + 2 <= column:
            formatter.write(f"{margin}{term.ljust(column)}{lines.pop(0)}\n")
        else:
            formatter.write(f"{margin}{term}\n")
        formatter.write("".join(f"{margin}{' ' * column}{line}\n" for line in lines))


def write_parameters(command: Any, ctx: Any, formatter: Any) -> None:
    """``command``'s arguments and options under the headings of Typer's panels (Parameters, Runtime options, Options)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None:
            default_panel = "Arguments" if param.param_type_name == "argument" else "Options"
            sections.setdefault(getattr(param, "rich_help_panel", None) or default_panel, []).append(record)
    for heading, rows in sections.items():
        with formatter.section(heading):
            write_definitions(formatter, rows)


class HelpCommand(typer.core.TyperCommand):
    """A command whose ``--help`` is plain text that fits the terminal (at most 80 columns; Typer's Rich layout left a
    column of 26 characters for the texts there): the options by panel, each text wrapped beside its flag."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        write_parameters(self, ctx, formatter)


class HelpGroup(typer.core.TyperGroup):
    """``hcl --help``: plain text like :class:`HelpCommand`'s, each command with the whole first sentence of its help."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        write_parameters(self, ctx, formatter)
        commands = [(name, self.commands[name]) for name in self.list_commands(ctx) if not self.commands[name].hidden]
        with formatter.section("Commands"):
            write_definitions(formatter, [(name, command.get_short_help_str(limit=sys.maxsize)) for name, command in commands])


app = typer.Typer(
    name="hcl",
    cls=HelpGroup,
    help="Contrastive representation learning with hard negative sampling (HCL, H-SCL, HCL-OT, UnDiMix), run as DVC stages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
DEBUG_HELP = "Show the traceback of an error (any internal error included); accepted anywhere on the command line."


def print_version(given: bool) -> None:
    """``hcl --version``: the package's version, then exit."""
    from hcl_cli import __version__

    if given:
        write_stdout(f"hcl {__version__}\n")
        raise typer.Exit()


VERSION = typer.Option("--version", help="Print hcl's version and exit.", callback=print_version, is_eager=True)


QUIET_HELP = "Print errors only: no status line, warning or progress bar (results on standard output stay); accepted anywhere."
VERBOSE_HELP = "Print debug lines too (each stage's options, each file written); accepted anywhere on the command line."
LEVELS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}
"""The logging level's flags (:mod:`hcl_cli.logs`), taken from anywhere on the command line as ``--debug`` is."""


@app.callback()
def hcl(
    debug: Annotated[bool, typer.Option("--debug", help=DEBUG_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)] = False,
    version: Annotated[bool, VERSION] = False,
) -> None:
    """Contrastive representation learning with hard negative sampling (HCL, H-SCL, HCL-OT, UnDiMix), run as DVC stages."""


def run_prepare(config: PrepareConfig) -> None:
    from hcl_cli.stages import prepare

    prepare.run(config)


def run_pretrain(config: PretrainConfig) -> None:
    from hcl_cli.stages import pretrain

    pretrain.run(config)


def run_embed(config: EmbedConfig) -> None:
    from hcl_cli.stages import embed

    embed.run(config)


def run_linear_eval(config: LinearConfig) -> None:
    from hcl_cli.stages import linear_eval

    linear_eval.run(config)


def run_knn_eval(config: KnnConfig) -> None:
    from hcl_cli.stages import knn_eval

    knn_eval.run(config)


def run_report(config: ReportConfig) -> None:
    from hcl_cli.stages import report

    report.run(config)


def run_export(config: ExportConfig) -> None:
    from hcl_cli.stages import export

    export.run(config)


STAGE_RUNNERS: dict[type[StageConfig], Callable[[Any], None]] = {
    PrepareConfig: run_prepare,
    PretrainConfig: run_pretrain,
    EmbedConfig: run_embed,
    LinearConfig: run_linear_eval,
    KnnConfig: run_knn_eval,
    ReportConfig: run_report,
    ExportConfig: run_export,
}


STREAM_ERRORS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EFBIG, errno.EIO, errno.EDQUOT})
"""The errors of a write to standard output that is full or closed (an error naming no file)."""

PARAMS_HELP = "Read this stage's parameters from FILE (its group in a params.yaml; dvc.yaml passes params.yaml). Options given on the command line win."


def stage_command(config_cls: type[StageConfig]) -> Callable[..., None]:
    """A Typer command whose options are ``config_cls``'s declared options; it runs the stage. One with parameters also
    takes ``--params FILE`` (its params.yaml group); one without (``hcl export``, no pipeline stage) does not."""
    options = config_cls.declared_options()
    # A boolean *parameter* takes a value (``--clip true``), as params.yaml spells it; so does a number (``1_0`` is not 10).
    valued_bools = {option.name for option in options if option.type is bool and not option.runtime}
    numbers = {option.name: option.type for option in options if option.type in (int, float)}

    def command(ctx: typer.Context, params: str | None = None, **given: Any) -> None:
        explicit = {name: value for name, value in given.items() if ctx.get_parameter_source(name).name == "COMMANDLINE"}
        for name in valued_bools & explicit.keys():
            explicit[name] = parse_bool(option_name(name), explicit[name])
        for name in numbers.keys() & explicit.keys():
            explicit[name] = parse_number(option_name(name), explicit[name], numbers[name])
        planned, where = read_group(Path(params), config_cls) if params else ({}, {})
        sources = {name: label for name, label in where.items() if name not in explicit}
        check_torch_pair()
        config = config_cls.from_sources(planned | explicit, sources)
        LOG.debug(f"hcl {config_cls.command}: debug: parameters {config.params()}, from {params or 'the defaults'} and {sorted(explicit)}")
        STAGE_RUNNERS[config_cls](config)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    parameters += [typer_parameter(option, valued=option.name in valued_bools) for option in options]
    if config_cls.param_names():
        params_option = typer.Option("--params", metavar="FILE", help=PARAMS_HELP, rich_help_panel="Runtime options")
        parameters.append(
            inspect.Parameter("params", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[str | None, params_option])
        )
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__doc__ = config_cls.__doc__
    return command


NUMBER_METAVARS = {int: "<int>", float: "<float>"}
"""How ``--help`` names a number's value, as Typer does (the command reads it as text: :func:`~hcl_cli.option.parse_number`)."""


def typer_parameter(option: Option, *, valued: bool) -> inspect.Parameter:
    """``option`` as a keyword parameter of a Typer command; a valued boolean and a number are taken as text."""
    choices = ("true", "false") if valued else option.choices
    metavar = ("|".join(choices) if len("|".join(choices)) <= 24 else "NAME") if choices else NUMBER_METAVARS.get(option.type)
    typer_option = typer.Option(
        option.flag,
        help=option.described_help,
        metavar=metavar,
        rich_help_panel="Runtime options" if option.runtime else "Parameters",
        show_default=DATA_DEFAULT_TEXT if option.name == "data" and option.default == PREPARED else True,
    )
    annotation = Annotated[str if valued or option.type in NUMBER_METAVARS else option.type, typer_option]
    default = str(option.default).lower() if valued else option.default
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


for _config_cls in (*STAGE_CONFIGS, ExportConfig):
    app.command(_config_cls.command, cls=HelpCommand, help=_config_cls.__doc__ or "")(stage_command(_config_cls))


@app.command("params", cls=HelpCommand)
def params(
    table: Annotated[
        bool, typer.Option("--table", help="Print the Markdown table of the loss and sampler options instead (as docs/samplers.md has it).")
    ] = False,
) -> None:
    """Print the default params.yaml: every stage's group, each key at its declared default (`hcl params > params.yaml` restores it)."""
    write_stdout(sampler_options_markdown() if table else default_params_yaml())


ESTIMATE_HELP = "Before writing, estimate the run's time and peak memory on this machine (a few timed steps)."


@app.command("preset", cls=HelpCommand)
def preset(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="The preset to write; none lists them by paper and table.")] = None,
    params_file: Annotated[str, typer.Option("--params", metavar="FILE", help="The params file to write.")] = "params.yaml",
    table: Annotated[bool, typer.Option("--table", help="List the presets as a Markdown table.")] = False,
    estimate: Annotated[bool, typer.Option("--estimate/--no-estimate", help=ESTIMATE_HELP)] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what the preset would change and cost; write nothing.")] = False,
) -> None:
    """List the papers' experiments by paper and table, or write one's prepare, pretrain and linear groups (graphs: and knn) into params.yaml for dvc repro / dvc exp run, after saying what the run would cost here."""
    from hcl_cli import presets

    if name is None:
        write_stdout(presets.listing(markdown=table))
    else:
        presets.look_then_write(name, Path(params_file), say=write_stdout, estimated=estimate, dry_run=dry_run)


@app.command("compare", cls=HelpCommand)
def compare(
    out: Annotated[str, typer.Option(help="Output prefix: writes OUT.md and OUT.csv.")] = "reports/compare",
    sampler: Annotated[list[str] | None, typer.Option(help="Only experiments of this sampler (repeatable).")] = None,
    where: Annotated[
        list[str] | None, typer.Option(help="Only experiments whose parameter has this value, e.g. pretrain.beta=1 (repeatable).")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Only experiments whose name matches this pattern, e.g. 'beta-*' (dvc exp run -n beta).")
    ] = None,
    dataset: Annotated[
        str | None, typer.Option(help="The dataset to compare (prepare.name for tu, else prepare.dataset); default: most experiments'.")
    ] = None,
) -> None:
    """Tabulate the workspace and every DVC experiment (dvc exp show --json): the parameters that vary against kNN and linear top-1, with 95% intervals."""
    from hcl_cli.stages import compare as compare_stage

    compare_stage.run(out, compare_stage.Selection(tuple(sampler or ()), tuple(where or ()), name, dataset))


@app.command("table", cls=HelpCommand)
def table(
    name: Annotated[str | None, typer.Option(help="The table's name: writes OUT/NAME.json and OUT/NAME.md, works in OUT/NAME/.")] = None,
    datasets: Annotated[
        str, typer.Option(help="Comma-separated: mutag, ptc, enzymes, imdb-b, imdb-m, proteins, dd, reddit-b.")
    ] = "mutag,ptc",
    methods: Annotated[
        str,
        typer.Option(
            help="Comma-separated methods and groups: table2 (H-SCL Table II), table5 (HCL-OT Table V), betas, fig3 (HCL Fig. 3), fig7 (UnDiMix Fig. 7), or rows such as ucl, hucl, hscl, ot-eps0.5."
        ),
    ] = "table2,table5",
    seeds: Annotated[
        int | None,
        typer.Option(help="Run seeds 0..N-1 of every method (default 10); with --verify, rerun each row's first N seeds (default all)."),
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Train this many epochs instead of the presets' 200 (a smoke run).")] = None,
    data: Annotated[
        str, typer.Option(help="The TU data: a folder (data/raw: the shipped and fetched tu/NAME.zip), a zip or a tar archive.")
    ] = "data/raw",
    out: Annotated[str, typer.Option(help="Folder of the results files.")] = "runs/tables",
    time_budget: Annotated[
        float, typer.Option(help="Stop between runs after this many seconds (exit 75; rerun to continue). 0: no limit.")
    ] = 0.0,
    merge: Annotated[
        list[str] | None,
        typer.Option(help="Also take the runs of OUT/NAME.json of this other part (repeatable): parts run side by side, joined."),
    ] = None,
    threads: Annotated[int, typer.Option(help="Torch threads (1 is fastest for these small models on a shared CPU).")] = 1,
    protocol: Annotated[
        str,
        typer.Option(
            help="inductive: seed s pretrains without fold s of one seeded 10-fold split and the SVM scores it (no test label reaches pretraining); transductive: every graph pretrained on, the SVM cross-validates over all (an scl/hscl encoder saw the test labels)."
        ),
    ] = "inductive",
    verify: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help="Rerun the seeds of every row of the results FILE at this commit, say per row whether the rerun's mean agrees with the recorded one (95% interval of the difference contains 0, difference under --tolerance) and, on the recorded run's commit and CPU, whether its weights are bitwise equal; write verify_FILE beside it.",
        ),
    ] = None,
    tolerance: Annotated[
        float | None,
        typer.Option(help="With --verify: the largest difference of means (accuracy points) read as the same experiment (default 3)."),
    ] = None,
    rows: Annotated[
        str,
        typer.Option(
            metavar="ROWS",
            help="With --verify: rerun only these rows (comma-separated DATASET or DATASET/METHOD as the file names them, e.g. PTC_MR/ot-eps1); the record keeps the other rows as checked before, so parts run side by side join in it.",
        ),
    ] = "",
) -> None:
    """Reproduce a paper's graph table (H-SCL Table II, HCL-OT Table V, HCL Fig. 3, UnDiMix Fig. 7) from the shipped or fetched TU data: every method on the same seeds, ours beside the paper's number, paired differences with 95% intervals, the untrained encoder."""
    from hcl_cli.stages import table as table_stage

    if verify is not None:
        selected = tuple(filter(None, rows.split(",")))
        table_stage.verify(Path(verify), Path(data), threads=threads, rows=selected, seeds=seeds, tolerance=tolerance)
        return
    if rows or tolerance is not None:
        raise UsageError(f"{'--rows' if rows else '--tolerance'} belongs to a verification: give it with --verify")
    if name is None:
        raise UsageError("--name is required (but with --verify)")
    request = table_stage.TableRequest(
        name=name,
        datasets=tuple(filter(None, datasets.split(","))),
        methods=tuple(filter(None, methods.split(","))),
        seeds=10 if seeds is None else seeds,
        epochs=epochs,
        data=Path(data),
        out=Path(out),
        threads=threads,
        time_budget=time_budget,
        merge=tuple(merge or ()),
        protocol=protocol,
    )
    table_stage.run(request)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one-line errors and exit codes (2 usage, 1 runtime); ``--debug`` shows tracebacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    levels = {LEVELS[a] for a in args if a in LEVELS}
    args = [a for a in args if a != "--debug" and a not in LEVELS]
    set_level(quiet="quiet" in levels, verbose="verbose" in levels)
    command = typer.main.get_command(app)
    prog = "hcl" + (f" {args[0]}" if args and not args[0].startswith("-") else "")
    try:
        os.getcwd()  # before any stage imports torch, which dies on a deleted working directory with no line of hcl's
    except OSError as exc:
        _fail(prog, f"the working directory cannot be read ({exc.strerror}; deleted?): cd to a folder that exists and run again", 2, debug)
    try:
        with interrupt_policy(prog):
            code = command.main(args=args, prog_name="hcl", standalone_mode=False)
    except typer.Abort:
        _fail(prog, "aborted", 130, debug)
    except _CLICK_EXCEPTION as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message())
            sys.exit(0)
        _fail(prog, exc.format_message().replace("\n", " "), exc.exit_code, debug)
    except HclError as exc:
        _fail(prog, str(exc).replace("\n", " "), exc.exit_code, debug)
    except Interrupted as exc:
        _fail(prog, str(exc), exc.exit_code, debug)
    except KeyboardInterrupt:
        _fail(prog, "interrupted", 130, debug)
    except OSError as exc:
        if exc.filename is None and exc.errno in STREAM_ERRORS:  # printing, e.g. --help, to a full disk or a closed pipe
            _drop_stdout()
            _fail(prog, f"cannot write to standard output: {exc.strerror}", 1, debug)
        _fail(prog, f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)".replace("\n", " "), 1, debug)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if _out_of_memory(exc):
            _fail(prog, f"out of memory: {_first_line(exc)} (the input or the options ask for more than this machine has)", 1, debug)
        _fail(prog, f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)".replace("\n", " "), 1, debug)
    try:
        write_stdout("")  # what a stage printed and is still buffered
    except HclError as exc:
        _fail(prog, str(exc), exc.exit_code, debug)
    sys.exit(code if isinstance(code, int) else 0)


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output now; a write error (``hcl params > /dev/full``, a closed pipe) is
    an :class:`HclError`, and what could not be written is dropped so that exiting does not fail on it again."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        _drop_stdout()
        raise HclError(f"cannot write to standard output: {exc.strerror or exc}") from None


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed (Python's MemoryError, torch's out-of-memory on any device): a failure of
    the run's size, exit 1, not an internal error."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(exc)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _drop_stdout() -> None:
    """Send standard output to the null device, so that what it could not write is not tried again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _fail(prog: str, message: str, code: int, debug: bool) -> NoReturn:
    if debug:
        traceback.print_exc()
    exit_with(prog, message, code)
