"""Reproduce a table: named parameter sets, each run end to end through hcl's stages, resumably.

Every set runs ``prepare`` (shared by all sets), ``pretrain``, ``embed``, ``knn-eval`` and
``linear-eval`` in-process (``hcl_cli.stages.*.run`` with their configs) in its own folder
``WORK/SET``. A stage whose output exists is skipped; pretrain runs with ``resume=True``, so it
continues from its last checkpoint. With ``--time-budget SECONDS`` the run stops cleanly once the
budget is spent: between stages, or inside pretrain at the next step boundary (a SIGINT to this
process, which pretrain answers with a checkpoint); rerun the same command to continue. So a long
table runs as a series of short jobs. Other stages, once started, run to their end.

A set is ``NAME:key=value,key=value`` (``--set``, repeatable) or an entry of a YAML/JSON file
(``--sets FILE``: ``{prepare: {...}, all: {...}, sets: {NAME: {key: value}}}``). Keys are
``PretrainConfig``'s parameters (``sampler``, ``beta``, ``epochs``, ``max_steps``...), ``embed.KEY``,
``knn.KEY`` and ``linear.KEY`` for the other stages, and ``paper``: the paper's top-1 for the set,
printed beside ours. ``--all`` gives keys for every set (a set's own win); ``--prepare`` the
``PrepareConfig`` (default: digits). A set's parameters are recorded in its folder, and a rerun
with other ones is refused (use another ``--name``, or delete the folder). Run from the repository root::

    python -m benchmarks.reproduce --name digits_smoke --all epochs=5 \\
        --set ucl:sampler=ucl --set hucl:sampler=hucl,beta=1,tau_plus=0.1 --set scl:sampler=scl --set hscl:sampler=hscl,beta=1

It writes ``benchmarks/results/reproduce_<name>.json`` (top-1 per set, the paper's number, and
every invocation's stages with their seconds) after every invocation; it exits 0 when every set
is done and 75 when the time budget stopped it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, portable, prepared, write_result
from hcl_cli.config import EmbedConfig, KnnConfig, LinearConfig, PrepareConfig, PretrainConfig
from hcl_cli.runtime import resolve_device
from hcl_cli.stages import embed, knn_eval, linear_eval, pretrain
from hcl_cli.training.signals import TrainingInterrupted

STOPPED_BY_BUDGET = 75
STAGE_GROUPS = ("embed", "knn", "linear")
PAIR = re.compile(r",(?=[\w.]+=)")
"""Splits ``a=1,b=1,1,1`` at the commas that start a new ``key=`` (so list values keep theirs)."""


class Stopped(Exception):
    """The time budget ran out, or a signal stopped pretrain; the message says where."""


def parse_values(text: str) -> dict[str, Any]:
    """``key=value,key=value`` with YAML scalars (``1`` int, ``0.1`` float, ``true`` bool, else str)."""
    pairs = [pair.partition("=") for pair in PAIR.split(text) if pair]
    if any(not sep for _, sep, _ in pairs):
        raise SystemExit(f"expected key=value pairs, got {text!r}")
    return {key.strip(): yaml.safe_load(value) for key, _, value in pairs}


def load_table(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The prepare options and every set's values (``--all`` under each), from ``--sets`` then the command line."""
    table = yaml.safe_load(args.sets.read_text()) if args.sets else {}
    prepare_values = {"dataset": "digits", **table.get("prepare", {}), **parse_values(args.prepare or "")}
    common = {**table.get("all", {}), **parse_values(args.all or "")}
    sets = {name: dict(values) for name, values in table.get("sets", {}).items()}
    for text in args.set:
        name, _, values = text.partition(":")
        sets[name] = {**sets.get(name, {}), **parse_values(values)}
    if not sets:
        raise SystemExit("no sets: give --set NAME:key=value,... or --sets FILE")
    return prepare_values, {name: {**common, **values} for name, values in sets.items()}


class Table:
    """One invocation over the sets: the work folder, the deadline, and the stages run so far."""

    def __init__(self, work: Path, device: str, budget: float | None) -> None:
        self.work, self.device = work, device
        self.deadline = time.monotonic() + budget if budget else None
        self.events: list[dict[str, Any]] = []

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def stage(self, label: str, output: Path, run: Callable[[], None]) -> None:
        """Run one stage unless ``output`` exists; refuse to start one once the budget is spent."""
        if output.exists():
            return
        if self.left() <= 0:
            raise Stopped(f"time budget spent before {label}")
        start = time.perf_counter()
        run()
        self.events.append({"stage": label, "seconds": round(time.perf_counter() - start, 2), "outcome": "done"})

    def pretrain(self, label: str, config: PretrainConfig) -> None:
        """``pretrain.run`` with a SIGINT to this process when the budget runs out (pretrain then saves a checkpoint and stops)."""
        timer = threading.Timer(max(self.left(), 0.0), os.kill, (os.getpid(), signal.SIGINT)) if self.deadline else None
        start = time.perf_counter()
        try:
            if timer:
                timer.start()
            pretrain.run(config)
        except (TrainingInterrupted, KeyboardInterrupt) as stop:
            self.events.append({"stage": label, "seconds": round(time.perf_counter() - start, 2), "outcome": str(stop) or "stopped"})
            raise Stopped(f"stopped during {label}: {stop}") from None
        finally:
            if timer:
                timer.cancel()

    def configs(self, name: str, values: dict[str, Any]) -> dict[str, Any]:
        """The configs of set ``name``'s stages, in its folder: pretrain, embed, knn, linear."""
        folder, data = self.work / name, self.work / "prepared"
        stage_values = {
            group: {key.partition(".")[2]: value for key, value in values.items() if key.startswith(group + ".")} for group in STAGE_GROUPS
        }
        own = {key: value for key, value in values.items() if "." not in key and key != "paper"}
        embeddings, encoder = folder / "embeddings.safetensors", folder / "models" / "encoder.safetensors"
        return {
            "pretrain": PretrainConfig(
                **own, data=str(data), out=str(encoder.parent), live_dir=str(folder / "dvclive"), resume=True, device=self.device
            ),
            "embed": EmbedConfig(**stage_values["embed"], data=str(data), model=str(encoder), out=str(embeddings), device=self.device),
            "knn": KnnConfig(**stage_values["knn"], embeddings=str(embeddings), out=str(folder / "knn.json"), device=self.device),
            "linear": LinearConfig(
                **stage_values["linear"], embeddings=str(embeddings), out=str(folder / "linear.json"), device=self.device
            ),
        }

    def run_set(self, name: str, configs: dict[str, Any]) -> None:
        """Every stage of set ``name`` that is not done yet."""
        record_parameters(self.work / name / "set.json", {group: config.params() for group, config in configs.items()})
        self.stage(
            f"{name}: pretrain",
            Path(configs["pretrain"].out) / "encoder.safetensors",
            lambda: self.pretrain(f"{name}: pretrain", configs["pretrain"]),
        )
        self.stage(f"{name}: embed", Path(configs["embed"].out), lambda: embed.run(configs["embed"]))
        self.stage(f"{name}: knn-eval", Path(configs["knn"].out), lambda: knn_eval.run(configs["knn"]))
        self.stage(f"{name}: linear-eval", Path(configs["linear"].out), lambda: linear_eval.run(configs["linear"]))


def record_parameters(path: Path, parameters: dict[str, Any]) -> None:
    """Write ``path`` on the first run; later, refuse other parameters than it records."""
    parameters = json.loads(json.dumps(parameters))  # tuples as lists, as the file holds them
    if path.is_file():
        if json.loads(path.read_text()) != parameters:
            raise SystemExit(f"{path.parent} was made with other parameters (see {path}): use another --name or delete that folder")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(parameters, indent=2) + "\n")


def row(configs: dict[str, Any], paper: float | None) -> dict[str, Any]:
    """A set's row: the parameters its sampler reads, our kNN and linear top-1 (None until done) and the paper's number."""
    top1 = {
        group: json.loads(Path(configs[group].out).read_text())["top1"] if Path(configs[group].out).is_file() else None
        for group in ("knn", "linear")
    }
    return {"parameters": configs["pretrain"].used_params(), "knn_top1": top1["knn"], "linear_top1": top1["linear"], "paper_top1": paper}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1]
    )
    parser.add_argument("--name", required=True, help="the table's name: results/reproduce_NAME.json, and its work folder")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:KEY=VALUE,...", help="a parameter set (repeatable)")
    parser.add_argument("--sets", type=Path, help="YAML or JSON file of sets (prepare, all, sets)")
    parser.add_argument("--all", metavar="KEY=VALUE,...", help="values for every set")
    parser.add_argument("--prepare", metavar="KEY=VALUE,...", help="PrepareConfig values (default dataset=digits)")
    parser.add_argument("--work", type=Path, help="work folder (default benchmarks/work/NAME)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--time-budget", type=float, default=0, metavar="SECONDS", help="stop cleanly after this long; rerun to continue (0: no limit)"
    )
    args = parser.parse_args()
    prepare_values, sets = load_table(args)
    table = Table(args.work or ROOT / "benchmarks" / "work" / args.name, args.device, args.time_budget)
    configs = {name: table.configs(name, values) for name, values in sets.items()}
    started, stopped = time.strftime("%Y-%m-%dT%H:%M:%S%z"), None
    try:
        data = table.work / "prepared"
        record_parameters(table.work / "prepare.json", PrepareConfig(**prepare_values).params())
        table.stage("prepare", data, lambda: prepared(data, **prepare_values))
        for name, set_configs in configs.items():
            table.run_set(name, set_configs)
    except Stopped as stop:
        stopped = str(stop)
    log_path = table.work / "invocations.json"
    invocations = json.loads(log_path.read_text()) if log_path.is_file() else []
    invocations.append(
        {"started": started, "command": shlex.join(portable(argument) for argument in sys.argv), "stages": table.events, "stopped": stopped}
    )
    log_path.write_text(json.dumps(invocations, indent=2) + "\n")
    rows = {name: row(set_configs, sets[name].get("paper")) for name, set_configs in configs.items()}
    for name, figures in rows.items():
        print(f"{name:>16}: kNN top-1 {figures['knn_top1']}, linear top-1 {figures['linear_top1']}, paper {figures['paper_top1']}")
    complete = stopped is None
    write_result(
        f"reproduce_{args.name}",
        {
            "complete": complete,
            "work": portable(str(table.work.resolve())),
            "prepare": {key: portable(value) if isinstance(value, str) else value for key, value in prepare_values.items()},
            "sets": rows,
            "invocations": invocations,
        },
        resolve_device(args.device),
    )
    if not complete:
        print(f"{stopped}; rerun the same command to continue", file=sys.stderr)
        sys.exit(STOPPED_BY_BUDGET)


if __name__ == "__main__":
    main()
