"""The graph modality's pieces: one training step under every sampler, the epoch's batches, the encoder artifact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import HclError, UsageError
from hcl_cli.graph.data import prepare_tu
from hcl_cli.graph.encoder import load_graph_encoder, save_graph_encoder
from hcl_cli.graph.modality import GRAPHS, GraphSamples
from hcl_cli.graph.prepared import write_prepared_graphs
from hcl_cli.graph.step import build_graph_training, check_graph_training
from hcl_cli.objectives.registry import SAMPLERS, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.optimizer import OptimizerSettings
from hcl_cli.training.loop import epoch_order_on, read_results


def write_toy_tu(folder: Path, name: str = "TOY", graphs: int = 40, seed: int = 0) -> Path:
    """A TU-format dataset of ``graphs`` graphs of 4-8 nodes, in 2 classes: class 0 mostly paths, class 1 mostly cycles
    with a chord (a quarter of each the other shape), node labels 0..2 drawn with overlapping class-dependent odds.
    Returns the folder holding ``NAME_*.txt``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    edges, indicator, node_labels, graph_labels = [], [], [], []
    first = 1
    for graph in range(graphs):
        label = graph % 2
        nodes = int(rng.integers(4, 9))
        cycle = label if rng.random() > 0.25 else 1 - label
        pairs = [(i, i + 1) for i in range(nodes - 1)] + ([(nodes - 1, 0), (0, nodes // 2)] if cycle else [])
        for a, b in pairs:
            edges += [(first + a, first + b), (first + b, first + a)]
        indicator += [graph + 1] * nodes
        node_labels += rng.choice(3, size=nodes, p=[0.45, 0.3, 0.25] if label else [0.25, 0.3, 0.45]).tolist()
        graph_labels.append(1 if label else -1)
        first += nodes
    (folder / f"{name}_A.txt").write_text("".join(f"{a}, {b}\n" for a, b in edges))
    (folder / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (folder / f"{name}_node_labels.txt").write_text("".join(f"{n}\n" for n in node_labels))
    (folder / f"{name}_graph_labels.txt").write_text("".join(f"{y}\n" for y in graph_labels))
    return folder


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    dataset, card = prepare_tu(write_toy_tu(root / "raw"), "TOY")
    folder = root / "prepared"
    folder.mkdir()
    write_prepared_graphs(folder, dataset, card, test_fraction=0.25, seed=0)
    return folder


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_every_sampler_trains_one_step_on_a_graph_batch(prepared: Path, sampler: str) -> None:
    samples, labels = GRAPHS.load_samples(prepared, ["train", "test"])
    torch.manual_seed(0)
    model, step = build_graph_training(sampler, GRAPHS.load_card(prepared).feature_dim, 8, 2, OptimizerSettings(), torch.device("cpu"))
    options = SamplerOptions.resolve(lookup(sampler), {"objective": "jsd"})
    check_graph_training(sampler, options, queue_size=0, world_size=1)
    before = [p.detach().clone() for p in model.parameters()]
    index = torch.arange(12)
    (result,) = read_results([step(samples[index], labels[index], options)])
    assert result.finite and result.loss != 0.0
    assert result.same_label_pairs >= samples[index].x.shape[0], "every node has at least its own graph as a positive"
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters())), "Adam moved the weights"


def test_a_queue_and_torchrun_are_refused_before_training() -> None:
    options = SamplerOptions.resolve(lookup("hucl"), {})
    with pytest.raises(UsageError, match="--queue-size 0"):
        check_graph_training("hucl", options, queue_size=4, world_size=1)
    with pytest.raises(UsageError, match="one process"):
        check_graph_training("hucl", options, queue_size=0, world_size=2)
    with pytest.raises(UsageError, match="--objective jsd"):
        check_graph_training("hucl", SamplerOptions.resolve(lookup("hucl"), {"objective": "nce"}), queue_size=0, world_size=1)


def test_a_graph_epoch_keeps_its_last_batch_unless_it_holds_one_graph() -> None:
    context = DistributedContext(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    batches = context.shard_batches(torch.arange(188), 128, keep_last=True)
    assert [len(b) for b in batches] == [128, 60], "MUTAG at batch 128: 2 steps, as the official DataLoader"
    assert [len(b) for b in context.shard_batches(torch.arange(129), 128, keep_last=True)] == [128], "a 1-graph tail is dropped"
    assert context.steps_per_epoch(188, 128, keep_last=True) == 2 and context.steps_per_epoch(188, 128) == 1
    assert torch.cat(list(batches)).tolist() == list(range(188))


def test_the_split_is_stratified_disjoint_and_seeded(prepared: Path) -> None:
    card = GRAPHS.load_card(prepared)
    assert card.counts == {"train": 30, "test": 10} and card.seed == 0
    train, train_labels = GRAPHS.load_samples(prepared, ["train"])
    test, test_labels = GRAPHS.load_samples(prepared, ["test"])
    assert isinstance(train, GraphSamples) and not set(train.indices.tolist()) & set(test.indices.tolist())
    assert torch.bincount(test_labels).tolist() == [5, 5]
    assert torch.equal(GRAPHS.raw_features(test).sum(1), test[torch.arange(10)].ptr.diff().float()), "one-hot labels sum to the node count"


def test_the_graph_encoder_round_trips_and_a_tampered_sidecar_is_one_line(prepared: Path, tmp_path: Path) -> None:
    samples, _ = GRAPHS.load_samples(prepared, ["test"])
    torch.manual_seed(0)
    model, _ = build_graph_training("ucl", GRAPHS.load_card(prepared).feature_dim, 8, 2, OptimizerSettings(), torch.device("cpu"))
    path = tmp_path / "encoder.safetensors"
    save_graph_encoder(path, model, {"config": {"sampler": "ucl"}, "epoch": 1, "seed": 0, "dataset": "TOY"})
    loaded, sidecar = load_graph_encoder(path)
    assert (sidecar.arch, sidecar.in_dim, sidecar.hidden, sidecar.layers, sidecar.feature_dim) == ("gin", 3, 8, 2, 16)
    assert sidecar.dataset == "TOY" and sidecar.epoch == 1
    first = GRAPHS.embed(model, sidecar, samples, 4, "test")
    second = GRAPHS.embed(loaded, sidecar, samples, 7, "test")
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(first, second)), "same embeddings, whatever the batch size"
    GRAPHS.check_fits(loaded, GRAPHS.load_card(prepared), str(path), str(prepared))

    sidecar_file = path.with_suffix(".json")
    values = json.loads(sidecar_file.read_text())
    for field, value, message in (
        ("hidden", "8", "'hidden' must be an integer"),
        ("layers", 3, "weights do not match"),
        ("epoch", "one", "'epoch' must be an integer"),
    ):
        sidecar_file.write_text(json.dumps(values | {field: value}))
        with pytest.raises(HclError, match=message) as error:
            load_graph_encoder(path)
        assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_the_graph_epoch_order_and_labels_stay_on_the_host_while_images_index_on_their_device(prepared: Path) -> None:
    """Graphs batch from host indices: the order stays there (no copy back per step); image tensors take it on their device."""
    samples, labels = GRAPHS.load_samples(prepared, GRAPHS.training_splits(None, True), "cpu")
    samples.batcher.device = torch.device("meta")  # a device the order must not go to
    order = epoch_order_on(samples, 0, 1)
    assert order.device.type == "cpu" and labels.device.type == "cpu"
    assert torch.equal(labels[order[:4]], samples.batcher.labels[samples.indices[order[:4]]])
    images = torch.zeros(6, 1, 2, 2, dtype=torch.uint8, device="meta")
    assert epoch_order_on(images, 0, 1).device.type == "meta"
