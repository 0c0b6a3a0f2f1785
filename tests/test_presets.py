"""Paper presets: every preset passes the stages' validation; `hcl preset` lists them without torch;
`hcl preset NAME` writes its groups whole into params.yaml, keeps everything else, and the stages read it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hcl_cli import cli
from hcl_cli.cli import main
from hcl_cli.config import STAGE_CONFIGS, LinearConfig, PretrainConfig
from hcl_cli.params import default_params_yaml, stage_params
from hcl_cli.presets import CONFIGS, GRAPH_PRESETS, MACHINE_KEYS, PAPER_LINEAR, PRESETS, SENTENCE_PRESETS, Preset, listing

ROOT = Path(__file__).resolve().parents[1]


def hcl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``hcl ARGS`` in-process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


@pytest.fixture
def params_file(tmp_path: Path) -> Path:
    """A copy of the repository's params.yaml."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    return tmp_path / "params.yaml"


IMAGE_PRESETS = {name: preset for name, preset in PRESETS.items() if preset not in GRAPH_PRESETS + SENTENCE_PRESETS}
"""The image presets (the graph presets are checked in tests/test_graph_presets.py, the sentence ones below)."""


@pytest.mark.parametrize("preset", SENTENCE_PRESETS, ids=[preset.name for preset in SENTENCE_PRESETS])
def test_every_sentence_preset_trains_quick_thought_as_undimix_app_a_states(preset: Preset) -> None:
    groups = preset.groups()
    pretrain = PretrainConfig(**groups["pretrain"])
    assert (pretrain.arch, pretrain.optimizer, pretrain.lr, pretrain.batch_size, pretrain.context) == ("qt-gru", "adam", 5e-4, 400, 1)
    assert pretrain.ignored_changes() == [] and groups["prepare"]["dataset"] == "text" and groups["linear"]["protocol"] == "senteval"
    assert re.fullmatch(r"\d+\.\d", preset.top1) and "SICK is not available" in preset.note


@pytest.mark.parametrize("preset", IMAGE_PRESETS.values(), ids=list(IMAGE_PRESETS))
def test_every_preset_passes_the_stages_validation_and_sets_only_what_its_sampler_reads(preset: Preset) -> None:
    groups = preset.groups()
    assert set(groups) == {"prepare", "pretrain", "linear"}
    for group, values in preset.values.items():
        assert set(values) <= set(CONFIGS[group].param_names()), "a preset sets parameters, never paths or devices"
    for group, values in groups.items():
        CONFIGS[group].from_sources(values, {})  # raises on any value the stage would refuse
    pretrain = PretrainConfig(**groups["pretrain"])
    assert pretrain.ignored_changes() == [], "every sampler option a preset sets away from its default is read by its sampler"
    assert pretrain.projection_dim == 128 and pretrain.blur and not pretrain.unread_changes()
    if not pretrain.queue_size or preset.paper == "UnDiMix":  # the papers' Adam (UnDiMix App. A: "for all models"); HCL's MoCo-v2 SGD below
        assert (pretrain.optimizer, pretrain.lr, pretrain.weight_decay, pretrain.lr_schedule) == ("adam", 1e-3, 1e-6, "constant")
    assert pretrain.arch == "resnet50"
    if pretrain.queue_size:  # MoCo-v2 as its code runs it: main_moco.py's K and m, the README's v2 temperature
        assert (pretrain.queue_size, pretrain.queue_mode, pretrain.momentum, pretrain.sampler_options["temperature"]) == (
            65536,
            "moco",
            0.999,
            0.2,
        )
        assert preset.paper == "UnDiMix" or (
            pretrain.optimizer,
            pretrain.lr,
            pretrain.sgd_momentum,
            pretrain.weight_decay,
            pretrain.lr_schedule,
        ) == (
            "sgd",
            0.03,
            0.9,
            1e-4,
            "cosine",
        )
        assert (pretrain.projection_hidden, pretrain.projection_batchnorm) == (0, False), "the --mlp head"
    else:  # SimCLR's setting, as HCL's code runs it
        assert pretrain.sampler_options["temperature"] == 0.5
    assert LinearConfig(**groups["linear"]).params() | PAPER_LINEAR == LinearConfig(**groups["linear"]).params(), "the papers' readout"
    assert re.fullmatch(r"\d+\.\d+", preset.top1) and preset.note and preset.paper in ("HCL", "H-SCL", "HCL-OT", "UnDiMix")


def test_the_presets_carry_the_papers_settings_and_numbers() -> None:
    def pretrain(name: str) -> dict[str, object]:
        return PRESETS[name].groups()["pretrain"]

    assert len(PRESETS) >= 12
    stl10 = ["simclr", "debiased", "hard-beta0.5", "hard-beta1", "hard-beta2"]
    assert [PRESETS[f"hcl-stl10-{name}"].top1 for name in stl10] == ["80.15", "84.26", "86.38", "87.44", "87.09"]
    assert [pretrain(f"hcl-stl10-{name}")["sampler"] for name in stl10] == ["ucl", "debiased", "hucl", "hucl", "hucl"]
    assert [pretrain(f"hcl-stl10-{name}")["beta"] for name in stl10[2:]] == [0.5, 1.0, 2.0]
    assert {pretrain(f"hcl-stl10-{name}")["epochs"] for name in stl10} == {400}
    assert [PRESETS[f"hcl-cifar100-beta{beta}"].top1 for beta in ("0", "0.5", "2", "6")] == ["67.73", "69.61", "67.68", "65.54"]
    assert [PRESETS[f"hcl-tinyimagenet-{name}"].top1 for name in ("simclr", "debiased", "hard")] == ["53.4", "53.7", "57.0"]
    assert pretrain("hcl-tinyimagenet-hard")["tau_plus"] == 0.01
    assert PRESETS["hcl-tinyimagenet-hard"].groups()["prepare"] == {
        "dataset": "imagefolder",
        "path": "data/raw/tiny-imagenet-200",
        "name": "MUTAG",
        "image_size": 64,
        "test_fraction": 0.25,
        "vocab_size": 20000,
        "min_count": 1,
        "max_tokens": 30,
        "task": "MR",
        "corpus": "runs/prepared",
        "seed": 0,
    }
    methods = ["ucl", "hucl", "scl", "hscl-beta", "hscl-tau"]
    assert [PRESETS[f"hscl-cifar10-{name}"].top1 for name in methods] == ["89.16", "90.35", "93.46", "93.98", "92.95"]
    assert [pretrain(f"hscl-cifar10-{name}")["sampler"] for name in methods] == ["ucl", "hucl", "scl", "hscl", "hscl-threshold"]
    assert {
        (pretrain(f"hscl-{data}-{name}")["epochs"], pretrain(f"hscl-{data}-{name}")["batch_size"])
        for data in ("stl10", "cifar100")
        for name in methods
    } == {(200, 512)}
    nce = PRESETS["hclot-cifar10-nce"]
    assert (nce.top1, nce.reported) == ("91.2", "epsilon 0.5; SimCLR 91.0, HCL 91.4")
    assert {key: pretrain("hclot-cifar10-nce")[key] for key in ("sampler", "objective", "ot_epsilon", "tau_plus", "batch_size")} == {
        "sampler": "ot",
        "objective": "nce",
        "ot_epsilon": 0.5,
        "tau_plus": 0.0,
        "batch_size": 512,
    }
    assert pretrain("hclot-cifar10-bcl")["objective"] == "bcl" and pretrain("hclot-cifar100-debiased")["ot_epsilon"] == 0.7
    assert pretrain("hclot-cifar10-nce")["ot_iterations"] == 1000
    assert [PRESETS[f"undimix-{data}"].top1 for data in ("cifar10", "cifar100", "tinyimagenet")] == ["91.99", "69.43", "48.12"]
    assert pretrain("undimix-cifar10")["undimix_learned"] is True


def test_hcl_preset_lists_every_preset_with_its_paper_number(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = hcl(["preset"], capsys)
    assert code == 0
    for preset in PRESETS.values():
        (line,) = [line for line in out.splitlines() if line.startswith(f"  {preset.name} ")]
        heading = out[: out.index(line)].rsplit("\n\n", 1)[1].splitlines()[0]
        assert heading == f"{preset.paper}, {preset.where}:"
        assert re.split(r"\s{2,}", line.strip())[1:3] == [
            preset.dataset,
            preset.top1 + (f" ({preset.reported})" if preset.reported else ""),
        ]
    code, markdown, _ = hcl(["preset", "--table"], capsys)
    assert (
        code == 0 and markdown.count("\n") == len(PRESETS) + 2 and "| hclot-cifar10-nce | HCL-OT | Table II | CIFAR-10 | 91.2 (" in markdown
    )


def test_hcl_preset_does_not_import_torch() -> None:
    code = "import sys\nfrom hcl_cli.cli import main\ntry:\n    main(['preset'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules, file=sys.stderr)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.strip().splitlines()[-1] == "False"


def test_an_unknown_preset_is_a_one_line_usage_error_naming_the_three_nearest(
    params_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = params_file.read_text()
    code, _, err = hcl(["preset", "hscl-cifar10-hscl-bta", "--no-estimate", "--params", str(params_file)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("hcl preset: error: unknown preset 'hscl-cifar10-hscl-bta'; the nearest are hscl-cifar10-hscl-beta, ")
    assert err.count("hscl-cifar") == 4 and f"(hcl preset lists all {len(PRESETS)})" in err, "three names, not all of them"
    assert params_file.read_text() == before


def test_the_listing_groups_the_presets_by_paper_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = hcl(["preset"], capsys)
    assert code == 0
    headings = [line for line in out.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert "H-SCL, Table I:" in headings and "UnDiMix, Table 2:" in headings and "HCL, Fig. 3, Sec. 5.2:" in headings
    assert len(headings) == len(set(headings)), "each paper and table once"
    section = out.split("H-SCL, Table I:\n")[1].split("\n\n")[0].splitlines()
    assert len(section) == 20 and all(line.startswith("  hscl-") for line in section)
    assert all(f"  {name} " in out for name in PRESETS)


def test_a_preset_writes_its_groups_and_nothing_else(
    params_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before_text = params_file.read_text()
    before = yaml.safe_load(before_text)
    code, out, _ = hcl(["preset", "hscl-cifar10-hscl-beta", "--no-estimate", "--params", str(params_file)], capsys)
    assert code == 0 and "pretrain.sampler: hucl -> hscl" in out and "note: H-SCL Sec. V-A" in out
    after_text = params_file.read_text()
    after = yaml.safe_load(after_text)
    assert after["prepare"] == {**before["prepare"], "dataset": "cifar10"}
    assert after["pretrain"] == {
        **before["pretrain"],
        "sampler": "hscl",
        "arch": "resnet50",
        "epochs": 200,
        "batch_size": 512,
        "blur": True,
        "beta": 1.0,
    }
    assert after["linear"] == {**before["linear"], "protocol": "paper", "optimizer": "adam", "lr": 0.001, "weight_decay": 1e-6}
    assert {group: after[group] for group in ("embed", "knn", "report")} == {group: before[group] for group in ("embed", "knn", "report")}
    # Only the changed values' lines differ; every comment stays, at its column.
    changed = [(old, new) for old, new in zip(before_text.splitlines(), after_text.splitlines()) if old != new]
    assert len(after_text.splitlines()) == len(before_text.splitlines()) and len(changed) == 10
    for old, new in changed:
        assert (
            old.split(":")[0] == new.split(":")[0] and old.find("#") == new.find("#") and old.partition("#")[1:] == new.partition("#")[1:]
        )
    # Each stage reads its group as dvc repro runs it: `hcl <stage> --params params.yaml`.
    seen: list[object] = []
    for config_cls in (PretrainConfig, LinearConfig):
        monkeypatch.setitem(cli.STAGE_RUNNERS, config_cls, seen.append)
        assert hcl([config_cls.command, "--params", str(params_file)], capsys)[0] == 0
    pretrain, linear = seen
    assert (pretrain.sampler, pretrain.epochs, pretrain.sampler_options["beta"], pretrain.sampler_options["detach_weights"]) == (
        "hscl",
        200,
        1.0,
        False,
    )
    assert (linear.protocol, linear.optimizer, linear.epochs, linear.batch_size, linear.lr) == ("paper", "adam", 100, 512, 0.001)
    for config_cls in STAGE_CONFIGS:
        stage_params(params_file, config_cls)


def test_a_preset_resets_what_it_does_not_name_but_keeps_the_machine_keys(params_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = params_file.read_text()
    for key, value in (("positives", "labels"), ("max_steps", "5"), ("compile", "true"), ("eval_every", "10"), ("ot_epsilon", "0.3")):
        text = re.sub(rf"^  {key}: \S+", f"  {key}: {value}", text, count=1, flags=re.MULTILINE)
    params_file.write_text(text)
    assert hcl(["preset", "hcl-stl10-hard-beta1", "--no-estimate", "--params", str(params_file)], capsys)[0] == 0
    pretrain = yaml.safe_load(params_file.read_text())["pretrain"]
    assert (pretrain["positives"], pretrain["max_steps"], pretrain["ot_epsilon"]) == ("partner", 0, 0.5)
    assert (pretrain["compile"], pretrain["eval_every"]) == (True, 10)
    assert set(MACHINE_KEYS["pretrain"]) <= set(PretrainConfig.param_names())


def test_a_second_application_changes_nothing(params_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hcl(["preset", "undimix-cifar100", "--no-estimate", "--params", str(params_file)], capsys)
    first = params_file.read_text()
    code, out, _ = hcl(["preset", "undimix-cifar100", "--no-estimate", "--params", str(params_file)], capsys)
    assert code == 0 and "changes 0 value(s)" in out.splitlines()[0] and params_file.read_text() == first


def test_missing_groups_and_keys_are_added_and_a_flow_group_becomes_a_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(
        "# my experiments\npretrain:\n  sampler: ucl   # the baseline\n  epochs: 3\n  compile: true\nlinear: {epochs: 3, mine: 1}\nknn:\n  k: 20\nmytool: {x: 1}\n"
    )
    assert hcl(["preset", "hclot-stl10-debiased", "--no-estimate", "--params", str(path)], capsys)[0] == 0
    text = path.read_text()
    assert text.startswith(
        "# my experiments\npretrain:\n  sampler: ot    # the baseline\n  epochs: 400\n  compile: true\n  arch: resnet50 "
    )
    params = yaml.safe_load(text)
    assert params["knn"] == {"k": 20} and params["mytool"] == {"x": 1} and "embed" not in params
    groups = PRESETS["hclot-stl10-debiased"].groups()
    assert params == params | {
        "prepare": groups["prepare"],
        "pretrain": groups["pretrain"] | {"compile": True},
        "linear": groups["linear"] | {"mine": 1},
    }
    assert params["prepare"]["image_size"] == 32 and params["pretrain"]["tau_plus"] == 0.1
    assert "  dataset: stl10                # digits | cifar10 | cifar100 | stl10 | imagefolder | tu | text | senteval" in text.splitlines()


def test_a_missing_params_file_starts_from_the_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    assert hcl(["preset", "hcl-cifar100-beta0.5", "--no-estimate", "--params", str(path)], capsys)[0] == 0
    params, defaults = yaml.safe_load(path.read_text()), yaml.safe_load(default_params_yaml())
    assert params == defaults | {group: defaults[group] | values for group, values in PRESETS["hcl-cifar100-beta0.5"].groups().items()}
    assert path.read_text().startswith("# Parameters of the pipeline")


def test_a_malformed_params_file_is_refused_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("pretrain: [1, 2\n")
    code, _, err = hcl(["preset", "hcl-stl10-simclr", "--no-estimate", "--params", str(path)], capsys)
    assert code == 2 and "cannot read" in err and path.read_text() == "pretrain: [1, 2\n"


def test_the_listing_s_footer_is_a_paragraph_of_80_columns() -> None:
    """``hcl preset``'s footer was one line of 202 characters (the rows of the listing are a table, aligned)."""
    lines = listing().splitlines()
    footer = lines[len(lines) - lines[::-1].index("") :]
    assert len(footer) > 1 and max(len(line) for line in footer) <= 80, footer
    assert " ".join(footer).startswith("hcl preset NAME --dry-run shows what the preset would change and cost;")
