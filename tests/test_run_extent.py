"""A run --max-steps stopped is labelled as such: the training log records its steps, ``hcl compare`` and the report say "stopped at step N of M"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hcl_cli.provenance import describe_extent
from hcl_cli.stages import compare
from hcl_cli.training.log import TrainingLog


def test_the_training_log_records_steps_taken_and_planned_beside_the_metrics_not_as_curves(tmp_path: Path) -> None:
    log = TrainingLog(tmp_path)
    log.write([{"epoch": 0, "loss": 2.0}, {"epoch": 1, "loss": 1.5}], (8, 20))
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"loss": 1.5, "step": 1, "steps": 8, "planned_steps": 20}
    assert log.logged_names() == ["loss"]
    assert sorted(p.name for p in (tmp_path / "plots" / "metrics").iterdir()) == ["loss.tsv"]


def entry(name: str, log: dict[str, Any] | None) -> dict[str, Any]:
    """One finished experiment in ``dvc exp show --json``'s shape, with pretrain's training log when given."""
    metrics: dict[str, Any] = {
        "metrics/knn.json": {"data": {"top1": 0.9, "top5": 1.0, "test_size": 450}},
        "metrics/linear.json": {"data": {"top1": 0.95, "top5": 1.0, "test_size": 450}},
    }
    if log is not None:
        metrics[compare.TRAINING_LOG] = {"data": log}
    data = {"params": {"params.yaml": {"data": {"pretrain": {"sampler": "hucl", "epochs": 60}}}}, "metrics": metrics}
    return {"name": name, "executor": {"state": "success"}, "revs": [{"rev": "a" * 40, "name": name, "data": data, "error": None}]}


def test_compare_labels_a_run_stopped_by_max_steps_and_lists_its_steps_in_the_csv() -> None:
    entries = [
        {"rev": "workspace", "name": None, "data": {}, "error": None, "experiments": None},
        {
            "rev": "b" * 40,
            "name": "main",
            "data": {},
            "error": None,
            "experiments": [
                entry("short", {"loss": 1.0, "step": 23, "steps": 120, "planned_steps": 300}),
                entry("full", {"loss": 1.0, "step": 59, "steps": 300, "planned_steps": 300}),
                entry("old", {"loss": 1.0, "step": 59}),
            ],
        },
    ]
    rows, _ = compare.parse_experiments(entries)
    assert [row.extent for row in rows] == ["stopped at step 120 of 300", "complete", "complete"]
    table = compare.markdown_table(rows, [])
    assert "| Experiment | Dataset | Protocol | Sampler | Pretraining |" in table
    assert "| short | - | - | hucl | stopped at step 120 of 300 |" in table
    csv_lines = compare.csv_table(rows).splitlines()
    assert csv_lines[0].startswith("experiment,rev,baseline,dataset,protocol,pretraining_labels,steps,planned_steps,")
    assert csv_lines[1].startswith("short,aaaaaaa,main,-,-,,120,300,")
    assert csv_lines[3].startswith("old,aaaaaaa,main,-,-,,,")
    complete_only = compare.markdown_table(rows[1:], [])
    assert "Pretraining" not in complete_only


def test_the_report_names_how_far_the_run_went() -> None:
    assert describe_extent({"steps": 120, "planned_steps": 300}, 60) == "stopped at step 120 of 300 (--max-steps)"
    assert describe_extent({"steps": 300, "planned_steps": 300}, 60) == "60 epochs"


def test_the_reports_run_section_says_stopped_at_step_and_where_the_time_and_commit_are_kept(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from hcl_cli.config import PretrainConfig
    from hcl_cli.modality import modality_named
    from hcl_cli.report.markdown import run_section

    record = {"device": {"type": "cpu", "name": "x86_64"}, "steps": 120, "planned_steps": 300}
    sidecar = SimpleNamespace(run=record, epoch=60, world_size=1, versions={}, dataset=None)
    encoder = SimpleNamespace(
        path=tmp_path / "encoder.safetensors",
        sidecar=sidecar,
        config=PretrainConfig(),
        model=SimpleNamespace(arch="small_cnn"),
        modality=modality_named("image"),
    )
    section = run_section(None, encoder, tmp_path, tmp_path / "encoder.safetensors")  # type: ignore[arg-type]
    assert "`hucl`, small_cnn, stopped at step 120 of 300 (--max-steps); labels used" in section
    assert "60 epochs" not in section
    assert f"- **Trained**: on cpu (x86_64); when, on which host and at which commit: `{tmp_path / 'encoder.run.json'}`" in section


def test_compare_s_introduction_and_notes_are_paragraphs_of_80_columns() -> None:
    """The introduction of ``hcl compare``'s table was one line of 885 characters, on the terminal and in OUT.md."""
    entries = [
        {"rev": "workspace", "name": None, "data": {}, "error": None, "experiments": None},
        {"rev": "b" * 40, "name": "main", "data": {}, "error": None, "experiments": [entry("one", None), entry("two", None)]},
    ]
    rows, _ = compare.parse_experiments(entries)
    prose = [line for line in compare.markdown_table(rows, ["x: " + "a reason " * 20]).splitlines() if not line.startswith("|")]
    assert max(len(line) for line in prose) <= 80, prose
    assert sum(len(line) for line in prose) > 885, "the whole introduction is there"
