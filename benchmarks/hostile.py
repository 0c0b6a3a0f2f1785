"""Hostile cases against the installed ``hcl``: bad numbers, bad paths, bad files, full disks, concurrency and kills.

Prepares a tiny digits pipeline once (prepare, a one-epoch small-CNN pretrain, embed, knn-eval,
linear-eval) in a temporary folder, then runs every case of :func:`cases` in its own copy of it,
as a user or a careless script would, and checks the answer: the exit code (0 success, 1 runtime
error, 2 usage error, 130/143 a signal; never death by the signal itself, -2: a Ctrl-C during the
interpreter's last teardown is ignored), and for every failure one ``error:`` line on stderr with
no traceback and no "internal error", plus whatever the case itself checks (a file left unchanged,
nothing written outside, a hang that must not happen). Writes ``benchmarks/results/hostile.json``:
per case its name, command, exit code, expected codes, verdict and the first line of stderr.

    python benchmarks/hostile.py [--only SUBSTRING] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HCL = shutil.which("hcl") or "hcl"
TIMEOUT = 120.0
HUGE = "9" * 300
ENCODER = "models/encoder.safetensors"
EMBEDDINGS = "data/embeddings.safetensors"
PREPARED = "data/prepared"
LIVE = "dvclive/pretrain"
CPU = ("--device", "cpu")
REPORT = (
    "report",
    "--data",
    PREPARED,
    "--model",
    ENCODER,
    "--embeddings",
    EMBEDDINGS,
    "--metrics",
    "metrics",
    "--plots",
    LIVE,
    "--out",
    "r/report.md",
)
TINY_PRETRAIN = ("pretrain", "--data", PREPARED, "--arch", "small_cnn", "--batch-size", "32", "--epochs", "1", *CPU)

Result = subprocess.CompletedProcess
Check = Callable[[Path, "Result[str]"], str | None]


@dataclass
class Case:
    """One hostile input: the ``hcl`` arguments, the exit codes that are right, and what else must hold."""

    name: str
    args: Sequence[str]
    expect: tuple[int, ...]
    setup: Callable[[Path], None] | None = None
    check: Check | None = None
    run: Callable[[Path, Sequence[str]], Result[str]] | None = None
    fsize_limit: int | None = None
    stdout: str | None = None
    owner: str = "h6"
    notes: list[str] = field(default_factory=list)


def hcl(
    work: Path, args: Sequence[str], *, fsize_limit: int | None = None, stdout_path: str | None = None, timeout: float = TIMEOUT
) -> Result[str]:
    """Run the installed ``hcl`` in ``work``; a run past ``timeout`` counts as a hang (exit code -1)."""

    def limit() -> None:
        if fsize_limit is not None:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    out = open(stdout_path, "w") if stdout_path else subprocess.PIPE  # noqa: SIM115 - closed below
    try:
        return subprocess.run([HCL, *args], cwd=work, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -1, "", f"hang: no answer in {timeout:.0f} s")
    finally:
        if stdout_path:
            out.close()  # type: ignore[union-attr]


# --- setups -------------------------------------------------------------------------------------------------------


def write(path: str, content: str | bytes) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


def fifo(path: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(work / path)

    return setup


def edit_json(path: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        values = json.loads((work / path).read_text())
        change(values)
        (work / path).write_text(json.dumps(values))

    return setup


def flip_byte(path: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        data = bytearray((work / path).read_bytes())
        data[-1] ^= 0xFF
        (work / path).write_bytes(bytes(data))

    return setup


def truncate(path: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        data = (work / path).read_bytes()
        (work / path).write_bytes(data[: len(data) // 2])

    return setup


def remove(path: str) -> Callable[[Path], None]:
    return lambda work: (work / path).unlink()


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        for step in setups:
            step(work)

    return setup


def checkpoint_sidecar(work: Path) -> Path:
    pointer = json.loads((work / "models/checkpoints/latest.json").read_text())["checkpoint"]
    return (work / "models/checkpoints" / pointer).with_suffix(".json")


def crafted_history(name: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        sidecar = checkpoint_sidecar(work)
        values = json.loads(sidecar.read_text())
        values["loop_state"]["history"] = [{"epoch": 0, name: 1.0}]
        sidecar.write_text(json.dumps(values))

    return setup


def tu_files(graphs: int = 40) -> dict[str, str]:
    """A valid TU dataset named TOY: ``graphs`` paths of 3 to 6 nodes, node labels 0..3, graph labels -1 and 1 in turn."""
    edges, indicator, node_labels, node = [], [], [], 1
    for graph in range(1, graphs + 1):
        size = 3 + graph % 4
        edges += [pair for i in range(node, node + size - 1) for pair in (f"{i}, {i + 1}", f"{i + 1}, {i}")]
        indicator += [str(graph)] * size
        node_labels += [str((node + i) % 4) for i in range(size)]
        node += size
    labels = ["-1" if graph % 2 else "1" for graph in range(graphs)]
    return {
        kind: "\n".join(lines) + "\n"
        for kind, lines in (("A", edges), ("graph_indicator", indicator), ("graph_labels", labels), ("node_labels", node_labels))
    }


def tu_folder(folder: str, **changes: str | None) -> Callable[[Path], None]:
    """Write TOY's files into ``folder``; a change replaces a file's text (None leaves the file out)."""

    def setup(work: Path) -> None:
        (work / folder).mkdir(parents=True, exist_ok=True)
        for kind, text in {**tu_files(), **changes}.items():
            if text is not None:
                (work / folder / f"TOY_{kind}.txt").write_text(text)

    return setup


def tu_special(folder: str, kind: str, make: Callable[[Path], None]) -> Callable[[Path], None]:
    """TOY in ``folder`` with ``kind``'s file made by ``make`` (a FIFO, a symbolic link, a folder)."""
    return both(tu_folder(folder, **{kind: None}), lambda work: make(work / folder / f"TOY_{kind}.txt"))


def tu_archive(path: str, members: dict[str, bytes | str]) -> Callable[[Path], None]:
    """A .tar.gz at ``path`` whose members are ``name: content``; a str content starting with '->' is a symbolic link."""

    def setup(work: Path) -> None:
        import io
        import tarfile

        with tarfile.open(work / path, "w:gz") as tar:
            for name, content in members.items():
                info = tarfile.TarInfo(name)
                if isinstance(content, str) and content.startswith("->"):
                    info.type, info.linkname = tarfile.SYMTYPE, content[2:]
                    tar.addfile(info)
                    continue
                data = content.encode() if isinstance(content, str) else content
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

    return setup


def prepared_graphs(work: Path) -> None:
    """TOY prepared as graphs in ``g`` (for options that graphs do not read)."""
    tu_folder("tu")(work)
    result = hcl(work, ("prepare", "--dataset", "tu", "--path", "tu", "--name", "TOY", "--out", "g"))
    if result.returncode != 0:
        raise RuntimeError(f"preparing TOY failed: {result.stderr.strip()}")


# --- checks -------------------------------------------------------------------------------------------------------


def unchanged(*paths: str) -> tuple[Callable[[Path], None], Check]:
    """A setup that records the bytes of ``paths`` and a check that they are the same afterwards."""
    before: dict[str, bytes] = {}

    def record(work: Path) -> None:
        before.update({path: (work / path).read_bytes() for path in paths})

    def check(work: Path, result: Result[str]) -> str | None:
        changed = [path for path in paths if (work / path).read_bytes() != before[path]]
        return f"changed: {', '.join(changed)}" if changed else None

    return record, check


def says(*fragments: str) -> Check:
    def check(work: Path, result: Result[str]) -> str | None:
        text = result.stdout + result.stderr
        missing = [fragment for fragment in fragments if fragment not in text]
        return f"output lacks {missing}" if missing else None

    return check


def nothing_named(pattern: str) -> Check:
    def check(work: Path, result: Result[str]) -> str | None:
        found = [str(path) for path in work.parent.rglob(pattern)]
        return f"written outside: {found}" if found else None

    return check


def exists(path: str) -> Check:
    return lambda work, result: None if (work / path).exists() else f"{path} missing"


def absent(path: str) -> Check:
    return lambda work, result: f"{path} written" if (work / path).exists() or (work / path).is_symlink() else None


def one_stdout_line(work: Path, result: Result[str]) -> str | None:
    lines = result.stdout.strip().splitlines()
    return None if len(lines) == 1 else f"{len(lines)} stdout lines"


def checkpoints_whole(work: Path, result: Result[str]) -> str | None:
    """No temporary file in ``m/``; every checkpoint there has its sidecar; latest.json, when there, names one of them."""
    folder = work / "m" / "checkpoints"
    names = sorted(os.listdir(folder)) if folder.is_dir() else []
    hidden = [name for name in [*names, *(os.listdir(work / "m") if (work / "m").is_dir() else [])] if name.startswith(".")]
    if hidden:
        return f"left behind: {hidden}"
    tensors = {name for name in names if name.endswith(".safetensors")}
    lonely = [name for name in tensors if name.removesuffix(".safetensors") + ".json" not in names]
    if lonely:
        return f"checkpoints without a sidecar: {lonely}"
    if "latest.json" in names and json.loads((folder / "latest.json").read_text())["checkpoint"] not in tensors:
        return "latest.json names a missing checkpoint"
    return None


def report_whole(work: Path, result: Result[str]) -> str | None:
    """The report and its figures are one set: both there or neither, and no staging folder left."""
    report, figures = work / "r" / "report.md", work / "r" / "figures"
    left = [path.name for path in (work / "r").iterdir() if path.name.startswith(".")] if (work / "r").is_dir() else []
    if left:
        return f"left behind: {left}"
    return None if report.exists() == figures.exists() else "the report and its figures are not one set"


def all_of(*checks: Check) -> Check:
    def check(work: Path, result: Result[str]) -> str | None:
        return next((failure for failure in (each(work, result) for each in checks) if failure), None)

    return check


# --- runs with signals and concurrency ----------------------------------------------------------------------------


def interrupted(
    signals: Sequence[int], after_line: str = "hcl pretrain: ", extra: float = 0.0, gap: float = 0.3
) -> Callable[[Path, Sequence[str]], Result[str]]:
    """Start ``hcl`` and send ``signals`` once its stdout/stderr shows ``after_line`` (each ``gap`` seconds apart)."""

    def run(work: Path, args: Sequence[str]) -> Result[str]:
        process = subprocess.Popen([HCL, *args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(after_line):
                time.sleep(extra)
                for signum in signals:
                    process.send_signal(signum)
                    time.sleep(gap)
                break
        try:
            rest, _ = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            rest, _ = process.communicate()
            return subprocess.CompletedProcess(args, -1, "", "hang after the signal")
        text = "".join(lines) + rest
        errors = "\n".join(line for line in text.splitlines() if "error" in line.lower() or "Traceback" in line)
        return subprocess.CompletedProcess(args, process.returncode, text, errors)

    return run


def killed_then_resumed(work: Path, args: Sequence[str]) -> Result[str]:
    """kill -9 a pretrain after its first checkpoint, then ``--resume`` it: the second run must finish."""
    process = subprocess.Popen(
        [HCL, *args, "--epochs", "4", "--checkpoint-every", "1"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not (work / "m/checkpoints/latest.json").exists() and process.poll() is None:
        time.sleep(0.05)
    process.kill()
    process.wait()
    return hcl(work, [*args, "--epochs", "4", "--checkpoint-every", "1", "--resume"])


def while_locked(work: Path, args: Sequence[str]) -> Result[str]:
    """Run ``hcl`` while another process holds the output folder's lock."""
    hold = "import sys, time\nfrom hcl_cli.locking import locked_folder\nwith locked_folder(sys.argv[1], 'pretrain'):\n    print('held', flush=True)\n    time.sleep(60)\n"
    holder = subprocess.Popen([sys.executable, "-c", hold, "m"], cwd=work, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        return hcl(work, args)
    finally:
        holder.kill()
        holder.wait()


def two_at_once(work: Path, args: Sequence[str]) -> Result[str]:
    """Two identical runs started together; the answer is the second one's, and they must not both write."""
    first = subprocess.Popen([HCL, *args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = hcl(work, args)
    out, err = first.communicate(timeout=TIMEOUT)
    codes = sorted([first.returncode, second.returncode])
    return subprocess.CompletedProcess(args, codes[-1] if codes[0] == 0 else codes[0], out + second.stdout, err + second.stderr)


def resumed_from(work: Path, result: Result[str]) -> str | None:
    return None if "resuming from" in result.stdout else "did not resume (started from epoch 0)"


# --- the table ----------------------------------------------------------------------------------------------------


def cases() -> list[Case]:
    table: list[Case] = []

    def usage(name: str, *args: str, owner: str = "h6", **kwargs: object) -> None:
        table.append(Case(name, args, (2,), owner=owner, **kwargs))  # type: ignore[arg-type]

    def failure(name: str, *args: str, owner: str = "h6", **kwargs: object) -> None:
        table.append(Case(name, args, (1,), owner=owner, **kwargs))  # type: ignore[arg-type]

    def success(name: str, *args: str, owner: str = "h6", **kwargs: object) -> None:
        table.append(Case(name, args, (0,), owner=owner, **kwargs))  # type: ignore[arg-type]

    knn = ("knn-eval", "--embeddings", EMBEDDINGS, "--k", "5", "--out", "k.json", *CPU)
    linear = ("linear-eval", "--embeddings", EMBEDDINGS, "--out", "l.json", "--epochs", "2", *CPU)
    embed = ("embed", "--data", PREPARED, "--model", ENCODER, "--out", "e.safetensors", *CPU)
    pretrain = (*TINY_PRETRAIN, "--out", "m", "--live-dir", "live")
    resume = (*TINY_PRETRAIN, "--out", "models", "--live-dir", LIVE, "--epochs", "2", "--resume")

    # Bad numbers: every one a usage error naming the option.
    numbers = {
        "knn-eval": (
            knn,
            {
                "--k": ["0", "-1", "abc", HUGE, "1.5"],
                "--temperature": ["0", "-1", "nan", "inf", "5e-324", "1e308"],
                "--chunk-size": ["0", HUGE],
            },
        ),
        "pretrain": (
            pretrain,
            {
                "--epochs": ["0", "-3", HUGE, "two"],
                "--batch-size": ["0", "1", HUGE],
                "--lr": ["0", "-1", "nan", "1e308", "5e-324"],
                "--temperature": ["0", "5e-324", "1e308"],
                "--beta": ["-1", "nan", "1e308"],
                "--tau-plus": ["1", "-0.1"],
                "--ot-epsilon": ["0", "5e-324"],
                "--seed": ["-1", str(2**32), HUGE],
                "--projection-dim": ["0"],
                "--queue-size": ["-1", HUGE],
                "--momentum": ["2", "-0.5"],
                "--anneal-steps": ["0"],
                "--max-steps": ["-1"],
            },
        ),
        "linear-eval": (linear, {"--epochs": ["0", HUGE], "--lr": ["0", "1e308", "5e-324"], "--weight-decay": ["2000", "-1"]}),
        "prepare": (("prepare", "--out", "p"), {"--test-fraction": ["0", "1", "1.5", "nan"], "--image-size": ["-1"], "--seed": [HUGE]}),
        "embed": (embed, {"--batch-size": ["0", HUGE]}),
    }
    tiny_or_huge = {"5e-324", "1e308", HUGE}
    for stage, (base, options) in numbers.items():
        for option, values in options.items():
            for value in values:
                owner = "h2" if value in tiny_or_huge else "h6"
                usage(f"{stage} {option} {value[:12]}", *base, option, value, owner=owner, check=says(option))

    # Unknown names and choices.
    usage("unknown sampler", *pretrain, "--sampler", "nope", check=says("nope"))
    usage("unknown arch", *pretrain, "--arch", "vgg", check=says("vgg"))
    usage("unknown feature", *knn, "--feature", "pixels")
    usage("unknown protocol", *linear, "--protocol", "magic")
    usage("unknown optimizer", *linear, "--optimizer", "adamw2")
    usage("unknown dataset", "prepare", "--dataset", "mnist2", "--out", "p")
    usage("unknown option", *knn, "--nope", "1")
    usage("unknown command", "train")
    usage("bool option with a word", *pretrain, "--clip", "maybe")
    usage("compare unknown sampler", "compare", "--sampler", "nope", check=says("nope", "hucl"))
    usage("compare unknown where key", "compare", "--where", "pretrain.betta=1", check=says("betta", "beta"))
    usage("compare unknown where group", "compare", "--where", "pretrian.beta=1", check=says("pretrain"))
    usage("compare where without =", "compare", "--where", "pretrain.beta")
    usage("compare out with trailing slash", "compare", "--out", "reports/", check=nothing_named(".md"))
    usage("compare out an existing folder", "compare", "--out", "data", check=nothing_named(".md"))

    # Bad params files.
    usage("params missing", *knn, "--params", "nowhere.yaml")
    usage("params not UTF-8", *knn, "--params", "p.yaml", setup=write("p.yaml", b"knn:\n  k: \xff\n"))
    usage("params not YAML", *knn, "--params", "p.yaml", setup=write("p.yaml", "knn: [k: 1\n"))
    usage("params a list", *knn, "--params", "p.yaml", setup=write("p.yaml", "- 1\n"))
    usage("params unknown key", *knn, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  kk: 5\n"), check=says("kk"))
    usage("params string for int", *knn, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  temperature: five\n"))
    usage("params bool for int", *knn, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  chunk_size: true\n"))
    usage("params huge int", *knn, "--params", "p.yaml", setup=write("p.yaml", f"knn:\n  chunk_size: {HUGE}\n"))
    usage("params a folder", *knn, "--params", "data")
    usage("params a FIFO", *knn, "--params", "fifo.yaml", setup=fifo("fifo.yaml"))
    usage("params injection", *pretrain, "--params", "p.yaml", setup=write("p.yaml", 'pretrain:\n  sampler: "hucl; rm -rf ~"\n'))

    # Bad artifact files: a one-line runtime error naming the file.
    failure("embeddings missing", "knn-eval", "--embeddings", "nowhere.safetensors", "--out", "k.json", *CPU)
    failure("embeddings truncated", *knn, setup=truncate(EMBEDDINGS))
    failure("embeddings flipped byte", *knn, setup=flip_byte(EMBEDDINGS), check=says("sha256"))
    failure("embeddings sidecar missing", *knn, setup=remove("data/embeddings.json"))
    failure("embeddings sidecar garbage", *knn, setup=write("data/embeddings.json", "{not json"))
    failure("embeddings schema_version true", *knn, setup=edit_json("data/embeddings.json", lambda v: v.update(schema_version=True)))
    failure("embeddings schema_version 2", *knn, setup=edit_json("data/embeddings.json", lambda v: v.update(schema_version=2)))
    failure(
        "embeddings shape with a bool",
        *knn,
        setup=edit_json("data/embeddings.json", lambda v: v["tensors"]["train_labels"].update(shape=[True])),
    )
    failure("embeddings of another kind", "knn-eval", "--embeddings", ENCODER, "--out", "k.json", *CPU)
    failure("embeddings a folder", "knn-eval", "--embeddings", "data", "--out", "k.json", *CPU)
    failure("embeddings a FIFO", "knn-eval", "--embeddings", "f.safetensors", "--out", "k.json", *CPU, setup=fifo("f.safetensors"))
    failure("embeddings sidecar a FIFO", *knn, setup=both(remove("data/embeddings.json"), fifo("data/embeddings.json")))
    failure(
        "model a FIFO", "embed", "--data", PREPARED, "--model", "f.safetensors", "--out", "e.safetensors", *CPU, setup=fifo("f.safetensors")
    )
    failure("encoder flipped byte", *embed, setup=flip_byte(ENCODER))
    failure("encoder sidecar arch unknown", *embed, setup=edit_json("models/encoder.json", lambda v: v.update(arch="vgg")))
    failure("encoder sidecar image_size true", *embed, setup=edit_json("models/encoder.json", lambda v: v.update(image_size=True)))
    failure("card missing", *pretrain, setup=remove(f"{PREPARED}/card.json"))
    failure("card schema_version true", *pretrain, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(schema_version=True)))
    failure("card mean a bool", *pretrain, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(mean=[True])))
    failure("card num_classes a bool", *pretrain, setup=edit_json(f"{PREPARED}/card.json", lambda v: v.update(num_classes=True)))
    failure("card a FIFO", *pretrain, setup=both(remove(f"{PREPARED}/card.json"), fifo(f"{PREPARED}/card.json")))
    failure("split flipped byte", *pretrain, setup=flip_byte(f"{PREPARED}/train.safetensors"))
    failure("data a FIFO", "pretrain", "--data", "f", "--out", "m", "--live-dir", "live", *CPU, setup=fifo("f"))
    failure(
        "checkpoint history escapes",
        *resume,
        setup=crafted_history("../../escaped"),
        check=nothing_named("escaped*"),
    )
    failure(
        "checkpoint history absolute",
        *resume,
        setup=crafted_history("/tmp/hcl-hostile-escaped"),
        check=absent("/tmp/hcl-hostile-escaped"),
    )
    failure(
        "checkpoint pointer escapes",
        *resume,
        setup=write("models/checkpoints/latest.json", '{"checkpoint": "../encoder.safetensors"}'),
    )
    failure("checkpoint pointer garbage", *resume, setup=write("models/checkpoints/latest.json", "[]"))
    failure(
        "checkpoint position a bool",
        *resume,
        setup=lambda work: edit_json(str(checkpoint_sidecar(work).relative_to(work)), lambda v: v["position"].update(epoch=True))(work),
    )
    success(
        "latest.json deleted resumes",
        *resume,
        setup=remove("models/checkpoints/latest.json"),
        check=resumed_from,
    )
    failure(
        "report metrics top1 above 1",
        *REPORT,
        setup=edit_json("metrics/knn.json", lambda v: v.update(top1=1.5)),
        owner="h1",
    )
    failure(
        "report metrics test_size a bool",
        *REPORT,
        setup=edit_json("metrics/knn.json", lambda v: v.update(test_size=True)),
        owner="h1",
    )
    failure(
        "report training log a FIFO",
        *REPORT,
        setup=both(remove(f"{LIVE}/plots/metrics/loss.tsv"), fifo(f"{LIVE}/plots/metrics/loss.tsv")),
        owner="h1",
    )

    # Outputs over inputs and over any artifact a stage reads.
    record, same = unchanged("models/encoder.json")
    usage("linear fixed over encoder.json", *linear[:-4], "--out", "models/encoder.json", *CPU, setup=record, check=same)
    record, same = unchanged(ENCODER)
    usage("knn over the encoder tensors", "knn-eval", "--embeddings", EMBEDDINGS, "--out", ENCODER, *CPU, setup=record, check=same)
    usage("knn over its embeddings", "knn-eval", "--embeddings", EMBEDDINGS, "--out", EMBEDDINGS, *CPU)
    usage("knn over the embeddings sidecar", "knn-eval", "--embeddings", EMBEDDINGS, "--out", "data/embeddings.json", *CPU)
    usage("knn into the prepared folder", "knn-eval", "--embeddings", EMBEDDINGS, "--out", f"{PREPARED}/card.json", *CPU)
    record, same = unchanged(f"{LIVE}/metrics.json")
    usage(
        "knn over the training log", "knn-eval", "--embeddings", EMBEDDINGS, "--out", f"{LIVE}/metrics.json", *CPU, setup=record, check=same
    )
    usage("knn over the checkpoint pointer", "knn-eval", "--embeddings", EMBEDDINGS, "--out", "models/checkpoints/latest.json", *CPU)
    record, same = unchanged("notes.json")
    usage("knn over a user's file", *knn[:-3], "notes.json", *CPU, setup=both(write("notes.json", "my notes"), record), check=same)
    usage("knn over params.yaml", *knn[:-3], "params.yaml", *CPU, setup=write("params.yaml", "knn:\n  k: 5\n"))
    usage("knn out /dev/null", *knn[:-3], "/dev/null", *CPU)
    record, same = unchanged("models/encoder.json")
    usage(
        "knn out a symlink to encoder.json",
        *knn[:-3],
        "link.json",
        *CPU,
        setup=both(lambda w: (w / "link.json").symlink_to(w / "models/encoder.json"), record),
        check=same,
    )
    success("knn over its own earlier metrics", *knn[:-3], "metrics/knn.json", *CPU)
    usage("embed over the encoder", "embed", "--data", PREPARED, "--model", ENCODER, "--out", ENCODER, *CPU)
    copies = both(
        lambda w: shutil.copy(w / ENCODER, w / "models/other.safetensors"),
        lambda w: shutil.copy(w / "models/encoder.json", w / "models/other.json"),
    )
    record, same = unchanged("models/other.safetensors", "models/other.json")
    usage(
        "embed over another encoder",
        "embed",
        "--data",
        PREPARED,
        "--model",
        ENCODER,
        "--out",
        "models/other.safetensors",
        *CPU,
        setup=both(copies, record),
        check=same,
    )
    usage("embed into the prepared folder", "embed", "--data", PREPARED, "--model", ENCODER, "--out", f"{PREPARED}/x.safetensors", *CPU)
    usage("pretrain into the prepared folder", *TINY_PRETRAIN, "--out", PREPARED, "--live-dir", "live")
    usage("pretrain log into the prepared folder", *TINY_PRETRAIN, "--out", "m", "--live-dir", f"{PREPARED}/live")
    embeddings_as_encoder = both(
        lambda w: (w / "m").mkdir(),
        lambda w: shutil.copy(w / EMBEDDINGS, w / "m/encoder.safetensors"),
        lambda w: shutil.copy(w / "data/embeddings.json", w / "m/encoder.json"),
    )
    record, same = unchanged("m/encoder.safetensors", "m/encoder.json")
    usage("pretrain over embeddings named encoder", *pretrain, setup=both(embeddings_as_encoder, record), check=same)
    record, same = unchanged("live/metrics.json")
    usage(
        "pretrain log over a user's metrics.json",
        *pretrain,
        setup=both(write("live/metrics.json", '{"top1": 0.5, "note": "mine"}'), record),
        check=same,
    )
    usage(
        "pretrain log over the knn metrics",
        *TINY_PRETRAIN,
        "--out",
        "m",
        "--live-dir",
        "metrics",
        setup=lambda w: shutil.copy(w / "metrics/knn.json", w / "metrics/metrics.json"),
    )
    failure("prepare over the models folder", "prepare", "--out", "models", check=exists(ENCODER))
    failure(
        "prepare over a folder with a user's file",
        "prepare",
        "--out",
        PREPARED,
        setup=write(f"{PREPARED}/notes.txt", "mine"),
        check=exists(f"{PREPARED}/notes.txt"),
    )
    failure("prepare over a file", "prepare", "--out", "file", setup=write("file", "x"))
    failure("prepare over a symlink", "prepare", "--out", "link", setup=lambda w: (w / "link").symlink_to(w / PREPARED))
    usage("prepare out dot", "prepare", "--out", ".")
    success(
        "pretrain out and live-dir one folder",
        *TINY_PRETRAIN,
        "--out",
        "x",
        "--live-dir",
        "x",
        check=all_of(exists("x/encoder.safetensors"), exists("x/metrics.json")),
    )
    success("prepare again over its own folder", "prepare", "--out", PREPARED)

    # Full disk: every stage names the file it could not write.
    for stage, args in {
        "prepare": ("prepare", "--out", "p"),
        "pretrain": pretrain,
        "embed": embed,
        "knn-eval": knn,
        "linear-eval": linear,
        "report": REPORT,
    }.items():
        table.append(
            Case(
                f"disk full: {stage}",
                args,
                (1,),
                fsize_limit=64,
                check=says("cannot write", "File too large"),
                owner="h1" if stage == "report" else "h6",
            )
        )
    table.append(Case("params > /dev/full", ("params",), (1,), stdout="/dev/full", owner="h2"))

    # Odd names.
    success("out name with a newline", *knn[:-3], "a\nhcl knn-eval: wrote metrics/knn.json: top-1 1.0000", *CPU, check=one_stdout_line)
    success("out name with an escape sequence", *knn[:-3], "b\x1b[2J.json", *CPU, check=one_stdout_line)
    success("out deep in new folders", *knn[:-3], "a/b/c/d/k.json", *CPU)
    success("out name with spaces and quotes", *knn[:-3], 'it\'s a "test".json', *CPU)

    # Concurrency, locks, signals and kills.
    table.append(Case("pretrain while the folder is locked", pretrain, (1,), run=while_locked, check=says("in use by another run")))
    table.append(Case("two pretrains into one folder", pretrain, (1,), run=two_at_once, check=says("in use by another run")))
    table.append(
        Case(
            "kill -9 then --resume",
            ("pretrain", "--data", PREPARED, "--arch", "small_cnn", "--batch-size", "32", "--out", "m", "--live-dir", "live", *CPU),
            (0,),
            run=killed_then_resumed,
        )
    )
    table.append(
        Case(
            "Ctrl-C during pretrain",
            (*pretrain[:-6], "--epochs", "30", "--out", "m", "--live-dir", "live"),
            (130,),
            run=interrupted([signal.SIGINT], extra=1.0),
            check=says("stopped by SIGINT"),
        )
    )
    table.append(
        Case(
            "SIGTERM during pretrain",
            (*pretrain[:-6], "--epochs", "30", "--out", "m", "--live-dir", "live"),
            (143,),
            run=interrupted([signal.SIGTERM], extra=1.0),
        )
    )
    table.append(
        Case(
            "Ctrl-C twice during pretrain",
            (*pretrain[:-6], "--epochs", "30", "--out", "m", "--live-dir", "live"),
            (130,),
            run=interrupted([signal.SIGINT, signal.SIGINT], extra=1.0),
            check=checkpoints_whole,
        )
    )
    table.append(Case("Ctrl-C during knn-eval startup", knn, (0, 130), run=interrupted([signal.SIGINT], after_line="", extra=0.0)))
    long_pretrain = (*pretrain[:-6], "--epochs", "30", "--out", "m", "--live-dir", "live")
    table.append(
        Case(
            "Ctrl-C twice at once during pretrain",
            long_pretrain,
            (130,),
            run=interrupted([signal.SIGINT, signal.SIGINT], extra=1.0, gap=0.0),
            check=checkpoints_whole,
        )
    )
    table.append(
        Case(
            "Ctrl-C three times during pretrain",
            long_pretrain,
            (130,),
            run=interrupted([signal.SIGINT] * 3, extra=1.0, gap=0.05),
            check=checkpoints_whole,
        )
    )
    table.append(
        Case(
            "Ctrl-C twice during pretrain's first step",
            long_pretrain,
            (130,),
            run=interrupted([signal.SIGINT, signal.SIGINT], after_line="hcl pretrain: ", extra=0.0, gap=0.05),
            check=checkpoints_whole,
        )
    )
    table.append(
        Case(
            "Ctrl-C twice during report",
            REPORT,
            (0, 130),
            run=interrupted([signal.SIGINT, signal.SIGINT], after_line="", extra=0.0, gap=0.05),
            check=report_whole,
            owner="h1",
        )
    )

    # Graph data: malformed TU folders and archives, links and special files, huge values.
    tu = ("prepare", "--dataset", "tu", "--path", "tu", "--name", "TOY", "--out", "g")
    success("tu: a valid folder", *tu, setup=tu_folder("tu"), check=exists("g/card.json"))
    success(
        "tu: the folder through a symbolic link",
        *tu[:4],
        "tu-link",
        *tu[5:],
        setup=both(tu_folder("tu"), lambda w: (w / "tu-link").symlink_to(w / "tu")),
    )
    failure("tu: graph_indicator missing", *tu, setup=tu_folder("tu", graph_indicator=None), check=absent("g"))
    failure("tu: A a FIFO", *tu, setup=tu_special("tu", "A", os.mkfifo), check=absent("g"))
    failure("tu: A a link to /dev/zero", *tu, setup=tu_special("tu", "A", lambda p: p.symlink_to("/dev/zero")), check=absent("g"))
    failure(
        "tu: A a link to a user's file",
        *tu,
        setup=both(write("secret.txt", "1, 2\n"), tu_special("tu", "A", lambda p: p.symlink_to(p.parents[1] / "secret.txt"))),
    )
    failure("tu: A a folder", *tu, setup=tu_special("tu", "A", lambda p: p.mkdir()))
    success("tu: A empty (graphs without edges)", *tu, setup=tu_folder("tu", A=""), check=exists("g/card.json"))
    failure("tu: A binary", *tu, setup=tu_folder("tu", A="\x00\xff\xfe" * 50))
    failure("tu: A not UTF-8", *tu, setup=lambda w: (tu_folder("tu")(w), (w / "tu/TOY_A.txt").write_bytes(b"1, 2\n\xff\xfe, 1\n")))
    failure("tu: node id of 300 digits", *tu, setup=tu_folder("tu", A=tu_files()["A"] + f"1, {HUGE}\n"))
    failure("tu: node id 2^63", *tu, setup=tu_folder("tu", A=tu_files()["A"] + f"1, {2**63}\n"))
    failure("tu: node id negative", *tu, setup=tu_folder("tu", A=tu_files()["A"] + "1, -2\n"))
    failure(
        "tu: node label of two billion",
        *tu,
        setup=tu_folder("tu", node_labels=tu_files()["node_labels"].replace("3\n", "2000000000\n", 1)),
        owner="graph",
    )
    failure(
        "tu: node label of minus two billion",
        *tu,
        setup=tu_folder("tu", node_labels=tu_files()["node_labels"].replace("3\n", "-2000000000\n", 1)),
        owner="graph",
    )
    failure(
        "tu: graph label of 300 digits", *tu, setup=tu_folder("tu", graph_labels=tu_files()["graph_labels"].replace("1\n", f"{HUGE}\n", 1))
    )
    failure("tu: node attribute 1e400", *tu, setup=tu_folder("tu", node_attributes="1e400\n" * 200))
    failure("tu: graph ids decrease", *tu, setup=tu_folder("tu", graph_indicator="2\n1\n" + tu_files()["graph_indicator"]))
    success(
        "tu: CRLF line ends and a last blank line",
        *tu,
        setup=tu_folder("tu", graph_labels=tu_files()["graph_labels"].replace("\n", "\r\n") + "\n"),
    )
    usage("tu: name with a slash", *tu[:6], "../TOY", *tu[7:], setup=tu_folder("tu"))
    usage("tu: name empty", *tu[:6], "", *tu[7:], setup=tu_folder("tu"))
    usage("tu: path missing", *tu[:4], "nowhere", *tu[5:])
    usage("tu: path a FIFO", *tu[:4], "fifo", *tu[5:], setup=fifo("fifo"))
    failure("tu: archive not gzip", *tu[:4], "tu.tar.gz", *tu[5:], setup=write("tu.tar.gz", "not an archive"))
    failure(
        "tu: archive member a symbolic link",
        *tu[:4],
        "tu.tar.gz",
        *tu[5:],
        setup=tu_archive(
            "tu.tar.gz", {**{f"TOY/TOY_{k}.txt": v for k, v in tu_files().items() if k != "A"}, "TOY/TOY_A.txt": "->/etc/passwd"}
        ),
    )
    success(
        "tu: archive member escaping with ../ is not read or written",
        *tu[:4],
        "tu.tar.gz",
        *tu[5:],
        setup=tu_archive("tu.tar.gz", {**{f"TOY/TOY_{k}.txt": v for k, v in tu_files().items()}, "../../escaped.txt": "x"}),
        check=nothing_named("escaped*"),
    )
    failure(
        "tu: prepare over a folder with a user's file",
        *tu,
        setup=both(tu_folder("tu"), write("g/notes.txt", "mine")),
        check=exists("g/notes.txt"),
    )

    # Options of one modality on the other's data: refused, not silently ignored.
    usage("graph option on images", *pretrain, "--gin-layers", "5", check=says("--gin-layers"))
    usage(
        "graph option on images from params.yaml",
        *pretrain,
        "--params",
        "p.yaml",
        setup=write("p.yaml", "pretrain:\n  graph_weights: official\n"),
        check=says("graph_weights"),
    )
    success("graph options at their defaults on images", *pretrain, "--gin-layers", "3", "--gin-hidden", "32")
    graphs = ("pretrain", "--data", "g", "--batch-size", "8", "--epochs", "1", "--out", "m", "--live-dir", "live", *CPU)
    usage("image option on graphs", *graphs, "--blur", "true", setup=prepared_graphs, check=says("--blur"))
    usage(
        "image option on graphs from params.yaml",
        *graphs,
        "--params",
        "p.yaml",
        setup=both(prepared_graphs, write("p.yaml", "pretrain:\n  projection_dim: 64\n")),
        check=says("projection_dim"),
    )
    usage("a queue on graphs", *graphs, "--queue-size", "16", setup=prepared_graphs, owner="graph")
    usage("jsd on images", *pretrain, "--objective", "jsd")
    usage("small_cnn on graphs", *graphs, "--arch", "small_cnn", setup=prepared_graphs)
    success("svm protocol on image embeddings", *linear[:-4], "--protocol", "svm", "--svm-repeats", "1", *CPU, check=says("samples"))

    # Non-finite and extreme spellings of numbers.
    for option, value in (
        ("--beta", "inf"),
        ("--beta", "-inf"),
        ("--temperature", "Infinity"),
        ("--temperature", "1e-400"),
        ("--momentum", "nan"),
        ("--ot-kappa", "inf"),
        ("--threshold-start", "NaN"),
        ("--undimix-weights", "nan"),
        ("--epochs", "1e3"),
        ("--max-steps", "0x10"),
        ("--gin-layers", HUGE),
    ):
        usage(f"pretrain {option} {value[:12]}", *pretrain, option, value, check=says(option))
    usage("prepare --test-fraction inf", "prepare", "--out", "p", "--test-fraction", "inf")
    usage("linear-eval --weight-decay nan", *linear, "--weight-decay", "nan")
    usage("params.yaml .inf", *pretrain, "--params", "p.yaml", setup=write("p.yaml", "pretrain:\n  beta: .inf\n"), check=says("beta"))
    usage("params.yaml .nan", *knn, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  temperature: .nan\n"), check=says("temperature"))

    # The report's inputs: pretrain's --live-dir as --plots, and inputs of the wrong kind.
    failure(
        "report --plots the dvclive folder, loss.tsv a FIFO",
        *REPORT[:10],
        "dvclive",
        *REPORT[11:],
        setup=both(remove(f"{LIVE}/plots/metrics/loss.tsv"), fifo(f"{LIVE}/plots/metrics/loss.tsv")),
        owner="h1",
    )
    success(
        "report --plots pretrain's live dir draws the loss",
        *REPORT,
        check=lambda w, r: None if (w / "r/figures/loss.png").is_file() else "no loss.png",
    )
    failure("report --model a FIFO", *REPORT[:4], "f.safetensors", *REPORT[5:], setup=fifo("f.safetensors"), owner="h1")
    failure("report --data a file", *REPORT[:1], "--data", "file", *REPORT[3:], setup=write("file", "x"), owner="h1")
    failure("report --embeddings a folder", *REPORT[:6], "data", *REPORT[7:], owner="h1")
    return table


def verdict(case: Case, result: Result[str], work: Path) -> str:
    """``pass``, or why not."""
    if result.returncode not in case.expect:
        return f"exit {result.returncode}, expected {'/'.join(map(str, case.expect))}"
    stderr = result.stderr
    if "Traceback" in stderr or "internal error" in stderr:
        return "traceback or internal error"
    if result.returncode != 0:
        error_lines = [line for line in stderr.splitlines() if "error:" in line]
        if len(error_lines) != 1:
            return f"{len(error_lines)} error lines on stderr"
    if case.check is not None:
        failure = case.check(work, result)
        if failure:
            return failure
    return "pass"


def build_pipeline(base: Path) -> None:
    """The tiny digits pipeline every case starts from."""
    steps = [
        ("prepare", "--out", PREPARED, "--test-fraction", "0.9"),
        (*TINY_PRETRAIN, "--out", "models", "--live-dir", LIVE),
        ("embed", "--data", PREPARED, "--model", ENCODER, "--out", EMBEDDINGS, *CPU),
        ("knn-eval", "--embeddings", EMBEDDINGS, "--out", "metrics/knn.json", "--k", "5", *CPU),
        ("linear-eval", "--embeddings", EMBEDDINGS, "--out", "metrics/linear.json", "--epochs", "5", *CPU),
    ]
    for step in steps:
        result = hcl(base, step)
        if result.returncode != 0:
            raise SystemExit(f"setting up the pipeline failed: hcl {' '.join(step)}: {result.stderr.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="Run only the cases whose name contains this.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder.")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hcl-hostile-"))
    base = root / "base"
    base.mkdir()
    build_pipeline(base)
    rows = []
    selected = [case for case in cases() if options.only in case.name]
    started = time.monotonic()
    for index, case in enumerate(selected):
        work = root / f"case-{index:03d}"
        shutil.copytree(base, work, symlinks=True)
        if case.setup is not None:
            case.setup(work)
        began = time.monotonic()
        if case.run is not None:
            result = case.run(work, case.args)
        else:
            result = hcl(work, case.args, fsize_limit=case.fsize_limit, stdout_path=case.stdout)
        outcome = verdict(case, result, work)
        rows.append(
            {
                "case": case.name,
                "command": " ".join(
                    [
                        "hcl",
                        *(
                            json.dumps(arg)
                            if not arg.replace("-", "").replace("/", "").replace(".", "").replace("_", "").isalnum()
                            else arg
                            for arg in case.args
                        ),
                    ]
                ),
                "exit_code": result.returncode,
                "expected": list(case.expect),
                "verdict": outcome,
                "stderr": (result.stderr.strip().splitlines() or [""])[-1][:300],
                "seconds": round(time.monotonic() - began, 2),
                "owner": case.owner,
            }
        )
        print(
            f"{'PASS' if outcome == 'pass' else 'FAIL'} {case.name}: exit {result.returncode} {'' if outcome == 'pass' else outcome}",
            flush=True,
        )
        shutil.rmtree(work, ignore_errors=True)
    passed = sum(row["verdict"] == "pass" for row in rows)
    print(f"{passed} of {len(rows)} cases pass")
    if not options.keep:
        shutil.rmtree(root, ignore_errors=True)
    if options.only:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.common import write_result

    write_result(
        "hostile",
        {
            "description": "hostile inputs and faults against the installed hcl, each in a copy of a tiny digits pipeline (benchmarks/hostile.py)",
            "hcl": HCL,
            "cases": len(rows),
            "passed": passed,
            "seconds": round(time.monotonic() - started, 1),
            "results": rows,
        },
    )


if __name__ == "__main__":
    main()
