"""The ``hcl`` command: parse options, build the stage's config, call the stage.

Each subcommand's options come from the fields of its config dataclass in
:mod:`hcl_cli.config`, so every option has help text and maps one to one to a params.yaml key.
Stages are imported only when run, so ``--help`` stays instant.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
import traceback
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

from hcl_cli.config import (
    EmbedConfig,
    KnnConfig,
    LinearConfig,
    PrepareConfig,
    PretrainConfig,
    ReportConfig,
    StageConfig,
    option_name,
)
from hcl_cli.errors import HclError, UsageError
from hcl_cli.params import warn_unknown_params

# Typer vendors click in recent releases; find its exception base either way (torch 2.11 GPU images ship an older Typer).
_CLICK_EXCEPTION: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

app = typer.Typer(
    name="hcl",
    help="Contrastive representation learning with hard negative sampling (HCL, H-SCL, HCL-OT, UnDiMix), run as DVC stages.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _stage_command(config_cls: type[StageConfig], module: str) -> Callable[..., None]:
    """A Typer command whose options are ``config_cls``'s fields; it runs ``stages.<module>.run``."""

    hints = typing.get_type_hints(config_cls)
    # A boolean *parameter* takes a value (``--clip true``), so dvc.yaml can pass ``${pretrain.clip}``.
    valued_bools = {f.name for f in dataclasses.fields(config_cls) if hints[f.name] is bool and f.metadata.get("param")}

    def command(**values: Any) -> None:
        for name in valued_bools:
            values[name] = _parse_bool(name, values[name])
        config = config_cls(**values)
        importlib.import_module(f"hcl_cli.stages.{module}").run(config)

    parameters = []
    for f in dataclasses.fields(config_cls):
        choices = ("true", "false") if f.name in valued_bools else f.metadata.get("choices")
        kind = "Parameter" if f.metadata.get("param") else "Runtime"
        option = typer.Option(
            option_name(f.name),
            help=f.metadata["help"],
            metavar=("|".join(choices) if len("|".join(choices)) <= 24 else "NAME") if choices else None,
            rich_help_panel=f"{kind} options",
        )
        annotation = Annotated[str if f.name in valued_bools else hints[f.name], option]
        default = str(f.default).lower() if f.name in valued_bools else f.default
        parameters.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__doc__ = config_cls.__doc__
    return command


for _cls, _module, _name in (
    (PrepareConfig, "prepare", "prepare"),
    (PretrainConfig, "pretrain", "pretrain"),
    (EmbedConfig, "embed", "embed"),
    (LinearConfig, "linear_eval", "linear-eval"),
    (KnnConfig, "knn_eval", "knn-eval"),
    (ReportConfig, "report", "report"),
):
    app.command(_name, help=_cls.__doc__)(_stage_command(_cls, _module))


@app.command("compare")
def compare(
    out: Annotated[str, typer.Option(help="Output prefix: writes OUT.md and OUT.csv.")] = "reports/compare",
) -> None:
    """Tabulate every DVC experiment (dvc exp show --json): sampler, beta, tau_plus against kNN and linear top-1."""
    importlib.import_module("hcl_cli.stages.compare").run(out)


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise UsageError(f"{option_name(name)} must be true or false (got {value!r})")


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one-line errors and exit codes (2 usage, 1 runtime); ``--debug`` shows tracebacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    command = typer.main.get_command(app)
    prog = "hcl" + (f" {args[0]}" if args and not args[0].startswith("-") else "")
    try:
        warn_unknown_params()
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
    except KeyboardInterrupt:
        _fail(prog, "interrupted", 130, debug)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        _fail(prog, f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)".replace("\n", " "), 1, debug)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(prog: str, message: str, code: int, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(code)
