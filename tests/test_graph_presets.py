"""The graph presets against the papers' graph tables: every preset passes the stages' validation, runs
InfoGraph as HCL's graph code does, and carries the number its table prints (transcribed below as the
papers' text gives the tables: H-SCL Sec. V-C Table II, HCL-OT Sec. VII-B Table V)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from hcl_cli.cli import main
from hcl_cli.config import LinearConfig, PrepareConfig, PretrainConfig
from hcl_cli.presets import CONFIGS, GRAPH_PRESETS, PRESETS, Preset

ROOT = Path(__file__).resolve().parents[1]

H_SCL_TABLE_II = """
Method	MUTAG	ENZYMES	PTC	IMDB-B	IMDB-M
UCL [28]	86.8	50.4	55.3	72.2	49.6
H-UCL [14]	87.2	50.4	57.3	72.8	49.6
SCL	86.9	50.4	55.8	72.4	49.9
H-SCL $(\\beta)$	87.2	50.7	57.7	73.0	50.1
"""
"""hscl-jiang-supervised-hard-negatives.txt, TABLE II ACCURACY ON GRAPH DATASETS."""

HCL_OT_TABLE_V = """
Method MUTAG ENZYMES PTC IMDB-B IMDB-M
InfoGraph [32] 86.8 50.4 55.3 72.2 49.6
HCL [12] 87.2 50.4 57.3 72.8 49.6
Entropic OT, ϵ = 0.05 87.2 51.3 56.8 73.0 49.8
Entropic OT, ϵ = 0.1 88.2 50.6 56.1 72.7 49.8
Entropic OT, ϵ = 0.5 87.5 50.9 55.8 72.1 50.0
Entropic OT, ϵ = 1 87.6 50.3 55.4 72.5 50.0
"""
"""hcl-ot-jiang-optimal-transport.txt, TABLE V ACCURACY ON GRAPH DATASETS."""

COLUMNS = {"MUTAG": "MUTAG", "ENZYMES": "ENZYMES", "PTC": "PTC_MR", "IMDB-B": "IMDB-BINARY", "IMDB-M": "IMDB-MULTI"}
"""The tables' column -> the TU dataset (PTC has 344 graphs in HCL Table 3: PTC_MR)."""


def parse(table: str) -> dict[str, dict[str, str]]:
    """Row label -> {TU dataset: number as printed}: the last five fields of a row are its numbers."""
    header, *rows = table.strip().splitlines()
    columns = [COLUMNS[c] for c in header.split()[1:]]
    return {" ".join(row.split()[:-5]): dict(zip(columns, row.split()[-5:], strict=True)) for row in rows}


TABLE_II = parse(H_SCL_TABLE_II)
TABLE_V = parse(HCL_OT_TABLE_V)
TABLE_II_PRESETS = {"UCL [28]": "ucl", "H-UCL [14]": "hucl", "SCL": "scl", "H-SCL $(\\beta)$": "hscl"}
TABLE_V_PRESETS = {
    "InfoGraph [32]": "infograph",
    "HCL [12]": "hcl",
    "Entropic OT, ϵ = 0.05": "ot-eps0.05",
    "Entropic OT, ϵ = 0.1": "ot-eps0.1",
    "Entropic OT, ϵ = 0.5": "ot-eps0.5",
    "Entropic OT, ϵ = 1": "ot-eps1",
}
KEYS = {"MUTAG": "mutag", "ENZYMES": "enzymes", "PTC_MR": "ptc", "IMDB-BINARY": "imdb-b", "IMDB-MULTI": "imdb-m"}


def by_name(name: str) -> Preset:
    return PRESETS[name]


@pytest.mark.parametrize("preset", GRAPH_PRESETS, ids=[p.name for p in GRAPH_PRESETS])
def test_every_graph_preset_passes_the_stages_validation_and_runs_infograph_as_the_code(preset: Preset) -> None:
    groups = preset.groups()
    assert set(groups) == {"prepare", "pretrain", "linear", "knn"}
    assert groups["knn"]["k"] == 20, "k 200 is larger than MUTAG's 141 train graphs"
    for group, values in preset.values.items():
        assert set(values) <= set(CONFIGS[group].param_names()), "a preset sets parameters, never paths or devices"
    prepare, pretrain, linear = PrepareConfig(**groups["prepare"]), PretrainConfig(**groups["pretrain"]), LinearConfig(**groups["linear"])
    assert pretrain.ignored_changes() == [], "every sampler option a preset sets away from its default is read by its sampler"
    assert (prepare.dataset, prepare.name) == ("tu", preset.dataset)
    assert (pretrain.arch, pretrain.gin_layers, pretrain.gin_hidden, pretrain.epochs, pretrain.batch_size) == ("gin", 3, 32, 200, 128)
    fig7_official = preset.paper == "UnDiMix" and pretrain.sampler != "ucl"  # Fig. 7 ran HCL's code: its presets say official
    reading = "official" if preset.name.endswith("-official") or fig7_official else "paper"
    assert pretrain.sampler_options["objective"] == "jsd" and pretrain.sampler_options["graph_weights"] == reading
    assert (linear.protocol, linear.svm_folds, linear.svm_inner_folds, linear.svm_repeats) == ("svm", 10, 5, 1)
    assert [float(c) for c in linear.svm_c_grid.split(",")] == [1e-3, 1e-2, 1e-1, 1, 10, 100, 1000]
    if pretrain.sampler in ("hucl", "debiased", "ot"):
        assert pretrain.sampler_options["tau_plus"] == 0.5, "HCL's graph code hard-codes tau+ 0.5; HCL-OT's best tau is 0.5"
    assert preset.note and preset.paper in ("HCL", "H-SCL", "HCL-OT", "UnDiMix")


def test_h_scl_table_ii_every_row_and_dataset_has_its_preset_and_number() -> None:
    assert len(TABLE_II) == 4 and all(len(row) == 5 for row in TABLE_II.values())
    for label, method in TABLE_II_PRESETS.items():
        for dataset, number in TABLE_II[label].items():
            preset = by_name(f"hscl-{KEYS[dataset]}-{method}")
            assert (preset.top1, preset.dataset, preset.where) == (number, dataset, "Table II, Sec. V-C")
            pretrain = preset.groups()["pretrain"]
            assert (pretrain["lr"], pretrain["weight_decay"], pretrain["sampler"]) == (0.01, 0.0, method)
            if method in ("hucl", "hscl"):
                assert pretrain["beta"] == 1.0 and "{1, 2, 10}" in preset.note and "beta 1" in preset.reported


def test_hcl_ot_table_v_every_row_and_dataset_has_its_preset_and_number() -> None:
    assert len(TABLE_V) == 6 and all(len(row) == 5 for row in TABLE_V.values())
    for label, method in TABLE_V_PRESETS.items():
        for dataset, number in TABLE_V[label].items():
            preset = by_name(f"hclot-{KEYS[dataset]}-{method}")
            assert (preset.top1, preset.dataset, preset.where) == (number, dataset, "Table V, Sec. VII-B")
            pretrain = preset.groups()["pretrain"]
            assert (pretrain["lr"], pretrain["weight_decay"]) == (0.01, 0.0)
            if method.startswith("ot-"):
                epsilon = float(label.rpartition("= ")[2])
                assert (pretrain["sampler"], pretrain["ot_epsilon"], pretrain["ot_iterations"]) == ("ot", epsilon, 1000)
                assert "reg" in preset.note and f"epsilon {epsilon:g}" in preset.reported
            else:
                assert pretrain["sampler"] == {"infograph": "ucl", "hcl": "hucl"}[method]


def test_the_shared_rows_of_the_two_tables_are_one_experiment() -> None:
    """HCL-OT's InfoGraph and HCL rows are H-SCL's UCL and H-UCL rows: the same numbers and the same values."""
    for dataset in KEYS.values():
        for hscl, hclot in (("ucl", "infograph"), ("hucl", "hcl")):
            first, second = by_name(f"hscl-{dataset}-{hscl}"), by_name(f"hclot-{dataset}-{hclot}")
            assert first.top1 == second.top1 and first.groups() == second.groups()


def test_hcl_fig3_has_every_dataset_and_beta_with_the_official_codes_mutag_figures() -> None:
    fig3 = [p for p in GRAPH_PRESETS if p.paper == "HCL" and not p.name.endswith("-official")]
    datasets = ["MUTAG", "PTC_MR", "PROTEINS", "DD", "ENZYMES", "IMDB-BINARY", "IMDB-MULTI", "REDDIT-BINARY"]
    assert [(p.dataset, p.groups()["pretrain"]["beta"]) for p in fig3] == [(d, b) for d in datasets for b in (0.0, 1.0, 2.0, 10.0)]
    for preset in fig3:
        pretrain = preset.groups()["pretrain"]
        assert (pretrain["lr"], pretrain["weight_decay"], pretrain["sampler"]) == (1e-3, 1e-6, "hucl")
        assert preset.top1 == "figure only" and preset.where == "Fig. 3, Sec. 5.2"
    assert [by_name(f"hcl-mutag-beta{b}").reported for b in ("0", "1", "2", "10")] == [
        "official code, 10 seeds: 87.81 ± 1.46",
        "official code, 10 seeds: 87.49 ± 1.50",
        "official code, 10 seeds: 87.13 ± 1.75",
        "official code, 10 seeds: 87.55 ± 2.30",
    ]
    assert "not plain InfoGraph" in by_name("hcl-mutag-beta0").note and "not plain InfoGraph" not in by_name("hcl-mutag-beta1").note
    assert "3.2%" in by_name("hcl-enzymes-beta1").note and "2.4%" in by_name("hcl-reddit-b-beta1").note


def test_the_notes_say_which_reading_produced_the_papers_numbers() -> None:
    for name in ("hscl-mutag-hucl", "hclot-ptc-hcl", "hcl-dd-beta2"):
        assert "graph_weights=official" in by_name(name).note and f"{name}-official the official one" in by_name(name).note
        assert "This preset trains the official reading, the one that produced the number" in by_name(f"{name}-official").note
    assert "graph_weights" not in by_name("hscl-mutag-ucl").note


OFFICIAL_ROWS = [
    *(
        f"hcl-{dataset}-beta{beta}"
        for dataset in ("mutag", "ptc", "proteins", "dd", "enzymes", "imdb-b", "imdb-m", "reddit-b")
        for beta in ("0", "1", "2", "10")
    ),
    *(f"hscl-{dataset}-hucl" for dataset in KEYS.values()),
    *(f"hclot-{dataset}-hcl" for dataset in KEYS.values()),
]
"""Every row whose number HCL's graph code produced: HCL Fig. 3, H-SCL Table II's H-UCL and HCL-OT Table V's HCL."""


def test_every_row_the_official_code_produced_has_a_preset_in_its_reading() -> None:
    official = {p.name for p in GRAPH_PRESETS if p.name.endswith("-official")}
    assert official == {f"{name}-official" for name in OFFICIAL_ROWS} and len(official) == 32 + 5 + 5
    for name in OFFICIAL_ROWS:
        paper, twin = by_name(name), by_name(f"{name}-official")
        assert twin.groups()["pretrain"] == {**paper.groups()["pretrain"], "graph_weights": "official"}
        assert {group: values for group, values in twin.groups().items() if group != "pretrain"} == {
            group: values for group, values in paper.groups().items() if group != "pretrain"
        }
        assert (twin.top1, twin.reported, twin.where, twin.dataset) == (paper.top1, paper.reported, paper.where, paper.dataset)
        assert list(PRESETS).index(twin.name) == list(PRESETS).index(name) + 1, "each twin follows its paper reading"
    assert not any(p.name.endswith("-official") for p in GRAPH_PRESETS if p.values["pretrain"]["sampler"] not in ("hucl", "debiased"))


def test_hcl_preset_writes_a_graph_preset_that_the_stages_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    with pytest.raises(SystemExit) as exited:
        main(["preset", "hclot-ptc-ot-eps0.1", "--params", str(tmp_path / "params.yaml")])
    assert exited.value.code == 0, capsys.readouterr().err
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert (params["prepare"]["dataset"], params["prepare"]["name"]) == ("tu", "PTC_MR")
    assert (params["pretrain"]["sampler"], params["pretrain"]["ot_epsilon"], params["linear"]["protocol"]) == ("ot", 0.1, "svm")
    assert params["knn"]["k"] == 20
    PretrainConfig(**params["pretrain"])


def test_a_figure_only_preset_says_so_without_a_percent_sign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["preset", "hcl-mutag-beta1-official", "--params", str(tmp_path / "params.yaml")])
    out = capsys.readouterr().out
    assert exited.value.code == 0 and "HCL Fig. 3, Sec. 5.2, MUTAG: top-1: figure only)" in out and "only%" not in out
    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["pretrain"]["graph_weights"] == "official"


def test_undimix_fig7_has_its_three_rows_on_six_datasets_with_hcl_as_fig3s_official_beta1() -> None:
    """UnDiMix Fig. 7 (Sec. 4.3, App. A): InfoGraph, HCL at beta 1 in the official reading and UnDiMix in JSD_hard's place,
    App. A's hyperparameters, figure only, each note naming the caption's 5 runs against App. A's 10 trials."""
    fig7 = [p for p in GRAPH_PRESETS if p.paper == "UnDiMix"]
    datasets = ["MUTAG", "PTC_MR", "ENZYMES", "IMDB-BINARY", "IMDB-MULTI", "PROTEINS"]
    samplers = ["ucl", "hucl", "undimix"]
    assert [(p.dataset, p.groups()["pretrain"]["sampler"]) for p in fig7] == [(d, s) for d in datasets for s in samplers]
    for preset in fig7:
        pretrain = preset.groups()["pretrain"]
        assert (pretrain["lr"], pretrain["weight_decay"], pretrain["epochs"], pretrain["batch_size"]) == (1e-3, 1e-6, 200, 128)
        assert (pretrain["gin_layers"], pretrain["gin_hidden"], preset.groups()["linear"]["protocol"]) == (3, 32, "svm")
        assert preset.top1 == "figure only" and preset.where == "Fig. 7, Sec. 4.3" and not preset.reported
        assert all(words in preset.note for words in ("Sec. 4.3", "App. A", "5 independent runs", "10 experimental trials"))
    for key in ("mutag", "ptc", "enzymes", "imdb-b", "imdb-m", "proteins"):
        assert by_name(f"undimix-{key}-hcl").groups() == by_name(f"hcl-{key}-beta1-official").groups()
        undimix = by_name(f"undimix-{key}-undimix").groups()["pretrain"]
        assert (undimix["graph_weights"], undimix["undimix_learned"], undimix["undimix_uncertainty"]) == ("official", True, "literal")


def test_the_fig7_methods_pair_with_the_fig3_runs() -> None:
    """``hcl table --methods fig7``: its HCL row is Fig. 3's fig3-beta1@official (same name, same values: its runs serve)."""
    from hcl_cli.errors import UsageError
    from hcl_cli.tables.methods import expand, method

    assert expand(["fig7"]) == ["fig7-infograph", "fig3-beta1@official", "fig7-undimix"]
    assert method("ptc", "fig7-hcl").pretrain == method("ptc", "fig3-beta1@official").pretrain
    row = method("proteins", "fig7-undimix")
    assert row.pretrain == by_name("undimix-proteins-undimix").values["pretrain"]
    assert row.pretrain["sampler"] == "undimix" and row.paper == {"UnDiMix Fig. 7": "figure only"}
    for dataset, name in (("dd", "fig7-undimix"), ("mutag", "fig7-ot")):
        with pytest.raises(UsageError, match="UnDiMix Fig. 7 has no"):
            method(dataset, name)


def test_the_undimix_graphs_page_names_proteins_as_the_dataset_h_scl_and_hcl_ot_did_not_run() -> None:
    """UnDiMix Fig. 7's six datasets are the five of H-SCL Table II and HCL-OT Table V (the datasets with a number there)
    and PROTEINS, which neither of those papers ran (its number is HCL Fig. 3's alone)."""
    from docs_pages import page

    ran = {p.dataset for p in GRAPH_PRESETS if p.paper in ("H-SCL", "HCL-OT")}
    fig7 = {p.dataset for p in GRAPH_PRESETS if p.paper == "UnDiMix"}
    assert fig7 - ran == {"PROTEINS"} and len(ran & fig7) == 5
    text = " ".join(page("undimix-graphs").split())
    assert "and proteins, which neither of them ran" in text and "that H-SCL and HCL-OT ran too" not in text
