"""``hcl report`` on runs made in the test: digits prepared, an untrained encoder, its embeddings,
metrics files and training logs; and an imagefolder dataset in a folder whose params.yaml says
digits. The numbers equal the files with their Wilson intervals, the baselines are real accuracies,
the dataset and the provenance come from the card and the encoder, only the parameters the sampler
reads are listed, runs that read labels say so, every linked figure is a real PNG, missing
optional inputs only drop their section, and a missing metrics folder is one line."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.figure
import matplotlib.image
import pytest
import torch
import yaml
from PIL import Image

from hcl_cli.artifacts import RECORD_FILE
from hcl_cli.cli import main
from hcl_cli.config import STAGE_CONFIGS, EmbedConfig, KnnConfig, LinearConfig, PrepareConfig, PretrainConfig, ReportConfig
from hcl_cli.diagnostics import ASSUMPTION1_KEY, LOSS_SAMPLERS, HardNegatives, loss_key
from hcl_cli.errors import HclError, UsageError
from hcl_cli.image.card import DatasetCard, load_card
from hcl_cli.image.encoder import save_encoder
from hcl_cli.image.networks import build_model
from hcl_cli.metrics import EvaluationMetrics, save_metrics
from hcl_cli.report.escaping import code, inline
from hcl_cli.report.inputs import TrainedEncoder, read_metric_files
from hcl_cli.report.markdown import labels_note, linear_protocol
from hcl_cli.report.plots import plot_hard_negatives
from hcl_cli.report.writer import publish
from hcl_cli.stages import embed, knn_eval, prepare, report
from hcl_cli.stats import wilson_interval
from hcl_cli.training.log import TrainingLog

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRAINED = PretrainConfig(sampler="hscl", epochs=3, batch_size=32)
DIGITS_TEST_SIZE = 450
KNN = EvaluationMetrics(411 / DIGITS_TEST_SIZE, 449 / DIGITS_TEST_SIZE, DIGITS_TEST_SIZE, KnnConfig(k=20, temperature=0.1).params())
LINEAR = EvaluationMetrics(420 / DIGITS_TEST_SIZE, 1.0, DIGITS_TEST_SIZE, LinearConfig(epochs=30).params())
RUN_RECORD = {"device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3"}, "steps": 10, "planned_steps": 10}
EXPECTED_FIGURES = {"loss.png", "knn_top1.png", "hscl_diagnostics.png", "similarity.png", "hard_negatives.png"}
ROW = re.compile(
    r"^\| (kNN|kNN \(baseline\)|Linear readout) \| ([^|]+) \| (\w+) \| ([0-9,]+) \| ([0-9.]+) \| \[([0-9.]+), ([0-9.]+)\] \|(?: ([0-9.]+) \| \[([0-9.]+), ([0-9.]+)\] \|)?",
    re.MULTILINE,
)
IMAGEFOLDER_CLASSES = ("circle", "cross", "square")
IMAGEFOLDER_COUNTS = {"train": 5, "test": 3}


def default_params_yaml(root: Path) -> None:
    """The default params.yaml (prepare.dataset: digits, pretrain.sampler: hucl) in ``root``."""
    defaults = {cls.group: cls().params() for cls in STAGE_CONFIGS}
    (root / "params.yaml").write_text(yaml.safe_dump(defaults, sort_keys=False))


def save_untrained_encoder(root: Path, trained: PretrainConfig, card: DatasetCard, **extra: object) -> Path:
    """An untrained small CNN saved as the run's encoder, its sidecar recording ``trained`` and ``extra``."""
    channels, size, _ = card.image_shape
    torch.manual_seed(0)
    meta = {
        "config": trained.params(),
        "epoch": trained.epochs,
        "seed": trained.seed,
        "dataset": card.name,
        "mean": card.mean,
        "std": card.std,
        **extra,
    }
    path = root / "models" / "encoder.safetensors"
    save_encoder(path, build_model("small_cnn", channels, size, 16), meta)
    return path


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every input of a report: params.yaml, prepared digits, encoder, embeddings, metrics, training logs."""
    root = tmp_path_factory.mktemp("run")
    default_params_yaml(root)
    prepare.run(PrepareConfig(out=str(root / "data" / "prepared")))
    card = load_card(root / "data" / "prepared")
    assert card.counts["test"] == DIGITS_TEST_SIZE
    model = save_untrained_encoder(root, TRAINED, card, run=RUN_RECORD)
    embed.run(
        EmbedConfig(data=str(root / "data" / "prepared"), model=str(model), out=str(root / "data" / "embeddings.safetensors"), device="cpu")
    )
    save_metrics(root / "metrics" / "knn.json", KNN, "knn-eval")
    save_metrics(root / "metrics" / "linear.json", LINEAR, "linear-eval")
    history = [
        {"epoch": epoch, "loss": 5.0 - epoch, "knn_top1": 0.5 + 0.1 * epoch, ASSUMPTION1_KEY: 0.9 + 0.02 * epoch}
        | {loss_key(sampler): 4.0 + offset - 0.5 * epoch for offset, sampler in enumerate(LOSS_SAMPLERS)}
        for epoch in range(TRAINED.epochs)
    ]
    TrainingLog(root / "dvclive" / "pretrain").write(history)
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


def metric_rows(path: Path) -> list[tuple[str, ...]]:
    """The metric table's rows: evaluation, encoder, feature, test images, top-1 and its interval, top-5 and its interval."""
    return metric_rows_of(path.read_text())


def metric_rows_of(text: str) -> list[tuple[str, ...]]:
    return ROW.findall(text)


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a report."""
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_metric_table_equals_the_metrics_files(full_report: Path, run_folder: Path) -> None:
    rows = [row for row in metric_rows(full_report) if row[1] == "trained"]
    assert [row[0] for row in rows] == ["kNN", "Linear readout"]
    for (_, _, feature, test_size, top1, _, _, top5, _, _), name in zip(rows, ("knn", "linear")):
        recorded = json.loads((run_folder / "metrics" / f"{name}.json").read_text())
        params = json.loads((run_folder / "metrics" / f"{name}.inputs.json").read_text())["params"]
        assert feature == params["feature"] and int(test_size) == recorded["test_size"] == DIGITS_TEST_SIZE
        assert float(top1) == round(recorded["top1"], 4) and top1 == f"{recorded['top1']:.4f}"
        assert float(top5) == round(recorded["top5"], 4) and top5 == f"{recorded['top5']:.4f}"


def check_wilson_intervals(rows: list[tuple[str, ...]]) -> None:
    """Every interval of ``rows`` is the Wilson interval of its accuracy on its test size.

    The accuracy is a count over the test images: with fewer than 10,000 of them its 4 decimals
    recover the count exactly.
    """
    for _, _, _, test_size, *accuracies in rows:
        count = int(test_size.replace(",", ""))
        for accuracy, low, high in (accuracies[:3], accuracies[3:]):
            if not accuracy:  # no top-5 columns: five classes or fewer
                continue
            exact = round(float(accuracy) * count) / count
            assert f"{exact:.4f}" == accuracy
            assert (low, high) == tuple(f"{bound:.4f}" for bound in wilson_interval(exact, count))
            assert 0.0 <= float(low) <= float(accuracy) <= float(high) <= 1.0


def test_every_interval_is_the_wilson_interval_of_its_test_size(full_report: Path) -> None:
    rows = metric_rows(full_report)
    assert len(rows) == 4
    check_wilson_intervals(rows)
    assert "95% Wilson interval" in full_report.read_text()


def test_baselines_stand_beside_the_knn_result(full_report: Path) -> None:
    rows = metric_rows(full_report)
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("kNN", "trained", "backbone"),
        ("kNN (baseline)", f"untrained small_cnn (seed {TRAINED.seed})", "backbone"),
        ("kNN (baseline)", "none: raw pixels", "pixels"),
        ("Linear readout", "trained", "backbone"),
    ]
    for _, _, _, test_size, top1, low1, high1, top5, low5, high5 in rows[1:3]:
        assert int(test_size) == DIGITS_TEST_SIZE
        assert all(0.0 <= float(value) <= 1.0 for value in (top1, low1, high1, top5, low5, high5))
        assert float(top1) <= float(top5)
    pixels_top1 = float(rows[2][4])
    assert pixels_top1 > 0.9, "kNN on the raw pixels of the digits is far above chance"
    text = full_report.read_text()
    assert "the raw pixels, each image flattened, scaled to [0, 1] and L2-normalised" in text
    assert f"initialised with the run's seed {TRAINED.seed}" in text


def test_the_run_section_names_the_provenance_from_the_encoder(full_report: Path) -> None:
    run_section = section(full_report.read_text(), "Run")
    assert (
        "`digits` (sklearn.datasets.load_digits, stratified split with test_fraction=0.25): 1,347 train, 450 test images, 10 classes"
        in run_section
    )
    assert "images of 1 x 8 x 8" in run_section
    assert "- **Trained**: on cuda (NVIDIA H100 80GB HBM3); when, on which host and at which commit: `" in run_section
    assert "encoder.run.json`, a record DVC does not track" in run_section
    assert f"torch {torch.__version__}" in run_section


def test_a_supervised_run_is_marked_as_using_labels(full_report: Path) -> None:
    text = full_report.read_text()
    assert "labels used: **yes**: `hscl` is a supervised sampler" in section(text, "Run")
    assert "**Pretraining used the labels** (`hscl`" in section(text, "Metrics")


@pytest.mark.parametrize(
    ("trained", "uses_labels"),
    [
        (PretrainConfig(sampler="scl"), "**yes**: `scl` is a supervised sampler"),
        (PretrainConfig(sampler="ucl", positives="labels"), "**yes**: `ucl` ran with positives = labels"),
        (PretrainConfig(sampler="hucl"), "no: `hucl` is self-supervised"),
    ],
)
def test_labels_note_follows_the_sampler_and_its_positives(trained: PretrainConfig, uses_labels: str) -> None:
    encoder = TrainedEncoder(Path("encoder.safetensors"), build_model("small_cnn", 1, 8, 16), {}, trained)
    assert labels_note(encoder).startswith(uses_labels)


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
    assert "| pretrain | sampler | hscl (params.yaml: hucl) | `" in text, (
        "the encoder's value, with the unreproduced params.yaml one beside it"
    )
    assert "| pretrain | epochs | 3 (params.yaml: 60) |" in text
    assert "| knn | k | 20 (params.yaml: 200) |" in text
    assert "| embed | batch_size | 512 | `" in text, "a stage that records nothing shows params.yaml"
    assert "| pretrain | beta | 1.0 |" in text, "hscl reads beta"
    assert "| pretrain | tau_plus |" not in text and "| pretrain | ot_epsilon |" not in text, "hscl reads neither"
    assert "| prepare | dataset | digits | `" in text and "card.json" in text, "the dataset as the card records it"


def test_missing_optional_inputs_drop_only_their_sections(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    absent = str(tmp_path / "absent")
    report.run(report_config(run_folder, plots=absent, embeddings=absent, model=absent, out=str(out)))
    text = out.read_text()
    assert "## Metrics" in text and "## Evaluation protocol" in text
    assert "## Figures" not in text and figure_names(tmp_path / "figures") == []


def test_only_the_figures_whose_inputs_exist_are_linked(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    report.run(report_config(run_folder, plots=str(tmp_path / "absent"), out=str(out)))
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", out.read_text())
    assert {Path(link).name for link in links} == {"similarity.png", "hard_negatives.png"}
    assert figure_names(tmp_path / "figures") == ["hard_negatives.png", "similarity.png"]


def test_missing_metrics_folder_is_a_one_line_error(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    with pytest.raises(HclError, match=r"^metrics folder .*absent not found: run hcl knn-eval and hcl linear-eval first$"):
        report.run(report_config(run_folder, metrics=str(tmp_path / "absent"), out=str(out)))
    assert not out.exists()


def test_metrics_file_without_top1_names_the_file(tmp_path: Path, run_folder: Path) -> None:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "knn.json").write_text(json.dumps({"top5": 0.5, "test_size": DIGITS_TEST_SIZE, **KnnConfig().params()}))
    with pytest.raises(HclError, match=r"knn\.json: 'top1' must be a number in \[0, 1\]"):
        report.run(report_config(run_folder, metrics=str(tmp_path / "metrics"), out=str(tmp_path / "report.md")))


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("knn", {"k": None}, r"'k' is missing \(the setting it was measured with\): run hcl knn-eval again"),
        ("knn", {"k": 0}, r"'k' must be a positive integer \(got 0\): run hcl knn-eval again"),
        ("knn", {"temperature": "0.5"}, r"'temperature' must be a positive number \(got '0.5'\)"),
        ("knn", {"bank_chunk_size": True}, r"'bank_chunk_size' must be a positive integer \(got True\)"),
        ("knn", {"feature": "pixels"}, r"'feature' must be backbone or projection \(got 'pixels'\)"),
        ("linear", {"protocol": "svd"}, r"'protocol' must be fixed, paper, svm, senteval \(got 'svd'\): run hcl linear-eval again"),
        ("linear", {"protocol": "svm", "svm_folds": None}, r"'svm_folds' is missing \(the setting it was measured with\)"),
    ],
)
def test_a_metrics_setting_the_report_reads_is_checked_in_one_line(
    tmp_path: Path, name: str, params: dict[str, object], message: str
) -> None:
    """The report checks the settings it scores its baselines with and quotes, not the evaluations' declarations."""
    declared = (KnnConfig() if name == "knn" else LinearConfig()).params() | params
    save_metrics(
        tmp_path / f"{name}.json",
        EvaluationMetrics(0.5, 0.9, 10, {key: value for key, value in declared.items() if value is not None}),
        f"{name}-eval",
    )
    with pytest.raises(HclError, match=f"^{re.escape(str(tmp_path / f'{name}.inputs.json'))}: {message}") as raised:
        read_metric_files(tmp_path)
    assert "\n" not in str(raised.value)


def test_cli_reports_a_missing_metrics_folder_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--metrics", "nowhere"])
    assert exit_info.value.code == 2
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
    assert json.loads((run_folder / "metrics" / "knn.json").read_text())["top1"] == KNN.top1


def test_metrics_of_another_test_split_are_refused(run_folder: Path, tmp_path: Path) -> None:
    save_metrics(tmp_path / "metrics" / "knn.json", EvaluationMetrics(0.5, 0.9, DIGITS_TEST_SIZE + 1, KnnConfig().params()), "knn-eval")
    out = tmp_path / "reports" / "report.md"
    with pytest.raises(HclError, match=rf"knn\.json scored {DIGITS_TEST_SIZE + 1} test images, but .*prepared holds {DIGITS_TEST_SIZE}"):
        report.run(report_config(run_folder, metrics=str(tmp_path / "metrics"), out=str(out)))
    assert not out.exists()


def write_image_folder(root: Path) -> None:
    """``root/{train,test}/<class>/*.png``: 8x8 RGB images, each class its own colour channel plus noise."""
    generator = torch.Generator().manual_seed(0)
    for split, count in IMAGEFOLDER_COUNTS.items():
        for label, name in enumerate(IMAGEFOLDER_CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True)
            for index in range(count):
                pixels = torch.randint(0, 80, (8, 8, 3), generator=generator, dtype=torch.uint8)
                pixels[..., label] += 170
                Image.fromarray(pixels.numpy()).save(folder / f"{index}.png")


@pytest.fixture(scope="module")
def imagefolder_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The report of a ucl run on a tiny imagefolder dataset, in a folder whose params.yaml says digits and hucl."""
    root = tmp_path_factory.mktemp("imagefolder")
    default_params_yaml(root)
    write_image_folder(root / "raw")
    prepare.run(PrepareConfig(dataset="imagefolder", path=str(root / "raw"), out=str(root / "data" / "prepared")))
    card = load_card(root / "data" / "prepared")
    model = save_untrained_encoder(root, PretrainConfig(sampler="ucl", epochs=2, batch_size=8, beta=2.0), card)
    embed.run(
        EmbedConfig(data=str(root / "data" / "prepared"), model=str(model), out=str(root / "data" / "embeddings.safetensors"), device="cpu")
    )
    knn_eval.run(
        KnnConfig(k=5, embeddings=str(root / "data" / "embeddings.safetensors"), out=str(root / "metrics" / "knn.json"), device="cpu")
    )
    report.run(report_config(root, plots=str(root / "absent")))
    return (root / "reports" / "report.md").read_text()


def test_the_report_names_the_prepared_dataset_not_params_yaml(imagefolder_report: str) -> None:
    train, test = (count * len(IMAGEFOLDER_CLASSES) for count in IMAGEFOLDER_COUNTS.values())
    run_section = section(imagefolder_report, "Run")
    assert "**Dataset**: `imagefolder` (" in run_section
    assert f"): {train} train, {test} test images, {len(IMAGEFOLDER_CLASSES)} classes, images of 3 x 8 x 8" in run_section
    assert "digits" not in run_section
    assert "| prepare | dataset | imagefolder (params.yaml: digits) | `" in imagefolder_report
    assert all(int(row[3]) == test for row in metric_rows_of(imagefolder_report))


def test_only_the_parameters_the_sampler_reads_are_listed(imagefolder_report: str) -> None:
    listed = set(re.findall(r"^\| pretrain \| (\w+) \|", imagefolder_report, flags=re.MULTILINE))
    assert listed == set(PretrainConfig(sampler="ucl").used_params("image"))
    assert {"temperature", "positives", "seed", "epochs"} <= listed
    assert not listed & {"beta", "tau_plus", "anneal", "ot_epsilon", "undimix_weights"}, "ucl reads none of them (beta 2.0 was set)"
    assert "| pretrain | sampler | ucl (params.yaml: hucl) |" in imagefolder_report


def test_a_self_supervised_run_is_not_marked_as_using_labels(imagefolder_report: str) -> None:
    assert "labels used: no: `ucl` is self-supervised" in section(imagefolder_report, "Run")
    assert "Pretraining used the labels" not in imagefolder_report
    assert "not recorded in" in section(imagefolder_report, "Run"), "an encoder without a run record says so"


def test_the_imagefolder_baselines_are_accuracies_with_intervals(imagefolder_report: str) -> None:
    rows = metric_rows_of(imagefolder_report)
    assert [row[1] for row in rows] == ["trained", "untrained small_cnn (seed 0)", "none: raw pixels"]
    check_wilson_intervals(rows)
    assert float(rows[2][4]) == 1.0, "each class is its own colour: the raw pixels separate them"
    assert "top-5 is not shown: with 3 classes it is 1 by construction" in imagefolder_report
    assert "| Top-5 |" not in imagefolder_report and all(row[7] == "" for row in rows), "top-5 only with more than 5 classes"


def test_the_papers_linear_protocol_is_described_as_it_ran() -> None:
    params = LinearConfig(protocol="paper", optimizer="adam", epochs=7, batch_size=64, lr=0.001, weight_decay=1e-6).params()
    text = linear_protocol(EvaluationMetrics(0.5, 0.9, 10, params, {"augmentation": {"recipe": "simclr", "blur": True}}))
    assert "augmented afresh every epoch as in pretraining (the simclr recipe with blur, seed 0)" in text
    assert "minibatch Adam (batches of 64, learning rate 0.001, weight decay 1e-06 on W and b)" in text and "for 7 epochs" in text
    assert "standardised" not in text and "L-BFGS" not in text
    injected = linear_protocol(EvaluationMetrics(0.5, 0.9, 10, params | {"lr": "[x](http://a) <b>"}))
    assert "learning rate \\[x\\](http://a) \\<b\\>" in injected, "a value read from the metrics file is literal text"


def curves_only_args(root: Path, out: Path, *extra: str) -> list[str]:
    """``hcl report`` arguments for a quick report of ``root``'s run: the metrics and the three training curves."""
    absent = str(out.parent / "absent")
    paths = ["--metrics", str(root / "metrics"), "--plots", str(root / "dvclive"), "--embeddings", absent, "--data", absent]
    return ["report", *paths, "--model", absent, "--out", str(out), *extra]


def hcl(args: list[str]) -> int | str | None:
    """``hcl ARGS`` in this process; its exit code."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return exit_info.value.code


def figure_names(folder: Path) -> list[str]:
    """The figures in ``folder`` (none when it is missing), besides hcl's record of what it wrote there."""
    return sorted(path.name for path in folder.iterdir() if path.name != RECORD_FILE) if folder.exists() else []


def folder_contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones included), by relative path, with its bytes."""
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_second_report_into_the_same_folder_fails_naming_it_and_the_first_ones_pid(
    run_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """While one report writes, another `hcl report` process into the same folder exits 1 in one line; the first's set stands."""
    out = tmp_path / "reports" / "report.md"
    second: list[subprocess.CompletedProcess[str]] = []

    def publish_after_a_second_report(*args: object) -> None:
        command = [sys.executable, "-m", "hcl_cli", *curves_only_args(run_folder, out, "--title", "second")]
        second.append(subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"}))
        publish(*args)

    monkeypatch.setattr("hcl_cli.stages.report.publish", publish_after_a_second_report)
    assert hcl(curves_only_args(run_folder, out, "--title", "first")) == 0
    (result,) = second
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"hcl report: error: {out.parent} is in use by another run (hcl report, pid {os.getpid()}); "
        "wait for it to end or choose another output folder"
    ]
    assert out.read_text().startswith("# first\n")
    assert sorted(folder_contents(out.parent)) == [
        f"figures/{RECORD_FILE}",
        "figures/hscl_diagnostics.png",
        "figures/knn_top1.png",
        "figures/loss.png",
        "report.md",
    ]


def test_a_full_disk_mid_write_leaves_the_old_set_and_names_the_file(
    run_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports" / "report.md"
    assert hcl(curves_only_args(run_folder, out, "--title", "old")) == 0
    before = folder_contents(out.parent)
    saved: list[str] = []

    def savefig_on_a_full_disk(figure: matplotlib.figure.Figure, path: str, **options: object) -> None:
        if saved:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        saved.append(path)
        original_savefig(figure, path, **options)

    original_savefig = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig_on_a_full_disk)
    capsys.readouterr()
    assert hcl(curves_only_args(run_folder, out, "--title", "new")) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"hcl report: error: cannot write {out.parent / 'figures' / 'knn_top1.png'}: No space left on device"
    )
    assert folder_contents(out.parent) == before, "the old markdown and figures, and no staging folder or lock file left"
    assert sorted(path.name for path in out.parent.iterdir()) == ["figures", "report.md"]


def test_a_new_report_replaces_the_whole_set(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "report.md"
    assert hcl(curves_only_args(run_folder, out)) == 0
    report.run(report_config(run_folder, plots=str(tmp_path / "absent"), embeddings=str(tmp_path / "absent"), out=str(out)))
    assert figure_names(out.parent / "figures") == ["hard_negatives.png"], "no curve of the old run is left"
    assert {Path(link).name for link in re.findall(r"!\[[^\]]+\]\(([^)]+)\)", out.read_text())} == {"hard_negatives.png"}


def test_a_figures_folder_holding_a_users_file_is_refused_before_any_work(
    run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports" / "report.md"
    assert hcl(curves_only_args(run_folder, out, "--title", "old")) == 0
    (out.parent / "figures" / "notes.txt").write_text("mine\n")
    before = folder_contents(out.parent)
    capsys.readouterr()
    assert hcl(curves_only_args(run_folder, out, "--title", "new")) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("hcl report: error: ") and "figures exists and is a folder holding files hcl did not write (notes.txt)" in error
    assert folder_contents(out.parent) == before


HOSTILE_TITLE = "Run\n## Injected heading\r\n[a link](https://example.com) ![an image](x.png) <script>alert(1)</script> | cell # \\[x]"


def test_a_title_with_markdown_does_not_change_the_reports_structure(run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "report.md"
    assert hcl(curves_only_args(run_folder, out, "--title", HOSTILE_TITLE)) == 0
    text = out.read_text()
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[0] == (
        r"# Run \#\# Injected heading \[a link\](https://example.com) !\[an image\](x.png) \<script\>alert(1)\</script\> \| cell \# \\\[x\]"
    )
    assert [line.split(" ", 1)[0] for line in headings[1:]] == ["##"] * 5 + ["###"] * 3, (
        "Run, Metrics, Evaluation protocol, Parameters, Figures"
    )
    assert not re.search(r"(?<!\\)<[A-Za-z/!?]", text), "no HTML tag: every < of the title is escaped"
    assert not re.search(r"(?<!\\)\]\(", text.split("## Figures")[0]), "no link or image but the figures'"
    (title_row,) = [line for line in text.splitlines() if line.startswith("| report | title |")]
    assert title_row.endswith("| `hcl report` options |") and title_row.count(" | ") == 3


@pytest.mark.parametrize(
    ("value", "span"),
    [
        ("data/prepared", "`data/prepared`"),
        ("a`b", "``a`b``"),
        ("`edge`", "`` `edge` ``"),
        ("two\nlines", "`two lines`"),
    ],
)
def test_code_spans_hold_any_value_on_one_line(value: str, span: str) -> None:
    assert code(value) == span


def test_inline_text_escapes_only_what_could_change_the_structure() -> None:
    assert inline('x $(touch PWNED) "quoted" `y` ; z_1 *b*') == 'x $(touch PWNED) "quoted" `y` ; z_1 *b*'
    assert inline("<b>&amp;</b>\n# [x](y)|") == r"\<b\>\&amp;\</b\> \# \[x\](y)\|"
    assert code("a|b", cell=True) == r"`a\|b`"


def test_class_names_are_drawn_as_written(tmp_path: Path) -> None:
    """A class folder named like mathtext (``$\\foo$``) is a label, not a formula matplotlib fails to parse."""
    images = torch.zeros(3, 1, 8, 8, dtype=torch.uint8)
    rows = [HardNegatives(0, [1, 2], [0.6, 0.4])]
    path = tmp_path / "hard_negatives.png"
    plot_hard_negatives(rows, images, torch.tensor([0, 1, 2]), ["$\\foo$", "a$b", "$x$"], path, title="grid")
    assert path.read_bytes()[:8] == PNG_MAGIC
