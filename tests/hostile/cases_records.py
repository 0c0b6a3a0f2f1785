"""Round five (issue 41): a file is the user's until hcl's record says hcl wrote it, images keep their depth, and every
input belongs to the run it claims.

Each case names the one exit code docs/errors.md's rule gives it: 2 for what the user gave and can fix (a file in an
output's place, an input of another run, a damaged checkpoint, a deleted working directory), 0 for what hcl handles.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .cases_owned import link
from .checks import absent, all_of, says, unchanged
from .harness import CPU, KNN, LINEAR, LIVE, PRETRAIN, REPORT, RESUME, TIMEOUT, Case, Check, Result, Setup, success, usage
from .setups import both, edit_json, write

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
FIGURES = ("loss.png", "knn_top1.png", "hscl_diagnostics.png", "similarity.png", "hard_negatives.png")
WELL_FORMED_CURVE = "step\tloss\n0\t9.99\n"


def kept(name: str, *args: str, setup: Setup, paths: tuple[str, ...], expect: int = 2, check: Check | None = None) -> Case:
    """A case whose ``paths`` (the user's files in hcl's way) are left byte for byte as they were."""
    record, same = unchanged(*paths)
    return Case(name, args, (expect,), setup=both(setup, record), check=all_of(same, check) if check else same)


def still_a_link(path: str) -> Check:
    return lambda work, result: None if (work / path).is_symlink() else f"{path} is no longer a symbolic link"


def other_runs_log(work: Path) -> None:
    """``other``: the training log of another run (its loss curve differs), beside this run's encoder."""
    shutil.copytree(work / LIVE, work / "other")
    (work / "other" / "plots" / "metrics" / "loss.tsv").write_text("step\tloss\n0\t1.5\n")


def truncated_checkpoint(work: Path) -> None:
    """The newest checkpoint of ``models/checkpoints`` cut short by its last bytes (its header still parses)."""
    (newest,) = sorted((work / "models" / "checkpoints").glob("epoch-*.safetensors"))[-1:]
    newest.write_bytes(newest.read_bytes()[:-8])


def wide_images(root: str, mode: str, suffix: str) -> Setup:
    """``root/{train,test}/{a,b}/``: two 4-pixel images per class and split in ``mode``, class a at half of 16 bits, b at a quarter."""

    def setup(work: Path) -> None:
        from PIL import Image

        for split in ("train", "test"):
            for name, value in (("a", 32768), ("b", 16384)):
                (work / root / split / name).mkdir(parents=True)
                for index in range(2):
                    pixels = np.full((2, 2), value if mode != "F" else value / 65535)
                    if mode == "I;16":
                        image = Image.frombytes(mode, (2, 2), pixels.astype("<u2").tobytes())
                    else:
                        image = Image.fromarray(pixels.astype(np.float32 if mode == "F" else np.int32), mode=mode)
                    image.save(work / root / split / name / f"{index}.{suffix}")

    return setup


def prepared_pixels(path: str, expected: set[int]) -> Check:
    """The prepared split ``path`` holds exactly the pixel values ``expected`` (scaled by depth, not saturated at 255)."""

    def check(work: Path, result: Result[str]) -> str | None:
        from safetensors.numpy import load_file

        values = {int(value) for value in np.unique(load_file(str(work / path))["images"])}
        return None if values == expected else f"{path} holds pixel values {sorted(values)}, not {sorted(expected)}"

    return check


def no_raw_control_characters(path: str) -> Check:
    def check(work: Path, result: Result[str]) -> str | None:
        text = (work / path).read_text(encoding="utf-8")
        raw = sorted({f"U+{ord(char):04X}" for char in text if char in "\x00\u202e"})
        return f"{path} holds {', '.join(raw)} raw" if raw else None

    return check


def from_a_deleted_folder(work: Path, args: Sequence[str]) -> Result[str]:
    """``hcl ARGS`` started in a folder deleted just before ``hcl`` starts."""
    gone = work / "gone"
    gone.mkdir()

    def enter_and_delete() -> None:
        os.chdir(gone)
        os.rmdir(gone)

    # The console script's start, without a launcher (a pyenv shim) that itself needs the working directory.
    start = "import sys; sys.path[:] = [p for p in sys.path if p]; from hcl_cli.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", start, *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=enter_and_delete,
        check=False,
    )


def record_cases() -> list[Case]:
    """Items 1 and 3: every file of every name hcl writes is the user's unless hcl's record lists it."""
    report_out = (*REPORT[:-1], "mine/report.md")
    return [
        *(
            kept(
                f"report over a user's figures/{name} with no report.md",
                *report_out,
                setup=write(f"mine/figures/{name}", PNG),
                paths=(f"mine/figures/{name}",),
            )
            for name in FIGURES
        ),
        kept(
            "report over a user's symlink at figures/loss.png",
            *report_out,
            setup=both(write("elsewhere.png", PNG), link("mine/figures/loss.png", "elsewhere.png")),
            paths=("elsewhere.png",),
            check=still_a_link("mine/figures/loss.png"),
        ),
        kept(
            "report over a user's file named as hcl's record in figures/",
            *report_out,
            setup=write("mine/figures/.hcl-written.json", "{}"),
            paths=("mine/figures/.hcl-written.json",),
        ),
        kept(
            "pretrain over a user's well-formed loss.tsv with no metrics.json",
            *PRETRAIN,
            setup=write("live/plots/metrics/loss.tsv", WELL_FORMED_CURVE),
            paths=("live/plots/metrics/loss.tsv",),
        ),
        kept(
            "pretrain over a user's well-formed metrics.json",
            *PRETRAIN,
            setup=write("live/metrics.json", '{"loss": 1.0, "step": 0}\n'),
            paths=("live/metrics.json",),
        ),
        kept(
            "pretrain over a user's file named as hcl's record of the log",
            *PRETRAIN,
            setup=write("live/plots/.hcl-written.json", "notes"),
            paths=("live/plots/.hcl-written.json",),
        ),
        kept(
            "pretrain over hcl's own curve edited by the user",
            *PRETRAIN[:-2],
            "--live-dir",
            LIVE,
            setup=write(f"{LIVE}/plots/metrics/loss.tsv", WELL_FORMED_CURVE),
            paths=(f"{LIVE}/plots/metrics/loss.tsv",),
        ),
        kept(
            "knn over a user's well-formed metrics file",
            *KNN,
            setup=write("k.json", '{"top1": 0.5, "top5": 0.9, "test_size": 10}\n'),
            paths=("k.json",),
        ),
        kept(
            "knn beside a user's file named as hcl's record", *KNN, setup=write(".hcl-written.json", "mine"), paths=(".hcl-written.json",)
        ),
        kept(
            "linear-eval over knn-eval's metrics",
            *LINEAR[:-5],
            "metrics/knn.json",
            *LINEAR[-4:],
            setup=lambda work: None,
            paths=("metrics/knn.json",),
            check=says("is hcl's kNN metrics, not its linear metrics"),
        ),
        kept(
            "knn-eval over linear-eval's metrics",
            *KNN[:-3],
            "metrics/linear.json",
            *CPU,
            setup=lambda work: None,
            paths=("metrics/linear.json",),
            check=says("is hcl's linear metrics, not its kNN metrics"),
        ),
        success("knn-eval over its own earlier metrics", *KNN[:-3], "metrics/knn.json", *CPU),
    ]


def depth_cases() -> list[Case]:
    """Item 2: images wider than 8 bits scaled by their depth, or refused in one line."""
    prepare = ("prepare", "--dataset", "imagefolder", "--path", "wide", "--out", "p", "--test-fraction", "0.5")
    return [
        success(
            "prepare of 16-bit PNGs scales by depth",
            *prepare,
            setup=wide_images("wide", "I;16", "png"),
            check=prepared_pixels("p/train.safetensors", {64, 128}),
        ),
        success(
            "prepare of 32-bit integer TIFFs scales by 16 bits",
            *prepare,
            setup=wide_images("wide", "I", "tiff"),
            check=prepared_pixels("p/train.safetensors", {64, 128}),
        ),
        usage(
            "prepare of floating-point TIFFs", *prepare, setup=wide_images("wide", "F", "tiff"), check=all_of(says("mode F"), absent("p"))
        ),
    ]


def bound_cases() -> list[Case]:
    """Items 4, 6, 8, 9, 10: inputs bound to their run, one validator, escaped markdown, a way on, the working directory."""
    plots = REPORT.index("--plots") + 1
    return [
        usage(
            "report with another run's training log",
            *REPORT[:plots],
            "other",
            *REPORT[plots + 1 :],
            setup=other_runs_log,
            check=all_of(says("--plots other is not the training log that --model models/encoder.safetensors was made from"), absent("r")),
        ),
        *(
            usage(
                f"report metrics {name}",
                *REPORT,
                setup=edit_json("metrics/knn.inputs.json", lambda v, c=change: v["params"].update(c)),
                check=says(message),
            )
            for name, change, message in (
                ("k -5", {"k": -5}, "'k' must be a positive integer"),
                ("feature with path parts", {"feature": "../../etc"}, "'feature' must be backbone or projection"),
                ("temperature -1", {"temperature": -1}, "'temperature' must be a positive number"),
            )
        ),
        success(
            "report of params with NUL and U+202E",
            *REPORT,
            "--params-file",
            "p.yaml",
            setup=write("p.yaml", 'mine:\n  note: "a\\0b"\n  title: "hcl\\u202egpj.exe"\n'),
            check=no_raw_control_characters("r/report.md"),
        ),
        usage(
            "resume --restart-on-change over a truncated checkpoint",
            *RESUME,
            "--restart-on-change",
            setup=truncated_checkpoint,
            check=says("to go on, move models/checkpoints aside"),
        ),
        Case(
            "knn from a deleted working directory", KNN, (2,), run=from_a_deleted_folder, check=says("the working directory cannot be read")
        ),
        Case(
            "pretrain from a deleted working directory",
            PRETRAIN,
            (2,),
            run=from_a_deleted_folder,
            check=says("the working directory cannot be read"),
        ),
    ]


CASES: list[Case] = [*record_cases(), *depth_cases(), *bound_cases()]
