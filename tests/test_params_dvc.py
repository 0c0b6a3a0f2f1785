"""params.yaml is read as DVC reads it (YAML 1.2, a key given twice refused), whatever the file holds (issue 32, items 3-5, 11).

Each case is checked against DVC's own loader (``dvc.utils.serialize.parse_yaml``): hcl runs with the value DVC
records (``dvc params diff``, ``dvc exp show``), or refuses the file in one line where DVC does, or where the
value DVC reads is not one the option takes.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import pytest
from dvc.utils.serialize import YAMLFileCorruptedError, parse_yaml

from hcl_cli.cli import main
from hcl_cli.config import STAGE_CONFIGS, KnnConfig, PretrainConfig, StageConfig
from hcl_cli.config.base import PARAMS_SIZE_LIMIT, load_params, parse_params
from hcl_cli.errors import UsageError
from hcl_cli.option import parse_bool, shown
from hcl_cli.params import default_params_yaml, stage_params
from hcl_cli.presets import PRESETS, apply

REFUSED = object()
# group, key, the value's text, what DVC reads, and what hcl runs with (REFUSED: a one-line usage error naming the key)
YAML_12_CASES: list[tuple[str, str, str, Any, Any]] = [
    ("knn", "k", "010", 10, 10),  # YAML 1.1 (PyYAML): octal 8
    ("knn", "k", "0o12", 10, 10),
    ("knn", "k", "1:30", "1:30", REFUSED),  # YAML 1.1: sexagesimal 90
    ("pretrain", "clip", "on", "on", REFUSED),  # YAML 1.1: true
    ("pretrain", "clip", "yes", "yes", REFUSED),
    ("pretrain", "clip", "True", True, True),
    ("pretrain", "seed", "0b101", 5, 5),
    ("pretrain", "lr", "1e-3", 0.001, 0.001),  # YAML 1.1: the string '1e-3'
    ("pretrain", "epochs", "2001-01-01", datetime.date(2001, 1, 1), REFUSED),
]


@pytest.mark.parametrize(("group", "key", "text", "dvc_reads", "hcl_runs_with"), YAML_12_CASES, ids=[case[2] for case in YAML_12_CASES])
def test_a_value_means_what_dvc_reads(tmp_path: Path, group: str, key: str, text: str, dvc_reads: Any, hcl_runs_with: Any) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(f"{group}:\n  {key}: {text}\n")
    assert parse_yaml(path.read_text(), str(path))[group][key] == dvc_reads
    config_cls = KnnConfig if group == "knn" else PretrainConfig
    if hcl_runs_with is REFUSED:
        with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: {group}\.{key} must be .* \(got {re.escape(shown(dvc_reads))}\)$"):
            stage_params(path, config_cls)
    else:
        assert stage_params(path, config_cls)[key] == hcl_runs_with == dvc_reads


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("knn:\n  k: 5\n  k: 7\n", 3),
        ("knn:\n  k: 5\nprepare:\n  seed: 1\nknn:\n  temperature: 0.5\n", 5),  # a second group would drop the first
    ],
)
def test_a_key_given_twice_is_refused_as_dvc_refuses_it(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(YAMLFileCorruptedError):
        parse_yaml(text, str(path))
    key = "k" if text.count("k:") == 2 else "knn"
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: duplicate key '{key}' at line {line}, which DVC refuses"):
        stage_params(path, KnnConfig)


def test_the_command_line_takes_the_booleans_params_yaml_takes(tmp_path: Path) -> None:
    """``--clip X`` and ``clip: X`` accept the same spellings: YAML 1.2's true and false."""
    for text in ("true", "True", "TRUE", "false", "False", "FALSE", "yes", "on", "1", "no", "off", "0"):
        path = tmp_path / "params.yaml"
        path.write_text(f"pretrain:\n  clip: {text}\n")
        try:
            from_file: Any = stage_params(path, PretrainConfig)["clip"]
        except UsageError:
            from_file = "refused"
        try:
            from_command_line: Any = parse_bool("--clip", text)
        except UsageError:
            from_command_line = "refused"
        assert from_file == from_command_line, text
        assert from_file == ("refused" if text.lower() not in ("true", "false") else text.lower() == "true")


def test_hcl_params_writes_what_dvc_reads_as_the_declared_defaults() -> None:
    dvc_values = parse_yaml(default_params_yaml(), "params.yaml")
    assert dvc_values == parse_params(default_params_yaml(), "params.yaml")
    for config_cls in STAGE_CONFIGS:
        assert stage_values(dvc_values, config_cls) == {name: config_cls().params()[name] for name in dvc_values[config_cls.group]}


def stage_values(values: dict[str, Any], config_cls: type[StageConfig]) -> dict[str, Any]:
    """The group's values as the stage's options check them."""
    options = {option.name: option for option in config_cls.declared_options()}
    return {key: options[key].check(value) for key, value in values[config_cls.group].items()}


def test_a_preset_over_quoted_group_keys_edits_them_and_dvc_reads_one_group(tmp_path: Path) -> None:
    """Item 4: ``'pretrain':`` is the pretrain group; a preset edits it in place instead of appending a second one."""
    path = tmp_path / "params.yaml"
    path.write_text(default_params_yaml().replace("\npretrain:\n", "\n'pretrain':\n").replace("\n  beta:", '\n  "beta":'))
    apply("hcl-cifar100-beta0.5", path)
    text = path.read_text()
    assert len(re.findall(r"^'?pretrain'?:", text, flags=re.M)) == 1
    values = parse_yaml(text, str(path))  # DVC reads it: no duplicate group
    assert values["pretrain"]["beta"] == PRESETS["hcl-cifar100-beta0.5"].groups()["pretrain"]["beta"]
    assert stage_params(path, PretrainConfig)["beta"] == values["pretrain"]["beta"]


def test_a_preset_refuses_a_file_dvc_cannot_read_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("pretrain:\n  beta: 1.0\n'pretrain':\n  sampler: hucl\n")
    with pytest.raises(UsageError, match="duplicate key 'pretrain' at line 3"):
        apply("hcl-cifar100-beta0.5", path)
    assert path.read_text() == "pretrain:\n  beta: 1.0\n'pretrain':\n  sampler: hucl\n"


def test_deep_nesting_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 5: 100,000 nested ``[`` were a RecursionError (exit 1, an internal error)."""
    path = tmp_path / "params.yaml"
    path.write_text("knn: " + "[" * 100_000 + "\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["knn-eval", "--params", str(path)])
    error = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and error == f"hcl knn-eval: error: cannot read {path}: its lists or mappings nest too deeply"


def alias_bomb(levels: int) -> str:
    """A params file whose ``knn.k`` is a list of 9**levels ones, spelt in a few lines of aliases."""
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels - 1)]
    return "\n".join([*lines, "knn:", f"  k: [{', '.join([f'*a{levels - 2}'] * 9)}]", ""])


def test_an_alias_bomb_is_refused_before_anything_is_built_from_it(tmp_path: Path) -> None:
    """Item 11: 9**7 values (4.8 million, 42 million characters of repr) in six lines are refused as such."""
    path = tmp_path / "params.yaml"
    path.write_text(alias_bomb(7))
    with pytest.raises(UsageError, match=r"aliases expand to over 1,000,000 values"):
        stage_params(path, KnnConfig)
    path.write_text("a: &a [*a]\nknn: {k: 3}\n")
    with pytest.raises(UsageError, match="an alias refers to the value that contains it"):
        load_params(path)


def test_a_wrong_value_of_a_million_items_is_shown_without_writing_it_out(tmp_path: Path) -> None:
    """The message of a value below the cap (9**6 items in a group) is cut while it is built: a repr of each item is not
    asked for beyond the cut."""
    path = tmp_path / "params.yaml"
    path.write_text(alias_bomb(6))
    with pytest.raises(UsageError, match=r"^.*knn\.k must be a whole number \(got \[\[\[\[\[\[1, 1, 1, .*\.\.\.\)$"):
        stage_params(path, KnnConfig)

    class Counted:
        calls = 0

        def __repr__(self) -> str:
            Counted.calls += 1
            return "x"

    assert shown([Counted()] * 1000).endswith("...") and Counted.calls < 40


def test_a_params_file_over_the_size_cap_is_refused_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("knn:\n  k: 5\n# " + "x" * PARAMS_SIZE_LIMIT + "\n")
    with pytest.raises(UsageError, match=r"cannot read .*params\.yaml: it is over 1 MiB, more than any params file needs"):
        load_params(path)
