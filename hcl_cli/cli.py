"""The ``hcl`` command: parse options, build the stage's config, call the stage.

Each subcommand's options are its config's declared options (:mod:`hcl_cli.config`), so every
option has help text and maps one to one to a params.yaml key. ``--params FILE`` reads the
stage's group from FILE (what dvc.yaml passes, so no parameter value ever reaches a shell);
options given on the command line win; the stage's configuration checks every value once, and
the stage receives it frozen. Stage modules, and with them torch, are imported only when a stage
runs, so ``--help`` stays instant. This module is the front end: no stage imports it, so editing
a help text here or in another stage's declarations reruns no pipeline stage.

A thin table of commands: each is a call of its stage's ``run`` (``hcl table`` and ``hcl compare`` included), the work is
in ``stages/``; how the help is printed is :mod:`hcl_cli.cli_help`'s, how a command ends on the console :mod:`hcl_cli.console`'s.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from hcl_cli.cli_help import HelpCommand, HelpGroup, typer_parameter
from hcl_cli.config.base import StageConfig
from hcl_cli.config.export import ExportConfig
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.console import answered, write_stdout
from hcl_cli.errors import UsageError
from hcl_cli.logs import LOG, set_level
from hcl_cli.option import option_name, parse_bool, parse_number
from hcl_cli.params import default_params_yaml, read_group, sampler_options_markdown
from hcl_cli.versions import check_torch_pair

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


def stage_runner(config_cls: type[StageConfig]) -> Callable[[Any], None]:
    """The call of the ``run(config)`` of ``config_cls``'s stage module (``hcl linear-eval``: ``stages/linear_eval.py``), which
    imports it, and torch, only when the stage runs."""

    def run(config: StageConfig) -> None:
        importlib.import_module(f"hcl_cli.stages.{config_cls.command.replace('-', '_')}").run(config)

    return run


STAGE_RUNNERS: dict[type[StageConfig], Callable[[Any], None]] = {cls: stage_runner(cls) for cls in (*STAGE_CONFIGS, ExportConfig)}


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
    """List the papers' experiments by paper and table, or write one into params.yaml for dvc repro / dvc exp run.

    A preset sets the prepare, pretrain and linear groups (graphs: and knn), after saying what the run would cost here."""
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
    """Tabulate the workspace and every DVC experiment (dvc exp show --json): the parameters that vary against kNN and linear top-1 (a sentence sweep: each SentEval task), with 95% intervals."""
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
            help="Comma-separated methods and groups: table2 (H-SCL Table II), table5 (HCL-OT Table V), betas, fig3 (HCL Fig. 3), fig7 (UnDiMix Fig. 7), or rows such as ucl, hucl, hscl, ot-eps0.5; with --images: images (ucl debiased hucl scl hscl ot undimix) or some of them; with --sentences: sentences (qt debiased hard-beta1 hard-beta2 undimix), hcl-table2, undimix-table4 or rows. Default: table2,table5, images or sentences."
        ),
    ] = "",
    seeds: Annotated[
        int | None,
        typer.Option(
            help="Run seeds 0..N-1 of every method (default 10; sentences 5); with --verify, rerun each row's first N seeds (default all)."
        ),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(
            help="Train this many epochs instead of the presets' 200 (a smoke run); with --images: the recipe's (200); with --sentences: pretrain's (3)."
        ),
    ] = None,
    images: Annotated[
        str | None,
        typer.Option(
            metavar="NAME=PATH",
            help="An image table instead (docs/tables.md): the dataset at PATH (a prepared folder, train/ and test/ class folders or a tar archive of them, or torchvision's CIFAR/STL layout), named NAME (cifar10: the papers' numbers stand beside ours).",
        ),
    ] = None,
    sentences: Annotated[
        str | None,
        typer.Option(
            metavar="CORPUS",
            help="A sentence table instead, HCL Table 2 and UnDiMix Table 4 (docs/tables.md): quick-thought trained on CORPUS (a folder of .txt files, one sentence a line, or a prepared corpus), read out on the tasks of --senteval.",
        ),
    ] = None,
    senteval: Annotated[str, typer.Option(metavar="DIR", help="With --sentences: SentEval's task files (the tasks DIR holds).")] = "",
    folds: Annotated[int, typer.Option(help="With --sentences: SentEval's folds, outer and inner (10; prototyping: 5).")] = 10,
    page: Annotated[str | None, typer.Option(metavar="FILE", help="With --sentences: also write the tables into FILE's markers.")] = None,
    arch: Annotated[str, typer.Option(help="With --images: every row's architecture.")] = "resnet18",
    batch_size: Annotated[
        int | None, typer.Option(help="With --images or --sentences: every row's batch (default 512; sentences 400).")
    ] = None,
    precision: Annotated[str, typer.Option(help="With --images: auto (bf16 on CUDA), bf16 or fp32.")] = "auto",
    eval_every: Annotated[int, typer.Option(help="With --images: the kNN probe's epochs apart (HCL Fig. 11: 5); 0: none.")] = 5,
    device: Annotated[str, typer.Option(help="With --images: auto (CUDA when present), cpu or cuda.")] = "auto",
    compile_step: Annotated[
        bool,
        typer.Option("--compile", help="With --images: torch.compile each run's step (CUDA); not part of the recipe, each run records it."),
    ] = False,
    work: Annotated[str | None, typer.Option(help="Work folder (prepared data, runs.json); default OUT/NAME.")] = None,
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
    """Reproduce a paper's table: on graphs (H-SCL Table II, HCL-OT Table V, HCL Fig. 3, UnDiMix Fig. 7), images or sentences.

    Every method runs on the same seeds, ours beside the paper's number, with paired differences (95% intervals) and the
    untrained encoder: graph tables on the shipped or fetched TU data; --images every sampler on an image dataset;
    --sentences HCL Table 2 and UnDiMix Table 4 on a corpus, read out on SentEval's tasks."""
    from hcl_cli.stages import table as table_stage

    request: object = None
    run_table = table_stage.run
    if name is not None and sentences is not None:
        from hcl_cli.stages import table_sentences

        if images is not None:
            raise UsageError("--images and --sentences: one table at a time")

        recipe_asked = (epochs, batch_size, folds)
        paths = (sentences, senteval, out, work, page)
        request = table_sentences.request(name, methods, seeds, recipe_asked, paths, threads, time_budget, tuple(merge or ()))
        run_table = table_sentences.run
    elif name is not None and images is not None:
        from hcl_cli.stages import table_images
        from hcl_cli.tables.image_methods import Recipe

        dataset, source = table_images.parse_images(images)
        recipe = Recipe(arch, batch_size or Recipe.batch_size, epochs or Recipe.epochs, precision, eval_every, compile_step)
        rows_asked = tuple(filter(None, (methods or "images").split(",")))
        request = table_images.ImageTableRequest(
            name,
            dataset,
            source,
            rows_asked,
            10 if seeds is None else seeds,
            recipe,
            device,
            Path(out),
            work and Path(work),
            threads,
            time_budget,
            tuple(merge or ()),
        )
        run_table = table_images.run
    elif name is not None:
        request = table_stage.TableRequest(
            name=name,
            datasets=tuple(filter(None, datasets.split(","))),
            methods=tuple(filter(None, (methods or "table2,table5").split(","))),
            work=work and Path(work),
            seeds=10 if seeds is None else seeds,
            epochs=epochs,
            data=Path(data),
            out=Path(out),
            threads=threads,
            time_budget=time_budget,
            merge=tuple(merge or ()),
            protocol=protocol,
        )
    table_stage.run_command(request, verify, Path(data), threads, rows, run_table, seeds, tolerance)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one-line errors and exit codes (2 usage, 1 runtime); ``--debug`` shows tracebacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    levels = {LEVELS[a] for a in args if a in LEVELS}
    args = [a for a in args if a != "--debug" and a not in LEVELS]
    set_level(quiet="quiet" in levels, verbose="verbose" in levels)
    command = typer.main.get_command(app)
    prog = "hcl" + (f" {args[0]}" if args and not args[0].startswith("-") else "")
    answered(prog, lambda: command.main(args=args, prog_name="hcl", standalone_mode=False), debug)
