"""The TU reader (folder and archive, every malformed-file case), the node features, the prepared files, the batches."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch
from test_graph_step import write_toy_tu

from hcl_cli.cli import main
from hcl_cli.errors import HclError, InputError, UsageError
from hcl_cli.graph.batch import GraphBatcher
from hcl_cli.graph.card import CARD_FILE, is_graph_folder
from hcl_cli.graph.data import build_dataset, load_prepared_graphs, prepare_tu, save_prepared_graphs
from hcl_cli.graph.tu import read_tu_files

NAME = "TOY"
# Three graphs: a path 1-2-3, an edge 4-5, a triangle 6-7-8; every edge listed both ways, as TU files do.
EDGES = [(1, 2), (2, 1), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6), (7, 8), (8, 7), (6, 8), (8, 6)]
TOY = {
    "A": "".join(f"{u}, {v}\n" for u, v in EDGES),
    "graph_indicator": "1\n1\n1\n2\n2\n3\n3\n3\n",
    "graph_labels": "-1\n1\n1\n",
    "node_labels": "2\n3\n2\n4\n2\n3\n3\n2\n",
}


def write_tu(folder: Path, files: dict[str, str], name: str = NAME) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for kind, text in files.items():
        (folder / f"{name}_{kind}.txt").write_text(text)
    return folder


def write_archive(path: Path, files: dict[str, str], prefix: str = f"tu/{NAME}", name: str = NAME) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for kind, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{prefix}/{name}_{kind}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_folder_reads_as_the_format_says(tmp_path: Path) -> None:
    graphs = read_tu_files(write_tu(tmp_path, TOY), NAME)
    assert graphs.num_graphs == 3 and graphs.num_nodes == 8
    assert graphs.node_graph.tolist() == [0, 0, 0, 1, 1, 2, 2, 2]
    assert graphs.edge_index.t().tolist() == sorted([u - 1, v - 1] for u, v in EDGES)
    assert graphs.undirected and graphs.duplicates_removed == 0 and graphs.self_loops_removed == 0
    assert set(graphs.files) == {f"{NAME}_{kind}.txt" for kind in TOY}


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_an_a_file_that_lists_no_edge_is_refused(tmp_path: Path, text: str) -> None:
    """A 0-byte TOY_A.txt (a truncated copy) was taken silently as graphs without edges (issue 54)."""
    with pytest.raises(InputError, match=r"TOY_A.txt is empty: it lists no edge, so every graph would be its nodes alone"):
        read_tu_files(write_tu(tmp_path, {**TOY, "A": text}), NAME)


@pytest.mark.parametrize("prefix", [f"tu/{NAME}", NAME])
def test_the_archive_reads_as_the_folder(tmp_path: Path, prefix: str) -> None:
    from_folder, folder_card = prepare_tu(write_tu(tmp_path / "folder", TOY), NAME)
    from_archive, archive_card = prepare_tu(write_archive(tmp_path / "tu.tar.gz", TOY, prefix), NAME)
    for field in ("x", "edge_index", "node_ptr", "edge_ptr", "labels"):
        assert torch.equal(getattr(from_folder, field), getattr(from_archive, field))
    assert folder_card.files == archive_card.files


@pytest.mark.parametrize("layout", ["", NAME, f"{NAME}/raw", f"tu/{NAME}"])
def test_a_folder_may_hold_the_files_in_the_usual_layouts(tmp_path: Path, layout: str) -> None:
    write_tu(tmp_path / layout, TOY)
    assert read_tu_files(tmp_path, NAME).num_graphs == 3


def test_repeated_edges_and_self_loops_are_dropped_as_torch_geometric_does(tmp_path: Path) -> None:
    four_times = "".join(f"{u}, {v}\n{v}, {u}\n" for u, v in EDGES) + "6, 6\n"
    files = {key: value for key, value in TOY.items() if key != "node_labels"}
    once, _ = prepare_tu(write_tu(tmp_path / "once", files), NAME)
    dataset, card = prepare_tu(write_tu(tmp_path / "repeated", {**files, "A": four_times}), NAME)
    assert torch.equal(dataset.edge_index, once.edge_index)
    assert torch.equal(dataset.x, once.x)  # one-hot degrees count each neighbour once
    assert (card.duplicates_removed, card.self_loops_removed) == (len(EDGES), 1)
    assert card.avg_edges == pytest.approx(6 / 3) and card.num_edges == len(EDGES)


def test_the_card_counts_the_dataset(tmp_path: Path) -> None:
    _, card = prepare_tu(write_tu(tmp_path, TOY), NAME)
    assert card.classes == ["-1", "1"] and card.class_counts == [1, 2]
    assert (card.num_graphs, card.num_nodes, card.avg_nodes, card.avg_edges) == (3, 8, round(8 / 3, 4), 2.0)
    assert card.features == "node_labels" and card.feature_dim == 3


# Each malformed file: the change to TOY, and what the one-line error must say (file and line).
MALFORMED = {
    "edge out of range": ({"A": TOY["A"] + "8, 9\n"}, "TOY_A.txt line 13: node id 9 is out of range 1..8"),
    "edge id zero": ({"A": "0, 1\n" + TOY["A"]}, "TOY_A.txt line 1: node id 0 is out of range 1..8"),
    "edge across graphs": ({"A": TOY["A"] + "3, 4\n"}, "TOY_A.txt line 13: edge 3, 4 joins graph 1 to graph 2"),
    "three values": ({"A": "1, 2, 3\n" + TOY["A"]}, "TOY_A.txt line 1: expected 2 comma-separated values, found 3"),
    "not an integer": ({"A": "1, 2\n2, x\n"}, "TOY_A.txt line 2: 'x' is not an integer"),
    "a float id": ({"A": "1, 2.0\n"}, "TOY_A.txt line 1: '2.0' is not an integer"),
    "blank line inside": ({"graph_labels": "-1\n\n1\n"}, "TOY_graph_labels.txt line 2: '' is not an integer"),
    "indicator starts at 2": (
        {"graph_indicator": "2\n2\n2\n3\n3\n4\n4\n4\n"},
        "TOY_graph_indicator.txt line 1: graph ids must start at 1, found 2",
    ),
    "indicator decreases": (
        {"graph_indicator": "1\n1\n2\n1\n2\n3\n3\n3\n"},
        "TOY_graph_indicator.txt line 4: graph id 1 after 2: graph ids must not decrease",
    ),
    "indicator gap": (
        {"graph_indicator": "1\n1\n1\n3\n3\n4\n4\n4\n", "graph_labels": "1\n1\n1\n1\n"},
        "TOY_graph_indicator.txt line 4: graph id 3 after 1: graphs 2..2 would have no nodes",
    ),
    "indicator swapped pair": (
        {"graph_indicator": "1\n1\n3\n2\n2\n3\n3\n3\n"},
        "TOY_graph_indicator.txt line 3: graph id 3 after 1: graph 2 comes later (line 4): the nodes must be listed graph by graph",
    ),
    "indicator empty": ({"graph_indicator": ""}, "TOY_graph_indicator.txt is empty"),
    "too few graph labels": ({"graph_labels": "1\n1\n"}, "TOY_graph_labels.txt has 2 lines, but"),
    "too many node labels": ({"node_labels": TOY["node_labels"] + "1\n"}, "TOY_node_labels.txt has 9 lines, but"),
    "ragged node labels": (
        {"node_labels": "1, 2\n" * 3 + "1\n" + "1, 2\n" * 4},
        "TOY_node_labels.txt line 4: expected 2 comma-separated values (as on line 1), found 1",
    ),
    "attribute not finite": ({"node_attributes": "0.5\n" * 5 + "nan\n" + "1\n1\n"}, "TOY_node_attributes.txt line 6: not a finite number"),
    "attribute not a number": ({"node_attributes": "0.5\n" * 6 + "a.b\n1\n"}, "TOY_node_attributes.txt line 7: 'a.b' is not a number"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_file_is_one_line_naming_file_and_line(tmp_path: Path, case: str) -> None:
    change, message = MALFORMED[case]
    for source in (write_tu(tmp_path / "folder", {**TOY, **change}), write_archive(tmp_path / "tu.tar.gz", {**TOY, **change})):
        with pytest.raises(HclError) as raised:
            read_tu_files(source, NAME)
        text = str(raised.value)
        assert message in text and "\n" not in text
        assert isinstance(raised.value, InputError), "a malformed input file is the user's to fix: exit 2 (docs/errors.md)"


def test_a_utf8_byte_order_mark_is_read_as_nothing(tmp_path: Path) -> None:
    plain = read_tu_files(write_tu(tmp_path / "plain", TOY), NAME)
    marked = read_tu_files(write_tu(tmp_path / "marked", {kind: "\ufeff" + text for kind, text in TOY.items()}), NAME)
    for field in ("edge_index", "node_graph", "graph_labels", "node_labels"):
        assert torch.equal(getattr(plain, field), getattr(marked, field))


def test_edges_listed_one_way_are_kept_and_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_way = "".join(f"{u}, {v}\n" for u, v in EDGES if (u, v) not in ((2, 1), (8, 7)))
    graphs = read_tu_files(write_tu(tmp_path / "raw", {**TOY, "A": one_way}), NAME)
    assert not graphs.undirected and graphs.edge_index.shape[1] == len(EDGES) - 2, "kept as listed, no reverse added"
    (note,) = graphs.notes
    assert "TOY_A.txt lists 2 of its 10 edges in one direction only (the first on line 1: 1, 2)" in note
    assert read_tu_files(write_tu(tmp_path / "both", TOY), NAME).notes == ()
    larger = write_toy_tu(tmp_path / "larger")
    edges = (larger / f"{NAME}_A.txt").read_text().splitlines(keepends=True)
    (larger / f"{NAME}_A.txt").write_text("".join(edges[:1] + edges[2:]))  # line 2 was line 1's reverse
    with pytest.raises(SystemExit) as exited:
        main(["prepare", "--dataset", "tu", "--name", NAME, "--path", str(larger), "--out", str(tmp_path / "prepared")])
    assert exited.value.code in (0, None)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "one direction only" in line]
    assert len(warnings) == 1 and warnings[0].startswith("hcl prepare: warning: ")


def test_a_single_class_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HclError, match="every graph the class 1: classification needs at least 2 classes"):
        prepare_tu(write_tu(tmp_path, {**TOY, "graph_labels": "1\n1\n1\n"}), NAME)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    files = {key: value for key, value in TOY.items() if key != "graph_labels"}
    with pytest.raises(HclError, match=r"TOY_graph_labels\.txt not found"):
        read_tu_files(write_tu(tmp_path / "folder", files), NAME)
    with pytest.raises(HclError, match=r"tu\.tar\.gz:tu/TOY/TOY_graph_labels\.txt not found"):
        read_tu_files(write_archive(tmp_path / "tu.tar.gz", files), NAME)


def test_a_missing_dataset_lists_what_the_source_holds(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "tu.tar.gz", TOY)
    with pytest.raises(HclError, match=r"no TU dataset MUTAG .*it holds TOY"):
        read_tu_files(archive, "MUTAG")
    with pytest.raises(HclError, match=r"no TU dataset MUTAG .*it holds TOY"):
        read_tu_files(write_tu(tmp_path / "folder" / NAME, TOY).parent, "MUTAG")


def test_bad_sources_and_names_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or folder"):
        read_tu_files(tmp_path / "absent.tar.gz", NAME)
    for name in ("", "..", "a/b"):
        with pytest.raises(UsageError, match="invalid TU dataset name"):
            read_tu_files(tmp_path, name)


def test_links_in_the_archive_are_refused_and_nothing_is_extracted(tmp_path: Path) -> None:
    archive = tmp_path / "tu.tar.gz"
    write_archive(archive, {key: value for key, value in TOY.items() if key != "A"})
    with tarfile.open(archive, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(archive, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data))
        link = tarfile.TarInfo(f"tu/{NAME}/{NAME}_A.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(HclError, match=r"TOY_A\.txt: a link or special member"):
        read_tu_files(archive, NAME)
    assert sorted(tmp_path.rglob("*")) == before


def test_a_corrupt_archive_is_one_line(tmp_path: Path) -> None:
    archive = tmp_path / "tu.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    with pytest.raises(HclError, match="not a readable zip or tar archive"):
        read_tu_files(archive, NAME)


def test_node_labels_are_one_hot_per_column(tmp_path: Path) -> None:
    two_columns = "".join(f"{a}, {b}\n" for a, b in [(1, 0), (2, 5), (1, 5), (3, 6), (1, 0), (2, 0), (2, 5), (3, 6)])
    dataset, card = prepare_tu(write_tu(tmp_path, {**TOY, "node_labels": two_columns}), NAME)
    assert card.feature_dim == 3 + 7  # labels 1..3 shifted to 0..2; 0..6
    assert dataset.x[1].tolist() == [0, 1, 0] + [0, 0, 0, 0, 0, 1, 0]
    assert dataset.x.sum(dim=1).tolist() == [2.0] * 8


def test_a_node_label_that_would_make_huge_one_hot_features_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    labels = TOY["node_labels"].split("\n")
    labels[5] = "2000000000"
    with pytest.raises(HclError) as raised:
        prepare_tu(write_tu(tmp_path, {**TOY, "node_labels": "\n".join(labels)}), NAME)
    text = str(raised.value)
    assert text.startswith("TOY_node_labels.txt line 6: node label 2000000000 makes the one-hot node features") and "\n" not in text


def test_node_attributes_come_first_when_asked_for(tmp_path: Path) -> None:
    attributes = "".join(f"{i / 2}, {-i}\n" for i in range(8))
    files = write_tu(tmp_path, {**TOY, "node_attributes": attributes})
    dataset, card = prepare_tu(files, NAME, node_attributes=True)
    assert card.features == "node_attributes+node_labels" and card.feature_dim == 2 + 3
    assert dataset.x[3, :2].tolist() == [1.5, -3.0]
    assert torch.equal(dataset.x[:, 2:], prepare_tu(files, NAME)[0].x)
    with pytest.raises(HclError, match="has no node attributes"):
        prepare_tu(write_tu(tmp_path / "plain", TOY), NAME, node_attributes=True)


def test_unlabelled_nodes_get_their_one_hot_degree(tmp_path: Path) -> None:
    files = {key: value for key, value in TOY.items() if key != "node_labels"}
    dataset, card = prepare_tu(write_tu(tmp_path, files), NAME)
    assert card.features == "one_hot_degree" and card.max_degree == 2 and card.feature_dim == 3
    assert dataset.x.argmax(dim=1).tolist() == [1, 2, 1, 1, 1, 2, 2, 2]


def star_files(leaves: int) -> dict[str, str]:
    """One star with ``leaves`` leaves (hub degree ``leaves``) and one single edge: two graphs."""
    edges = [(1, leaf) for leaf in range(2, leaves + 2)]
    a = "".join(f"{u}, {v}\n{v}, {u}\n" for u, v in edges) + f"{leaves + 2}, {leaves + 3}\n{leaves + 3}, {leaves + 2}\n"
    return {"A": a, "graph_indicator": "1\n" * (leaves + 1) + "2\n2\n", "graph_labels": "0\n1\n"}


def test_the_degree_is_normalised_from_a_maximum_degree_of_1000(tmp_path: Path) -> None:
    below, below_card = prepare_tu(write_tu(tmp_path / "999", star_files(999)), NAME)
    assert below_card.features == "one_hot_degree" and below.x.shape == (1002, 1000)
    dataset, card = prepare_tu(write_tu(tmp_path / "1000", star_files(1000)), NAME)
    degree = torch.tensor([1000.0] + [1.0] * 1000 + [1.0, 1.0], dtype=torch.float64)
    assert card.features == "normalized_degree" and card.feature_dim == 1 and card.max_degree == 1000
    assert card.degree_mean == pytest.approx(float(degree.mean())) and card.degree_std == pytest.approx(float(degree.std(correction=1)))
    assert torch.allclose(dataset.x[:, 0].double(), (degree - degree.mean()) / degree.std(), atol=1e-6)


def test_the_dataset_equals_torch_geometric_tudataset(tmp_path: Path) -> None:
    torch_geometric = pytest.importorskip("torch_geometric.datasets")
    files = {**TOY, "A": TOY["A"] + "1, 2\n1, 1\n"}
    write_tu(tmp_path / NAME / NAME / "raw", files)
    reference = torch_geometric.TUDataset(str(tmp_path / NAME), NAME)
    dataset, _ = prepare_tu(tmp_path / NAME / NAME / "raw", NAME)
    assert torch.equal(reference._data.x, dataset.x)
    assert torch.equal(reference._data.y, dataset.labels)
    per_graph = [g.edge_index + dataset.node_ptr[i] for i, g in enumerate(reference)]
    assert torch.equal(torch.cat(per_graph, dim=1), dataset.edge_index)


def test_prepared_graphs_round_trip_and_a_changed_card_is_refused(tmp_path: Path) -> None:
    dataset, card = prepare_tu(write_tu(tmp_path / "source", TOY), NAME)
    folder = tmp_path / "prepared"
    save_prepared_graphs(folder, dataset, card)
    loaded, loaded_card = load_prepared_graphs(folder)
    assert loaded_card == card and is_graph_folder(folder)
    for field in ("x", "edge_index", "node_ptr", "edge_ptr", "labels"):
        assert torch.equal(getattr(loaded, field), getattr(dataset, field))
    values = json.loads((folder / CARD_FILE).read_text())
    (folder / CARD_FILE).write_text(json.dumps({**values, "num_graphs": 4}))
    with pytest.raises(HclError, match="class_counts"):
        load_prepared_graphs(folder)
    (folder / CARD_FILE).write_text(json.dumps({**values, "avg_nodes": 3.0}))
    with pytest.raises(HclError, match="is not the card"):
        load_prepared_graphs(folder)
    (folder / CARD_FILE).write_text(json.dumps({**values, "modality": None}))
    with pytest.raises(HclError, match="not a graph dataset's card"):
        load_prepared_graphs(folder)
    assert not is_graph_folder(folder)


def test_inconsistent_tensors_are_refused_on_load(tmp_path: Path) -> None:
    dataset, card = prepare_tu(write_tu(tmp_path / "source", TOY), NAME)
    moved = dataset.edge_index.clone()
    moved[1, 0] = 5  # node 0's first edge now reaches graph 3
    broken = type(dataset)(dataset.x, moved, dataset.node_ptr, dataset.edge_ptr, dataset.labels)
    save_prepared_graphs(tmp_path / "prepared", broken, card)
    with pytest.raises(HclError, match="an edge lies outside"):
        load_prepared_graphs(tmp_path / "prepared")


def test_a_batch_is_the_graphs_asked_for_in_order(tmp_path: Path) -> None:
    dataset, _ = prepare_tu(write_tu(tmp_path, TOY), NAME)
    batch = GraphBatcher(dataset).batch([2, 0])
    assert batch.batch.tolist() == [0, 0, 0, 1, 1, 1] and batch.ptr.tolist() == [0, 3, 6]
    assert torch.equal(batch.x, torch.cat([dataset.x[5:8], dataset.x[0:3]]))
    assert sorted(batch.edge_index.t().tolist()) == sorted([[0, 1], [1, 0], [1, 2], [2, 1], [0, 2], [2, 0], [3, 4], [4, 3], [4, 5], [5, 4]])
    assert batch.labels.tolist() == [1, 0] and batch.indices.tolist() == [2, 0]


def test_batches_equal_torch_geometric_batch(tmp_path: Path) -> None:
    pyg_data = pytest.importorskip("torch_geometric.data")
    generator = torch.Generator().manual_seed(0)
    sizes = torch.randint(1, 9, (40,), generator=generator).tolist()
    graphs, edges, labels, first = [], [], [], 1
    for g, n in enumerate(sizes):
        pairs = [(u, v) for u in range(n) for v in range(n) if u != v and torch.rand(1, generator=generator) < 0.4]
        edges += [(first + u, first + v) for u, v in pairs]
        graphs += [g + 1] * n
        labels.append(g % 3)
        first += n
    files = {
        "A": "".join(f"{u}, {v}\n" for u, v in edges),
        "graph_indicator": "".join(f"{g}\n" for g in graphs),
        "graph_labels": "".join(f"{y}\n" for y in labels),
        "node_labels": "".join(f"{int(torch.randint(0, 5, (1,), generator=generator))}\n" for _ in graphs),
    }
    dataset, _ = build_dataset(read_tu_files(write_tu(tmp_path, files), NAME))
    data = [
        pyg_data.Data(
            x=dataset.x[dataset.node_ptr[g] : dataset.node_ptr[g + 1]],
            edge_index=dataset.edge_index[:, dataset.edge_ptr[g] : dataset.edge_ptr[g + 1]] - dataset.node_ptr[g],
            y=dataset.labels[g : g + 1],
        )
        for g in range(dataset.num_graphs)
    ]
    order = torch.randperm(dataset.num_graphs, generator=generator)[:17]
    ours = GraphBatcher(dataset).batch(order)
    reference = pyg_data.Batch.from_data_list([data[i] for i in order])
    for ours_tensor, reference_tensor in [
        (ours.x, reference.x),
        (ours.edge_index, reference.edge_index),
        (ours.batch, reference.batch),
        (ours.ptr, reference.ptr),
        (ours.labels, reference.y),
    ]:
        assert torch.equal(ours_tensor, reference_tensor)
