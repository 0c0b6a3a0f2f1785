"""``hcl report`` on a run made in the test: digits prepared, an untrained encoder, its embeddings,
metrics files and dvclive logs. The numbers equal the files, every linked figure is a real PNG,
missing optional inputs only drop their section, and a missing metrics folder is one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image
import pytest
import torch
import yaml

from dvclive import Live
from hcl_cli.artifacts import write_json
from hcl_cli.cli import main
from hcl_cli.config import STAGE_CONFIGS, EmbedConfig, KnnConfig, LinearConfig, PrepareConfig, PretrainConfig, ReportConfig
from hcl_cli.datasets import load_card
from hcl_cli.diagnostics import ASSUMPTION1_KEY, LOSS_SAMPLERS, loss_key
from hcl_cli.errors import HclError, UsageError
from hcl_cli.models import build_model, save_encoder
from hcl_cli.stages import embed, prepare, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRAINED = PretrainConfig(sampler="hscl", epochs=3, batch_size=32)
KNN = {"top1": 0.912345678, "top5": 0.99876, **KnnConfig(k=20, temperature=0.1).params()}
LINEAR = {"top1": 0.9333333333333333, "top5": 1.0, **LinearConfig(epochs=30).params()}
EXPECTED_FIGURES = {"loss.png", "knn_top1.png", "hscl_diagnostics.png", "similarity.png", "hard_negatives.png"}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every input of a report: params.yaml, prepared digits, encoder, embeddings, metrics, dvclive logs."""
    root = tmp_path_factory.mktemp("run")
    defaults = {cls.group: cls().params() for cls in STAGE_CONFIGS}
    (root / "params.yaml").write_text(yaml.safe_dump(defaults, sort_keys=False))
    prepare.run(PrepareConfig(out=str(root / "data" / "prepared")))
    card = load_card(root / "data" / "prepared")
    torch.manual_seed(0)
    meta = {"config": TRAINED.params(), "epoch": TRAINED.epochs, "seed": 0, "dataset": "digits", "mean": card["mean"], "std": card["std"]}
    save_encoder(root / "models" / "encoder.safetensors", build_model("small_cnn", 1, 8, 16), meta)
    embed.run(EmbedConfig(data=str(root / "data" / "prepared"), model=str(root / "models" / "encoder.safetensors"), out=str(root / "data" / "embeddings.safetensors"), device="cpu"))
    write_json(root / "metrics" / "knn.json", KNN)
    write_json(root / "metrics" / "linear.json", LINEAR)
    with Live(dir=str(root / "dvclive" / "pretrain"), save_dvc_exp=False, dvcyaml=None) as live:
        for epoch in range(TRAINED.epochs):
            live.step = epoch
            live.log_metric("loss", 5.0 - epoch)
            live.log_metric("knn_top1", 0.5 + 0.1 * epoch)
            live.log_metric(ASSUMPTION1_KEY, 0.9 + 0.02 * epoch)
            for offset, sampler in enumerate(LOSS_SAMPLERS):
                live.log_metric(loss_key(sampler), 4.0 + offset - 0.5 * epoch)
            live.next_step()
    return root


def report_config(root: Path, **changes: str) -> ReportConfig:
    paths = {
        "params_file": str(root / "params.yaml"),
        "metrics": str(root / "metrics"),
        "plots": str(root / "dvclive"),
        "embeddings": str(root / "data" / "embeddings.safetensors"),
        "data": str(root / "data" / "prepared"),
        "model": str(root / "models" / "encoder.safetensors"),
        "out": str(root / "reports" / "report.md"),
    }
    return ReportConfig(anchors=3, **(paths | changes))


@pytest.fixture(scope="module")
def full_report(run_folder: Path) -> Path:
    report.run(report_config(run_folder))
    return run_folder / "reports" / "report.md"


def test_metric_table_equals_the_metrics_files(full_report: Path, run_folder: Path) -> None:
    rows = re.findall(r"^\| (kNN|Linear readout) \| (\w+) \| ([0-9.]+) \| ([0-9.]+) \|", full_report.read_text(), flags=re.MULTILINE)
    assert [name for name, *_ in rows] == ["kNN", "Linear readout"]
    for (_, feature, top1, top5), name in zip(rows, ("knn", "linear")):
        recorded = json.loads((run_folder / "metrics" / f"{name}.json").read_text())
        assert feature == recorded["feature"]
        assert float(top1) == round(recorded["top1"], 4) and top1 == f"{recorded['top1']:.4f}"
        assert float(top5) == round(recorded["top5"], 4) and top5 == f"{recorded['top5']:.4f}"


def test_every_linked_figure_is_a_non_empty_png(full_report: Path) -> None:
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", full_report.read_text())
    assert {Path(link).name for link in links} == EXPECTED_FIGURES
    for link in links:
        path = full_report.parent / link
        assert path.stat().st_size > 0
        assert path.read_bytes()[:8] == PNG_MAGIC
        height, width, _ = matplotlib.image.imread(path).shape
        assert height >= 300 and width >= 300, f"{link} is {width}x{height} px"
    assert not list((full_report.parent / "figures").glob(".*.tmp")), "no temporary file is left behind"


def test_protocol_and_parameters_are_the_runs(full_report: Path) -> None:
    text = full_report.read_text()
    assert "k = 20" in text and "T = 0.1" in text and "exp(cos / T)" in text
    assert "standardised with the train split's per-feature mean and standard deviation" in text
    assert "L-BFGS" in text and "at most 30 iterations" in text and "initialisation seed 0" in text
    assert "| pretrain | sampler | hscl (params.yaml: hucl) | `" in text, "the encoder's value, with the unreproduced params.yaml one beside it"
    assert "| pretrain | epochs | 3 (params.yaml: 60) |" in text
    assert "| knn | k | 20 (params.yaml: 200) |" in text
    assert "| embed | batch_size | 512 | `" in text, "a stage that records nothing shows params.yaml"


def test_missing_optional_inputs_drop_only_their_sections(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    absent = str(tmp_path / "absent")
    report.run(report_config(run_folder, plots=absent, embeddings=absent, model=absent, out=str(out)))
    text = out.read_text()
    assert "## Metrics" in text and "## Evaluation protocol" in text
    assert "## Figures" not in text and not (tmp_path / "figures").exists()


def test_only_the_figures_whose_inputs_exist_are_linked(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    report.run(report_config(run_folder, plots=str(tmp_path / "absent"), out=str(out)))
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", out.read_text())
    assert {Path(link).name for link in links} == {"similarity.png", "hard_negatives.png"}
    assert sorted(path.name for path in (tmp_path / "figures").iterdir()) == ["hard_negatives.png", "similarity.png"]


def test_missing_metrics_folder_is_a_one_line_error(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    with pytest.raises(HclError, match=r"^metrics folder .*absent not found: run hcl knn-eval and hcl linear-eval first$"):
        report.run(report_config(run_folder, metrics=str(tmp_path / "absent"), out=str(out)))
    assert not out.exists()


def test_metrics_file_without_top1_names_the_file(tmp_path: Path, run_folder: Path) -> None:
    write_json(tmp_path / "metrics" / "knn.json", {"top5": 0.5, **KnnConfig().params()})
    with pytest.raises(HclError, match=r"knn\.json: 'top1' must be a number in \[0, 1\]"):
        report.run(report_config(run_folder, metrics=str(tmp_path / "metrics"), out=str(tmp_path / "report.md")))


def test_cli_reports_a_missing_metrics_folder_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--metrics", "nowhere"])
    assert exit_info.value.code == 1
    error = capsys.readouterr().err.strip()
    assert error == "hcl report: error: metrics folder nowhere not found: run hcl knn-eval and hcl linear-eval first"
    assert not (tmp_path / "reports").exists()


def test_every_input_is_read_before_anything_is_written(run_folder: Path, tmp_path: Path) -> None:
    """A corrupt input that only the last figures read leaves no figure of the earlier ones, and no report."""
    embeddings = tmp_path / "embeddings.safetensors"
    embeddings.write_bytes((run_folder / "data" / "embeddings.safetensors").read_bytes()[:100])
    (tmp_path / "embeddings.json").write_bytes((run_folder / "data" / "embeddings.json").read_bytes())
    out = tmp_path / "reports" / "report.md"
    with pytest.raises(HclError, match="embeddings.safetensors: not a readable safetensors file"):
        report.run(report_config(run_folder, embeddings=str(embeddings), out=str(out)))
    assert not (tmp_path / "reports").exists(), "the loss and kNN curves were drawn before the embeddings were read"


def test_a_model_whose_sidecar_lost_its_hash_fails_before_any_figure(run_folder: Path, tmp_path: Path) -> None:
    model = tmp_path / "encoder.safetensors"
    model.write_bytes((run_folder / "models" / "encoder.safetensors").read_bytes())
    sidecar = json.loads((run_folder / "models" / "encoder.json").read_text())
    (tmp_path / "encoder.json").write_text(json.dumps({**sidecar, "sha256": "0" * 64}))
    out = tmp_path / "reports" / "report.md"
    with pytest.raises(HclError, match="encoder.safetensors: the tensor file does not match"):
        report.run(report_config(run_folder, model=str(model), out=str(out)))
    assert not (tmp_path / "reports").exists()


def test_out_into_an_input_is_a_usage_error(run_folder: Path) -> None:
    before = sorted(path.name for path in (run_folder / "metrics").iterdir())
    with pytest.raises(UsageError, match=r"--out .*metrics/knn.json is also the input --metrics .*metrics \(.* lies inside the folder"):
        report.run(report_config(run_folder, out=str(run_folder / "metrics" / "knn.json")))
    assert sorted(path.name for path in (run_folder / "metrics").iterdir()) == before
    assert json.loads((run_folder / "metrics" / "knn.json").read_text())["top1"] == KNN["top1"]
