"""Data-parallel training equals one process holding the concatenated batch.

Two CPU processes with the gloo backend each hold half of a float64 batch. For every sampler of
:data:`hcl_cli.objectives.SAMPLERS`, the ranks' losses add up to the loss of one process holding
the whole batch, each rank's gradients with respect to its own projections are that process's
gradients for those rows, and, through DDP with :attr:`DistributedContext.loss_scale`, the
parameter gradients of a projection layer equal the single-process ones. Ranks report through
safetensors files in ``tmp_path``; the comparison runs in the test process.

And ``hcl pretrain`` under ``torchrun`` with two CPU processes writes one encoder and one
checkpoint (rank 0 only) that ``embed``, ``knn-eval`` and ``linear-eval`` accept.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from hcl_cli.artifacts import read_json
from hcl_cli.config import EmbedConfig, KnnConfig, LinearConfig, PrepareConfig
from hcl_cli.distributed import DistributedContext, distributed_context
from hcl_cli.errors import HclError, UsageError
from hcl_cli.image.encoder import load_encoder
from hcl_cli.image.momentum import MomentumQueue
from hcl_cli.image.networks import build_model
from hcl_cli.objectives import SAMPLERS, contrastive_loss
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.runtime import seed_everything
from hcl_cli.stages import embed, knn_eval, linear_eval, prepare

WORLD_SIZE = 2
RANK_BATCH = 6
PROJECTION_DIM = 5
HIDDEN_DIM = 7
NUM_CLASSES = 3
TOLERANCE = 1e-5
HANG_GUARD_S = 120
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD_SIZE}"]
# Every option any sampler reads; each sampler ignores the others (and unsupervised ones the labels).
QUEUE_SIZE = 32
SAMPLER_OPTIONS: dict[str, Any] = {"temperature": 0.5, "beta": 1.0, "tau_plus": 0.1, "threshold": -0.2, "ot_epsilon": 0.5}


def make_inputs(path: Path) -> dict[str, Tensor]:
    """The global batch of K*B samples: head inputs of both views, their projections, labels."""
    generator = torch.Generator().manual_seed(0)
    size = WORLD_SIZE * RANK_BATCH
    inputs = {
        "x1": torch.randn(size, HIDDEN_DIM, generator=generator, dtype=torch.float64),
        "x2": torch.randn(size, HIDDEN_DIM, generator=generator, dtype=torch.float64),
        "z1": torch.randn(size, PROJECTION_DIM, generator=generator, dtype=torch.float64),
        "z2": torch.randn(size, PROJECTION_DIM, generator=generator, dtype=torch.float64),
        "labels": torch.randint(NUM_CLASSES, (size,), generator=generator),
        "weight": torch.randn(PROJECTION_DIM, HIDDEN_DIM, generator=generator, dtype=torch.float64),
        "bias": torch.randn(PROJECTION_DIM, generator=generator, dtype=torch.float64),
        "k1": torch.randn(size, PROJECTION_DIM, generator=generator, dtype=torch.float64),
        "k2": torch.randn(size, PROJECTION_DIM, generator=generator, dtype=torch.float64),
        "queue": torch.randn(QUEUE_SIZE, PROJECTION_DIM, generator=generator, dtype=torch.float64),
        "queue_labels": torch.randint(NUM_CLASSES, (QUEUE_SIZE // 2,), generator=generator).repeat_interleave(2),
        "queue_features": torch.randn(QUEUE_SIZE, PROJECTION_DIM + HIDDEN_DIM, generator=generator, dtype=torch.float64),
    }
    save_file(inputs, str(path))
    return inputs


def projection_layer(inputs: dict[str, Tensor]) -> nn.Linear:
    """A float64 linear projection with the inputs' weights, standing in for the head's last layer."""
    layer = nn.Linear(HIDDEN_DIM, PROJECTION_DIM, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(inputs["weight"])
        layer.bias.copy_(inputs["bias"])
    return layer


def rank_loss(views: Any, sampler: str, **options: Any) -> Tensor:
    """This rank's share of the loss of the gathered ``views`` (its own anchors, over every rank's negatives)."""
    return contrastive_loss(
        views.z1,
        views.z2,
        views.labels,
        sampler=sampler,
        anchor_mask=views.anchor_mask,
        head_inputs=views.head_inputs,
        **SAMPLER_OPTIONS,
        **options,
    )


def rank_worker(rank: int, port: int, folder: str) -> None:
    """One rank: for every sampler, its share of the loss, its projections' and DDP's parameter gradients.

    The ranks are forked from the test process (no re-import of torch); one intra-op thread each,
    as DataLoader workers do, keeps OpenMP out of the forked children.
    """
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD_SIZE), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    inputs = load_file(str(Path(folder) / "inputs.safetensors"))
    own = slice(rank * RANK_BATCH, (rank + 1) * RANK_BATCH)
    results: dict[str, Tensor] = {}
    with distributed_context("cpu") as context:
        model = context.wrap_model(projection_layer(inputs))
        for sampler in SAMPLERS:
            z1 = inputs["z1"][own].clone().requires_grad_(True)
            z2 = inputs["z2"][own].clone().requires_grad_(True)
            views = context.gather_views(z1, z2, inputs["labels"][own], head_inputs=(inputs["x1"][own], inputs["x2"][own]))
            loss = rank_loss(views, sampler)
            loss.backward()
            results |= {f"{sampler}/loss": loss.detach(), f"{sampler}/z1_grad": z1.grad, f"{sampler}/z2_grad": z2.grad}

            x1, x2 = inputs["x1"][own], inputs["x2"][own]
            projected = model(torch.cat([x1, x2]))
            views = context.gather_views(projected[:RANK_BATCH], projected[RANK_BATCH:], inputs["labels"][own], head_inputs=(x1, x2))
            loss = rank_loss(views, sampler)
            model.zero_grad()
            (loss * context.loss_scale).backward()
            results |= {f"{sampler}/weight_grad": model.module.weight.grad.clone(), f"{sampler}/bias_grad": model.module.bias.grad.clone()}
            results[f"{sampler}/global_loss"] = context.reduce_sum(loss)

            z1 = inputs["z1"][own].clone().requires_grad_(True)
            z2 = inputs["z2"][own].clone().requires_grad_(True)
            views = context.gather_views(z1, z2, inputs["labels"][own], head_inputs=(inputs["x1"][own], inputs["x2"][own]))
            keys = momentum_keys(inputs, context.gather_rows(torch.cat([inputs["k1"][own], inputs["k2"][own]])).chunk(2), views.head_inputs)
            loss = rank_loss(views, sampler, momentum_keys=keys)
            loss.backward()
            results |= {f"{sampler}/queue_loss": loss.detach(), f"{sampler}/queue_z1_grad": z1.grad, f"{sampler}/queue_z2_grad": z2.grad}
        queue = MomentumQueue(build_model("small_cnn", 1, 8, PROJECTION_DIM), QUEUE_SIZE, 0.99, torch.float64)
        labels = context.gather_views(inputs["z1"][own], inputs["z2"][own], inputs["labels"][own]).labels
        for scale in (1.0, 2.0):  # 24 keys each: the second push wraps around the queue of 32
            queue.push(context.gather_rows(scale * torch.cat([inputs["k1"][own], inputs["k2"][own]])), labels)
        results |= {"queue/keys": queue.keys, "queue/labels": queue.labels}
        results["stop_when_one_rank_asks"] = torch.tensor(context.any_rank(rank == 1))
        results["stop_when_none_asks"] = torch.tensor(context.any_rank(False))
    save_file({name: tensor.contiguous() for name, tensor in results.items()}, str(Path(folder) / f"rank{rank}.safetensors"))


def momentum_keys(inputs: dict[str, Tensor], keys: tuple[Tensor, Tensor], head_inputs: tuple[Tensor, Tensor] | None) -> MomentumKeys:
    """The global batch's keys with the queue of the inputs (the key encoder's head inputs stand in as the model's)."""
    return MomentumKeys(*keys, inputs["queue"], inputs["queue_labels"], head_inputs, inputs["queue_features"])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(folder: Path) -> list[dict[str, Tensor]]:
    """Start the ranks; a failing rank fails the test (the others are stopped), a hang is killed."""
    processes = mp.start_processes(rank_worker, args=(free_port(), str(folder)), nprocs=WORLD_SIZE, join=False, start_method="fork")
    deadline = time.monotonic() + HANG_GUARD_S
    while not processes.join(timeout=1):
        if time.monotonic() > deadline:
            for process in processes.processes:
                process.kill()
            pytest.fail(f"the {WORLD_SIZE} ranks did not finish within {HANG_GUARD_S} s")
    return [load_file(str(folder / f"rank{rank}.safetensors")) for rank in range(WORLD_SIZE)]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Tensor], list[dict[str, Tensor]]]:
    folder = tmp_path_factory.mktemp("ranks")
    inputs = make_inputs(folder / "inputs.safetensors")
    return inputs, run_ranks(folder)


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_two_ranks_equal_one_process_with_the_whole_batch(
    sampler: str, two_ranks: tuple[dict[str, Tensor], list[dict[str, Tensor]]]
) -> None:
    inputs, ranks = two_ranks
    head_inputs = (inputs["x1"], inputs["x2"])
    z1 = inputs["z1"].clone().requires_grad_(True)
    z2 = inputs["z2"].clone().requires_grad_(True)
    loss = contrastive_loss(z1, z2, inputs["labels"], sampler=sampler, head_inputs=head_inputs, **SAMPLER_OPTIONS)
    loss.backward()

    shares = torch.stack([rank[f"{sampler}/loss"] for rank in ranks])
    assert shares.sum().item() == pytest.approx(loss.item(), abs=TOLERANCE)
    torch.testing.assert_close(torch.cat([rank[f"{sampler}/z1_grad"] for rank in ranks]), z1.grad, rtol=0, atol=TOLERANCE)
    torch.testing.assert_close(torch.cat([rank[f"{sampler}/z2_grad"] for rank in ranks]), z2.grad, rtol=0, atol=TOLERANCE)

    layer = projection_layer(inputs)
    projected = layer(torch.cat(head_inputs))
    size = WORLD_SIZE * RANK_BATCH
    projected_loss = contrastive_loss(
        projected[:size], projected[size:], inputs["labels"], sampler=sampler, head_inputs=head_inputs, **SAMPLER_OPTIONS
    )
    projected_loss.backward()
    for rank in ranks:
        torch.testing.assert_close(rank[f"{sampler}/weight_grad"], layer.weight.grad, rtol=0, atol=TOLERANCE)
        torch.testing.assert_close(rank[f"{sampler}/bias_grad"], layer.bias.grad, rtol=0, atol=TOLERANCE)
        assert rank[f"{sampler}/global_loss"].item() == pytest.approx(projected_loss.item(), abs=TOLERANCE)


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_two_ranks_over_a_queue_equal_one_process_with_the_whole_batch(
    sampler: str, two_ranks: tuple[dict[str, Tensor], list[dict[str, Tensor]]]
) -> None:
    """Each rank's keys enter the global batch's keys (gather_rows); with the same queue on every rank the ranks' losses
    add up to one process's and each rank's gradients are that process's for its rows."""
    inputs, ranks = two_ranks
    head_inputs = (inputs["x1"], inputs["x2"])
    z1 = inputs["z1"].clone().requires_grad_(True)
    z2 = inputs["z2"].clone().requires_grad_(True)
    keys = momentum_keys(inputs, (inputs["k1"], inputs["k2"]), head_inputs)
    loss = contrastive_loss(z1, z2, inputs["labels"], sampler=sampler, head_inputs=head_inputs, momentum_keys=keys, **SAMPLER_OPTIONS)
    loss.backward()

    assert sum(rank[f"{sampler}/queue_loss"].item() for rank in ranks) == pytest.approx(loss.item(), abs=TOLERANCE)
    torch.testing.assert_close(torch.cat([rank[f"{sampler}/queue_z1_grad"] for rank in ranks]), z1.grad, rtol=0, atol=TOLERANCE)
    torch.testing.assert_close(torch.cat([rank[f"{sampler}/queue_z2_grad"] for rank in ranks]), z2.grad, rtol=0, atol=TOLERANCE)
    in_batch = contrastive_loss(z1, z2, inputs["labels"], sampler=sampler, head_inputs=head_inputs, **SAMPLER_OPTIONS)
    assert loss.item() != pytest.approx(in_batch.item()), "the queue takes part"


def test_the_keys_of_every_rank_enter_every_rank_s_queue(two_ranks: tuple[dict[str, Tensor], list[dict[str, Tensor]]]) -> None:
    inputs, ranks = two_ranks
    queue = MomentumQueue(build_model("small_cnn", 1, 8, PROJECTION_DIM), QUEUE_SIZE, 0.99, torch.float64)
    for scale in (1.0, 2.0):
        queue.push(scale * torch.cat([inputs["k1"], inputs["k2"]]), inputs["labels"])
    for rank in ranks:
        assert torch.equal(rank["queue/keys"], queue.keys) and torch.equal(rank["queue/labels"], queue.labels)


def test_one_rank_s_stop_request_stops_every_rank(two_ranks: tuple[dict[str, Tensor], list[dict[str, Tensor]]]) -> None:
    _, ranks = two_ranks
    assert [(bool(rank["stop_when_one_rank_asks"]), bool(rank["stop_when_none_asks"])) for rank in ranks] == [(True, False)] * WORLD_SIZE


def rank_context(rank: int, world_size: int) -> DistributedContext:
    return DistributedContext(rank=rank, world_size=world_size, local_rank=rank, device=torch.device("cpu"))


def test_rank_shards_concatenate_to_the_single_process_batches() -> None:
    order = torch.randperm(50, generator=torch.Generator().manual_seed(1))
    single = rank_context(0, 1).shard_batches(order, 3 * 4)
    shards = [rank_context(rank, 3).shard_batches(order, 4) for rank in range(3)]
    assert single.shape == (4, 12)
    torch.testing.assert_close(torch.cat(shards, dim=1), single)


def test_a_global_batch_larger_than_the_data_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--batch-size 8 x 2 processes is larger than the 10 training images"):
        rank_context(1, 2).shard_batches(torch.arange(10), 8)


def test_ranks_augment_independently_and_rank_0_seeds_like_one_process() -> None:
    draws = []
    for rank in range(2):
        rank_context(rank, 2).seed_everything(7)
        draws.append(torch.rand(4))
    seed_everything(7)
    torch.testing.assert_close(draws[0], torch.rand(4))
    assert not torch.equal(draws[0], draws[1])


def test_after_a_resume_only_the_other_ranks_draw_fresh_streams() -> None:
    draws = []
    for rank in range(2):
        seed_everything(7)
        rank_context(rank, 2).reseed_after_resume(7, epoch=1, step=3)
        draws.append(torch.rand(4))
    seed_everything(7)
    torch.testing.assert_close(draws[0], torch.rand(4))
    assert not torch.equal(draws[0], draws[1])


def test_a_torchrun_environment_without_a_rendezvous_address_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(HclError, match="rank 0 of 2 could not join the torchrun process group: .*MASTER_ADDR"):
        with distributed_context("cpu"):
            pass


def test_without_torchrun_the_context_is_one_process_that_passes_views_through(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    z1, z2, labels = torch.randn(4, 3), torch.randn(4, 3), torch.arange(4)
    with distributed_context("cpu") as context:
        views = context.gather_views(z1, z2, labels)
        model = nn.Linear(3, 3)
        assert (context.rank, context.world_size, context.is_main, context.loss_scale) == (0, 1, True, 1.0)
        assert context.wrap_model(model) is model
    assert views.z1 is z1 and views.z2 is z2 and views.labels is labels and views.anchor_mask is None


@pytest.mark.slow
def test_two_process_torchrun_pretrain_writes_an_encoder_that_embed_and_the_evaluations_accept(tmp_path: Path) -> None:
    """``torchrun --nproc-per-node 2 -m hcl_cli pretrain`` on the CPU (gloo)."""
    data, models = tmp_path / "prepared", tmp_path / "models"
    prepare.run(PrepareConfig(test_fraction=0.8, out=str(data)))
    pretrain = [*TORCHRUN, "-m", "hcl_cli", "pretrain", "--device", "cpu", "--epochs", "1", "--batch-size", "16", "--sampler", "hscl"]
    launched = run_command([*pretrain, "--data", str(data), "--out", str(models), "--live-dir", str(tmp_path / "dvclive")])
    assert launched.returncode == 0, launched.stdout[-3000:]
    assert launched.stdout.count("hcl pretrain: wrote") == 1

    _, sidecar = load_encoder(models / "encoder.safetensors")
    assert sidecar.world_size == WORLD_SIZE
    assert sorted(path.name for path in (models / "checkpoints").glob("*.safetensors")) == ["epoch-0001-step-000000.safetensors"]
    embeddings = tmp_path / "embeddings.safetensors"
    embed.run(EmbedConfig(data=str(data), model=str(models / "encoder.safetensors"), out=str(embeddings), device="cpu"))
    knn_eval.run(KnnConfig(k=10, embeddings=str(embeddings), out=str(tmp_path / "knn.json"), device="cpu"))
    linear_eval.run(LinearConfig(epochs=20, embeddings=str(embeddings), out=str(tmp_path / "linear.json"), device="cpu"))
    for metrics in ("knn.json", "linear.json"):
        assert 0.1 < read_json(tmp_path / metrics)["top1"] <= 1.0


@pytest.mark.slow
def test_two_process_torchrun_pretrain_over_a_queue_enqueues_the_keys_of_both_ranks(tmp_path: Path) -> None:
    """``torchrun --nproc-per-node 2 ... --queue-size 64``: each step lets the 2 x 2 x 16 keys of both ranks into the queue."""
    data, models = tmp_path / "prepared", tmp_path / "models"
    prepare.run(PrepareConfig(test_fraction=0.8, out=str(data)))
    pretrain = [*TORCHRUN, "-m", "hcl_cli", "pretrain", "--device", "cpu", "--epochs", "1", "--batch-size", "16", "--sampler", "undimix"]
    paths = ["--data", str(data), "--out", str(models), "--live-dir", str(tmp_path / "dvclive")]
    launched = run_command([*pretrain, "--queue-size", "64", *paths])
    assert launched.returncode == 0, launched.stdout[-3000:]
    assert "over a queue of 64 keys (momentum 0.99) on cpu x 2 processes" in launched.stdout

    steps = len(load_file(str(data / "train.safetensors"))["labels"]) // (WORLD_SIZE * 16)
    checkpoint = load_file(str(models / "checkpoints" / "epoch-0001-step-000000.safetensors"))
    assert checkpoint["model.queue.count"].item() == steps * 2 * WORLD_SIZE * 16
    assert checkpoint["model.queue.features"].shape[0] == 64
    load_encoder(models / "encoder.safetensors")


def run_command(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in its own session; on a hang, kill the whole session (torchrun and its ranks)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True) as process:
        try:
            output, _ = process.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"{' '.join(command)} did not finish within {HANG_GUARD_S} s")
    return subprocess.CompletedProcess(command, process.returncode, output)
