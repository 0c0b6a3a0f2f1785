"""params.yaml read as DVC reads it, and metrics checked once (issue 32, items 3, 4, 5, 7 and 11).

A value runs as YAML 1.2 (what ``dvc params diff`` records) or is refused in one line; a key given twice, nesting
deeper than the parser follows, an alias bomb and a file over 1 MiB are usage errors; ``hcl preset`` edits a quoted
group in place; the report refuses what ``hcl compare`` leaves out of its table (a NaN, a boolean, a test size of 0).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from hcl_cli.metrics import inputs_path

from .checks import all_of, says, unchanged
from .harness import KNN, LINEAR, PRETRAIN, REPORT, Case, Check, Result, Setup, success, usage
from .setups import both, write

PARAMS = ("--params", "p.yaml")


def recorded(path: str, key: str, value: object) -> Check:
    """The metrics file ``path`` records the parameter ``key`` as ``value`` (in its sidecar, :func:`hcl_cli.metrics.inputs_path`)."""

    def check(work: Path, result: Result[str]) -> str | None:
        sidecar = inputs_path(work / path)
        found = json.loads(sidecar.read_text()).get("params", {}).get(key)
        return None if found == value and type(found) is type(value) else f"{sidecar.name}: {key} is {found!r}, not {value!r}"

    return check


def one_group(path: str, group: str) -> Check:
    """DVC reads ``path`` (``dvc.utils.serialize.parse_yaml``): one ``group``, no key given twice."""

    def check(work: Path, result: Result[str]) -> str | None:
        from dvc.utils.serialize import parse_yaml

        try:
            parse_yaml((work / path).read_text(), path)
        except Exception as error:  # noqa: BLE001 - DVC's refusal, whatever its type, is the failure
            return f"DVC cannot read {path}: {error}"
        headers = re.findall(rf"^['\"]?{group}['\"]?:\s*$", (work / path).read_text(), flags=re.M)
        return None if len(headers) == 1 else f"{len(headers)} {group} groups"

    return check


def alias_bomb(levels: int) -> str:
    """``knn.k`` a list of 9**levels ones, in a few lines of aliases."""
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels - 1)]
    return "\n".join([*lines, "knn:", f"  k: [{', '.join([f'*a{levels - 2}'] * 9)}]", ""])


def yaml_cases() -> list[Case]:
    """Items 3, 5 and 11: each value as DVC reads it."""
    knn, linear = (*KNN[:3], *KNN[5:], *PARAMS), (*LINEAR, *PARAMS)  # k from the params file, not --k
    return [
        success("params k: 010 is 10, as DVC reads it", *knn, setup=write("p.yaml", "knn:\n  k: 010\n"), check=recorded("k.json", "k", 10)),
        success("params k: 0o12 is 10", *knn, setup=write("p.yaml", "knn:\n  k: 0o12\n"), check=recorded("k.json", "k", 10)),
        success(
            "params k: 010 under a %YAML 1.1 directive is 8, as DVC reads it",
            *knn,
            setup=write("p.yaml", "%YAML 1.1\n---\nknn:\n  k: 010\n"),
            check=recorded("k.json", "k", 8),
        ),
        usage(
            "params k: 1:30 is a string",
            *knn,
            setup=write("p.yaml", "knn:\n  k: 1:30\n"),
            check=says("knn.k must be a whole number (got '1:30')"),
        ),
        usage("params k: a date", *knn, setup=write("p.yaml", "knn:\n  k: 2001-01-01\n"), check=says("knn.k must be a whole number")),
        usage(
            "params clip: on is a string", *PRETRAIN, *PARAMS, setup=write("p.yaml", "pretrain:\n  clip: on\n"), check=says("(got 'on')")
        ),
        usage(
            "params clip: yes is a string", *PRETRAIN, *PARAMS, setup=write("p.yaml", "pretrain:\n  clip: yes\n"), check=says("(got 'yes')")
        ),
        usage("--clip on, as params.yaml reads it", *PRETRAIN, "--clip", "on", check=says("--clip must be true or false")),
        usage("--clip 1, as params.yaml reads it", *PRETRAIN, "--clip", "1", check=says("--clip must be true or false")),
        success("params seed: 0b101 is 5", *linear, setup=write("p.yaml", "linear:\n  seed: 0b101\n"), check=recorded("l.json", "seed", 5)),
        success(
            "params lr: 1e-3 is a number", *linear, setup=write("p.yaml", "linear:\n  lr: 1e-3\n"), check=recorded("l.json", "lr", 0.001)
        ),
        usage("params key given twice", *knn, setup=write("p.yaml", "knn:\n  k: 5\n  k: 7\n"), check=says("duplicate key 'k' at line 3")),
        usage(
            "params group given twice",
            *knn,
            setup=write("p.yaml", "knn:\n  k: 5\nknn:\n  temperature: 0.5\n"),
            check=says("duplicate key 'knn' at line 3"),
        ),
        usage(
            "params group given twice, once quoted",
            *knn,
            setup=write("p.yaml", "knn:\n  k: 5\n'knn':\n  k: 7\n"),
            check=says("duplicate key 'knn'"),
        ),
        usage(
            "params another tool's key given twice",
            *knn,
            setup=write("p.yaml", "other:\n  x: 1\n  x: 2\nknn:\n  k: 5\n"),
            check=says("duplicate key 'x' at line 3"),
        ),
        usage("params 100,000 nested [", *knn, setup=write("p.yaml", "knn: " + "[" * 100_000 + "\n"), check=says("nest too deeply")),
        usage("params 10,000 nested {", *knn, setup=write("p.yaml", "knn: " + "{a: " * 10_000 + "\n"), check=says("cannot read")),
        usage("params alias bomb of 4.8 million values", *knn, setup=write("p.yaml", alias_bomb(7)), check=says("aliases expand to over")),
        usage("params alias bomb of a billion values", *knn, setup=write("p.yaml", alias_bomb(10)), check=says("aliases expand to over")),
        usage(
            "params 531,441 values where a number goes",
            *knn,
            setup=write("p.yaml", alias_bomb(6)),
            check=says("knn.k must be a whole number (got [[[[[["),
        ),
        usage(
            "params an alias inside itself",
            *knn,
            setup=write("p.yaml", "a: &a [*a]\nknn:\n  k: 5\n"),
            check=says("refers to the value that contains it"),
        ),
        usage("params over 1 MiB", *knn, setup=write("p.yaml", "knn:\n  k: 5\n#" + "x" * (1 << 20) + "\n"), check=says("over 1 MiB")),
        success("params merge key", *knn, setup=write("p.yaml", "base: &b {k: 7}\nknn:\n  <<: *b\n"), check=recorded("k.json", "k", 7)),
    ]


def preset_cases() -> list[Case]:
    """Item 4: ``hcl preset`` over quoted keys edits the group in place; a file DVC cannot read is refused and kept."""
    quoted = "'pretrain':\n  \"beta\": 2.0\n  sampler: hucl\n"
    twice = "pretrain:\n  beta: 1.0\n'pretrain':\n  sampler: hucl\n"
    record, same = unchanged("params.yaml")
    return [
        success(
            "preset over a quoted pretrain group",
            "preset",
            "hcl-cifar100-beta0.5",
            setup=write("params.yaml", quoted),
            check=one_group("params.yaml", "pretrain"),
        ),
        usage(
            "preset over a group given twice",
            "preset",
            "hcl-cifar100-beta0.5",
            setup=both(write("params.yaml", twice), record),
            check=all_of(same, says("duplicate key 'pretrain'")),
        ),
    ]


KNN_METRICS = {"top1": 0.9, "top5": 1.0, "test_size": 100}
"""A kNN metrics file the report reads (its sidecar below)."""
KNN_PARAMS = {"feature": "backbone", "k": 5, "temperature": 0.1, "chunk_size": 1024, "bank_chunk_size": 65536}


def knn_metrics(values: dict[str, object], inputs: object) -> Setup:
    """``metrics/knn.json`` holding ``values``, and its sidecar recording :data:`KNN_PARAMS` and ``inputs``."""
    content = json.dumps(values)
    sidecar = {"metrics_sha256": hashlib.sha256(content.encode()).hexdigest(), "params": KNN_PARAMS, "inputs": inputs}
    return both(write("metrics/knn.json", content), write("metrics/knn.inputs.json", json.dumps(sidecar)))


def metrics_cases() -> list[Case]:
    """Item 7: what ``hcl compare`` leaves out of its table, the report refuses, one line each (the same check)."""
    report = (*REPORT[:4], "absent.safetensors", *REPORT[5:6], "absent", *REPORT[7:])
    changes: dict[str, tuple[dict[str, object], str]] = {
        "top1 NaN": ({"top1": math.nan}, "'top1' must be a number in [0, 1] (got nan)"),
        "top1 true": ({"top1": True}, "'top1' must be a number in [0, 1] (got True)"),
        "top1 1.5": ({"top1": 1.5, "top5": 1.5}, "'top1' must be a number in [0, 1] (got 1.5)"),
        "test_size 0": ({"test_size": 0}, "'test_size' must be a positive integer (got 0)"),
        "test_size 2.5": ({"test_size": 2.5}, "'test_size' must be a positive integer (got 2.5)"),
        "test_size of 400 digits": ({"test_size": 10**400 - 1}, "'test_size' must be a positive integer (got 999"),
    }
    return [
        *(
            usage(
                f"report metrics {name}", *report, setup=knn_metrics(KNN_METRICS | change, {}), check=says(f"metrics/knn.json: {message}")
            )
            for name, (change, message) in changes.items()
        ),
        usage(
            "report metrics inputs a list",
            *report,
            setup=knn_metrics(KNN_METRICS, [1]),
            check=says("metrics/knn.inputs.json: 'inputs' must be an object"),
        ),
    ]


CASES: list[Case] = [*yaml_cases(), *preset_cases(), *metrics_cases()]
