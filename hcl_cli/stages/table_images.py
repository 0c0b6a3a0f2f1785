"""``hcl table --images NAME=PATH``: every sampler on one image dataset at one recipe, N seeded repeats, resumably.

The image side of ``hcl table`` (:mod:`hcl_cli.stages.table`): the same record, parts, ``--merge``, ``--time-budget``,
resume and Markdown. The dataset is given by path: a prepared folder (``hcl prepare``'s output, used as it is), an
image folder of ``train/`` and ``test/`` class folders or a tar archive of one, or torchvision's layout of CIFAR-10,
CIFAR-100 or STL-10; it is prepared once into ``WORK/prepared/NAME-HASH``. Every row
(:mod:`hcl_cli.tables.image_methods`) trains from scratch once per seed 0..N-1 at the same recipe (architecture,
batch, epochs, precision: the table's heading), seed-major, beside the untrained encoder of the seed
(:mod:`hcl_cli.tables.image_runs`).

Each run is written the moment it ends: ``WORK/runs.json`` and the results file ``OUT/NAME.json`` (with its Markdown),
which holds every run (``runs``), so that a committed results file is a record that a later invocation, on another
machine, resumes and joins: it skips the (row, seed) pairs the record holds and adds the ones it runs. With
``--time-budget`` a run is not started once the budget is spent, nor when the time left is under what the same row
took before on the same device, in which case a later, shorter run may start (the runs that fit a GPU loan); it exits
75, and the same command continues. A results file of the same
name with another recipe or other row parameters is refused.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hcl_cli.config import PretrainConfig
from hcl_cli.errors import UsageError, shown
from hcl_cli.image.archive import IMAGE_SPLITS
from hcl_cli.provenance import portable
from hcl_cli.stages.table import TableStopped, Writer, prepared_folder, read_json, relative, save_json, sources_digest, write_json
from hcl_cli.tables.image_methods import ABSENT, IMAGE_ROWS, PAPER_DATASET, Recipe, image_rows, paper_numbers
from hcl_cli.tables.image_runs import ImageData, load_images, precision_of, run_image
from hcl_cli.tables.image_summary import image_markdown, image_table
from hcl_cli.tables.owned import check_owned, write_owned

TORCHVISION_FOLDERS = {"cifar-10-batches-py": "cifar10", "cifar-100-python": "cifar100", "stl10_binary": "stl10"}
"""torchvision's folder of each dataset -> ``hcl prepare``'s ``--dataset``."""
ARCHIVES = (".tar", ".tar.gz", ".tgz")
READOUTS_NOTE = (
    "kNN top-1 (k 200, temperature 0.5, hcl knn-eval's defaults) and linear top-1 (one linear layer fitted by L-BFGS, 100 "
    "iterations, on the standardised features: hcl linear-eval --protocol fixed), both of the backbone's features of every "
    "test image against every train image; mean ± std over seeds (ddof 0); intervals: t over the per-seed paired differences"
)


@dataclass(frozen=True)
class ImageTableRequest:
    """One invocation of ``hcl table --images`` (:func:`hcl_cli.cli.table`)."""

    name: str
    dataset: str
    source: Path
    rows: tuple[str, ...] = ("images",)
    seeds: int = 3
    recipe: Recipe = field(default_factory=Recipe)
    device: str = "auto"
    out: Path = Path("runs/tables")
    work: Path | None = None
    threads: int = 1
    time_budget: float = 0.0
    merge: tuple[str, ...] = ()
    writer: Writer = field(default=write_json, compare=False)
    markdown_file: bool = True

    @property
    def work_folder(self) -> Path:
        return self.work or self.out / self.name


def parse_images(text: str) -> tuple[str, Path]:
    """``NAME=PATH`` -> (name, path); ``cifar10`` is the name the papers' numbers are shown for."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path or any(ch in name for ch in "/\\\0"):
        raise UsageError(f"--images {text!r}: expected NAME=PATH, e.g. cifar10=data/raw/cifar10-jpeg.tar.gz")
    return name, Path(path)


def source_kind(source: Path) -> str | None:
    """What ``source`` holds: ``prepared`` (a card.json), a torchvision dataset, ``imagefolder`` (train/ and test/ or an
    archive), or None."""
    if source.is_file():
        return "imagefolder" if source.name.endswith(ARCHIVES) else None
    if (source / "card.json").is_file():
        return "prepared"
    for folder, dataset in TORCHVISION_FOLDERS.items():
        if (source / folder).is_dir():
            return dataset
    return "imagefolder" if all((source / split).is_dir() for split in IMAGE_SPLITS) else None


def prepared_images(request: ImageTableRequest) -> ImageData:
    """The request's dataset prepared once into ``WORK/prepared/NAME-HASH`` (or used as it is when prepared), loaded."""
    kind = source_kind(request.source)
    if kind is None:
        raise UsageError(
            f"--images {shown(request.source)}: not an image dataset (a prepared folder, train/ and test/ class folders or a tar "
            f"archive of them, or torchvision's {', '.join(TORCHVISION_FOLDERS)})"
        )
    if kind == "prepared":
        return load_images(request.source, request.device)
    folder = request.work_folder / "prepared" / f"{request.dataset}-{sources_digest(request.source)}"
    return load_images(prepared_folder(folder, dataset=kind, path=str(request.source)), request.device)


def recorded_runs(path: Path, recipe: dict[str, Any], rows: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """The runs, invocations and rows' parameters of the results file ``path`` (none where there is none); another recipe,
    or a row with other parameters, is a usage error."""
    stored = read_json(path, {})
    if not stored:
        return {}, [], {}
    if stored.get("modality") != "image" or stored.get("recipe") != json.loads(json.dumps(recipe)):
        raise UsageError(f"{shown(path)} holds another table (not this recipe: {stored.get('recipe')}): use another --name")
    for name, row in stored["table"]["rows"].items():
        if name in rows and row["parameters"] != json.loads(json.dumps(rows[name])):
            raise UsageError(f"{shown(path)} ran {name} with other parameters ({row['parameters']}): use another --name")
    return stored["runs"], stored.get("invocations", []), {name: row["parameters"] for name, row in stored["table"]["rows"].items()}


def estimated_seconds(done: dict[str, Any], name: str, device: str) -> float:
    """What row ``name`` took last on ``device`` (training and readouts), 0 where it has not run there."""
    seconds = [
        run["train_seconds"] + run["eval_seconds"]
        for key, run in done.items()
        if key.startswith(f"{name}/") and run.get("device") == device
    ]
    return seconds[-1] if seconds else 0.0


def run(request: ImageTableRequest) -> dict[str, Any]:
    """Run what is missing of the image table ``request`` names, writing the results file and Markdown after every run."""
    if request.seeds < 1 or request.recipe.epochs < 1 or request.threads < 1 or request.time_budget < 0:
        raise UsageError("--seeds, --epochs and --threads must be at least 1, --time-budget at least 0")
    if request.recipe.eval_every and request.recipe.epochs % request.recipe.eval_every:
        raise UsageError(
            f"--eval-every {request.recipe.eval_every} must divide --epochs {request.recipe.epochs} (the curve ends at the last epoch)"
        )
    check_owned(request.out / f"{request.name}.json", request.markdown_file, {name: request.out / f"{name}.json" for name in request.merge})
    rows = image_rows(list(request.rows))
    recipe = request.recipe.values()
    for values in rows.values():  # a bad --arch, --batch-size or --precision: one line, before anything is written
        PretrainConfig(**recipe, **values, device=request.device)
    torch.set_num_threads(request.threads)
    started = time.monotonic()
    deadline = started + request.time_budget if request.time_budget else math.inf
    work, path = request.work_folder, request.out / f"{request.name}.json"
    done, invocations, shown_rows = recorded_runs(path, recipe, rows)
    for name in request.merge:
        merged = request.out / f"{name}.json"
        if not merged.is_file():
            raise UsageError(f"--merge {name}: no {shown(merged)}")
        runs, _, parameters = recorded_runs(merged, recipe, rows)
        done, shown_rows = {**runs, **done}, {**parameters, **shown_rows}
    shown_rows = {name: {**shown_rows, **rows}[name] for name in IMAGE_ROWS if name in {**shown_rows, **rows}}  # the record's rows too
    ran = {"recipe": recipe, "rows": rows}
    recorded = read_json(work / "table.json", ran)
    if recorded["recipe"] != json.loads(json.dumps(recipe)) or any(
        recorded["rows"].get(name, parameters) != json.loads(json.dumps(parameters)) for name, parameters in rows.items()
    ):
        raise UsageError(
            f"{shown(work)} ran another recipe or other row parameters (see {shown(work / 'table.json')}): use another --name or --work"
        )
    save_json(work / "table.json", {"recipe": recipe, "rows": recorded["rows"] | rows})
    done = {**done, **{key: run for key, run in read_json(work / "runs.json", {}).items() if key.split("/")[0] in [*rows, "untrained"]}}
    data = prepared_images(request)
    device = torch.cuda.get_device_name(data.device) if data.device.type == "cuda" else "cpu"
    command = shlex.join(portable(argument, Path.cwd().resolve()) for argument in sys.argv)
    invocations = [*invocations, {"command": command, "device": device, "seconds": 0.0, "stopped": None}]

    def write(stopped: str | None) -> dict[str, Any]:
        invocations[-1] |= {"seconds": round(time.monotonic() - started, 1), "stopped": stopped}
        result = results(request, data, shown_rows, recipe, done, invocations, stopped)
        request.writer(path, result)
        if request.markdown_file:
            write_owned(path.with_suffix(".md"), image_markdown(result), markdown=True)
        return result

    skipped: list[str] = []
    for key in [f"{name}/{seed}" for seed in range(request.seeds) for name in ["untrained", *rows]]:
        name, seed = key.split("/")
        left = deadline - time.monotonic()
        if key in done or left <= 0:
            continue
        if left < estimated_seconds(done, name, device):
            skipped.append(key)  # a shorter run after it may still fit
            continue
        values = recipe | rows["ucl" if name == "untrained" else name] | {"compile": request.recipe.compile}
        done[key] = run_image(values, int(seed), data, work / "scratch", train=name != "untrained")
        save_json(work / "runs.json", done)
        write(None)
        print(
            f"hcl table: {key}: kNN {done[key]['knn']:.2f}, linear {done[key]['linear']:.2f} ({done[key]['train_seconds']:.1f} s train)",
            flush=True,
        )
    missing = [key for name in ["untrained", *rows] for key in [f"{name}/{seed}" for seed in range(request.seeds)] if key not in done]
    stopped = (
        f"the time budget ran out with {len(missing)} runs left ({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''})"
        if missing
        else None
    )
    if skipped:
        stopped = f"{stopped}; too long for the time left: {', '.join(skipped)}"
    result = write(stopped)
    print(image_markdown(result), end="", flush=True)
    if stopped:
        raise TableStopped(f"{stopped}; wrote {shown(path)} with the runs done: rerun the same command to continue")
    return result


def results(
    request: ImageTableRequest,
    data: ImageData,
    rows: dict[str, dict[str, Any]],
    recipe: dict[str, Any],
    done: dict[str, Any],
    invocations: list[Any],
    stopped: str | None,
) -> dict[str, Any]:
    """The results file: the recipe and its heading, the readouts, the table (:func:`~hcl_cli.tables.image_summary.image_table`)
    of ``rows`` (those asked for and those the record held), every run and every invocation."""
    precisions = sorted({run["precision"] for run in done.values()}) or [precision_of(recipe, data.device)]
    complete = stopped is None and all(f"{name}/{seed}" in done for name in ["untrained", *rows] for seed in range(request.seeds))
    return {
        "modality": "image",
        "complete": complete,
        "dataset": request.dataset,
        "prepared": relative(data.folder),
        "classes": data.card.num_classes,
        "images": {"train": len(data.train[1]), "test": len(data.test[1])},
        "repeats": request.seeds,
        "recipe": recipe,
        "heading": request.recipe.heading(" or ".join(precisions))
        + "".join(
            f"; {count} of {len(done)} runs compiled (--compile)" for count in [sum(run["compiled"] for run in done.values())] if count
        ),
        "readouts": READOUTS_NOTE,
        "papers_apply": request.dataset == PAPER_DATASET,
        "absent": ABSENT,
        "table": image_table(rows, {name: paper_numbers(name) for name in rows}, done, request.seeds),
        "runs": done,
        "invocations": invocations,
    }
