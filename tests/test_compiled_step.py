"""``--compile``: the whole image step compiled (inductor on a CPU here; CUDA graphs on a GPU) trains as eager mode does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from benchmarks.bench_pretrain import write_synthetic_image_folder
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.image.simclr_augment import Constants, SimCLRAugment
from hcl_cli.image.step import build_training as build_image_training
from hcl_cli.modality import StepValues, modality_of
from hcl_cli.objectives import contrastive_loss
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.objectives.loss import sampler_loss
from hcl_cli.objectives.registry import SAMPLERS
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.stages import prepare
from hcl_cli.training.builders import build_training

pytestmark = pytest.mark.usefixtures("one_thread")


def two_steps(data: Path, compiled: bool) -> list[tuple[StepValues, torch.Tensor, list[torch.Tensor]]]:
    """Two steps of small_cnn on batches of 8 from the same seed: each step's values, gradients and weights after it."""
    modality = modality_of(data)
    card = modality.load_card(data)
    samples, labels = modality.load_samples(data, ["train"])
    config = PretrainConfig(data=str(data), arch="small_cnn", batch_size=8, sampler="hucl", compile=compiled)
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    context.seed_everything(0)
    model, step = build_training(modality, config, card, context)
    options = config.loss_options(0).replaced({"objective": "nce"}, {})
    steps = []
    for index in range(2):
        values = step(samples[8 * index : 8 * index + 8], labels[8 * index : 8 * index + 8], options).read()
        grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        steps.append((values, grads, [p.detach().clone() for p in model.parameters()]))
    return steps


@pytest.mark.slow
def test_the_compiled_step_gives_eager_mode_s_loss_gradients_and_update(
    prepared_digits: Callable[[float], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inductor's own random numbers differ from eager mode's: with its fallback to them the augmentations are the same,
    so the two runs see the same views. Adam's first update is about ``-lr sign(g)``: the weights are compared where the
    gradient is well above float32 rounding (a gradient of rounding size, as a bias before BatchNorm has, can take either
    sign in two correct computations)."""
    monkeypatch.setattr(torch._inductor.config, "fallback_random", True)
    data = prepared_digits(0.9)
    eager, compiled = two_steps(data, compiled=False), two_steps(data, compiled=True)
    for (values, grads, _), (compiled_values, compiled_grads, _) in zip(eager, compiled):
        assert compiled_values.finite
        assert compiled_values.loss == pytest.approx(values.loss, rel=1e-5)
        assert compiled_values.grad_norm == pytest.approx(values.grad_norm, rel=1e-4)
        torch.testing.assert_close(compiled_grads, grads, rtol=1e-3, atol=1e-5)
    (_, grads, weights), (_, _, compiled_weights) = eager[0], compiled[0]
    offset = 0
    for weight, compiled_weight in zip(weights, compiled_weights):
        clear = grads[offset : offset + weight.numel()].view_as(weight).abs() > 1e-4
        offset += weight.numel()
        torch.testing.assert_close(compiled_weight[clear], weight[clear], rtol=0, atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(compiled_weights, compiled[1][2])), "the second step moved the weights"


def test_the_simclr_augmentation_s_constants_are_made_before_the_step_is_compiled() -> None:
    """Made inside the compiled step they would be a CUDA graph's outputs, overwritten by its next replay (issue 43)."""
    card = SimpleNamespace(image_shape=(3, 32, 32), mean=(0.5,) * 3, std=(0.25,) * 3)
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    made = {}
    for compiled in (False, True):
        config = PretrainConfig(arch="small_cnn", batch_size=8, sampler="ucl", compile=compiled, device="cpu")
        _, step = build_image_training(config, card, context)
        (augment,) = [module for module in step.augment.modules() if isinstance(module, SimCLRAugment)]
        made[compiled] = dict(augment.made)
    assert made[False] == {}, "eager mode makes them at the first call"
    ((key, constants),) = made[True].items()
    assert key == (32, 32, 3, torch.device("cpu")) and isinstance(constants, Constants)


SGD_COSINE = ["--optimizer", "sgd", "--lr", "0.03", "--lr-schedule", "cosine", "--warmup-epochs", "1"]
COMPILED_RUNS = {
    "moco-adam": ["--sampler", "hucl", "--queue-size", "64", "--queue-mode", "moco"],
    "moco-sgd-cosine": ["--sampler", "hucl", "--queue-size", "64", "--queue-mode", "moco", *SGD_COSINE],
    "batch-queue-hucl": ["--sampler", "hucl", "--queue-size", "192"],
    "batch-queue-undimix": ["--sampler", "undimix", "--queue-size", "192"],
    "threshold": ["--sampler", "hscl-threshold"],
    "anneal": ["--sampler", "hucl", "--anneal", "paper", "--anneal-steps", "3"],
}
"""The compiled runs the tests below read, by name: each one's options of ``hcl pretrain``."""
RUNS_IN_ONE_PROCESS = """
import json, sys
import torch
from hcl_cli.cli import main

for name, args in json.loads(sys.argv[1]).items():
    torch._dynamo.reset()  # each run compiles afresh and logs its graph break in full, as in a process of its own
    torch._dynamo.utils.graph_break_dup_warning_checker.reset()
    print(f"=== run {name}", file=sys.stderr, flush=True)
    try:
        main(args)
        code = 0
    except SystemExit as exited:
        code = exited.code or 0
    print(f"=== exit {code}", file=sys.stderr, flush=True)
"""


@pytest.fixture(scope="module")
def compiled_runs(prepared_digits: Callable[[float], Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The standard error of ``hcl pretrain --compile true`` for three epochs on small_cnn under
    ``TORCH_LOGS=recompiles,graph_breaks``, for each of :data:`COMPILED_RUNS`: the runs go one after another through the
    command line's ``main`` in one interpreter (torch and Inductor imported once), dynamo's caches and its record of the graph
    breaks it has logged reset before each."""
    data, work = prepared_digits(0.9), tmp_path_factory.mktemp("compiled")
    common = ["--data", str(data), "--arch", "small_cnn", "--batch-size", "32", "--epochs", "3", "--compile", "true"]
    runs = {
        name: ["pretrain", *common, "--out", str(work / name / "models"), "--live-dir", str(work / name / "live")]
        + ["--device", "cpu", "--threads", "1", *options]
        for name, options in COMPILED_RUNS.items()
    }
    environment = {**os.environ, "TORCH_LOGS": "recompiles,graph_breaks", "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(
        [sys.executable, "-c", RUNS_IN_ONE_PROCESS, json.dumps(runs)], capture_output=True, text=True, env=environment, timeout=1200
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    parts = re.split(r"^=== run (\S+)\n", finished.stderr, flags=re.MULTILINE)[1:]
    return dict(zip(parts[::2], parts[1::2]))


def compiled_run(outputs: dict[str, str], name: str) -> str:
    """The standard error of the compiled run ``name`` (:func:`compiled_runs`), which finished with exit code 0."""
    output = outputs[name]
    assert output.rstrip().endswith("=== exit 0"), output[-3000:]
    assert "3 epochs of 5 steps" in output, "three epochs, so that a guard on the epoch or the step would show"
    return output


BACKWARD_BREAK = "Dynamo currently does not support tracing `Tensor.backward()`"
"""The one graph break of the compiled step (hcl_cli/image/step.py's ``compiled_step``)."""


def assert_compiled_once_with_the_backward_break(output: str) -> None:
    """No recompile, and the one graph break that ``TORCH_LOGS=graph_breaks`` reports is the backward's, at its line."""
    assert "Recompiling function" not in output, output[-3000:]
    places = re.findall(r"\[__graph_breaks\] Graph break.* in user code at (\S+)", output)
    reasons = re.findall(r"\[__graph_breaks\] +Explanation: (.*)", output)
    assert len(places) == 1 and len(reasons) == 1, output[-3000:]
    assert all(reason.startswith(BACKWARD_BREAK) for reason in reasons), reasons
    ((path, line),) = {tuple(place.rsplit(":", 1)) for place in places}
    assert path.endswith(os.path.join("hcl_cli", "image", "step.py"))
    assert ".backward()" in Path(path).read_text().splitlines()[int(line) - 1]


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["adam", "sgd-cosine"])
def test_a_compiled_run_over_a_moco_queue_never_recompiles_across_epochs(compiled_runs: dict[str, str], schedule: str) -> None:
    """``hcl pretrain --compile true --queue-mode moco`` for three epochs: ``TORCH_LOGS=recompiles`` reports none (the
    queue's pointer moves on the device, its filled size never changes; issue 43 item 2), nor with MoCo-v2's SGD under a
    warmed-up cosine schedule (the learning rate is one tensor, written in place). The one graph break is the backward."""
    assert_compiled_once_with_the_backward_break(compiled_run(compiled_runs, f"moco-{schedule}"))


MASKED_QUEUE_SETTINGS = [
    ("ucl", {}),
    ("debiased", {}),
    ("hucl", {}),
    ("hucl", {"clip": True, "objective": "bcl"}),
    ("hucl", {"positives": "labels"}),
    ("scl", {}),
    ("hscl", {"clip": True}),
    ("hscl-threshold", {"threshold": 0.1}),
    ("ot", {}),
]


UNDIMIX_QUEUE_SETTINGS = [
    ("undimix", {}),
    ("undimix", {"undimix_diversity": "anchor-view"}),
    ("undimix", {"undimix_diversity": "both-views", "undimix_weights": (0.2, 0.5, 0.3)}),
]
"""UnDiMix over a queue: its head inputs and each queued key's features (:func:`undimix_inputs`) besides the keys."""


def undimix_inputs(
    generator: torch.Generator, dtype: torch.dtype
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], torch.Tensor]:
    """The anchors' and the batch keys' head inputs (6, 4) and the 8 queued keys' features (8, 5 + 4) (UnDiMix's
    uncertainty factors: ``key_features``), random, for batches of 6 projections of 5."""
    hidden = tuple(torch.randn(6, 4, generator=generator, dtype=dtype) for _ in range(2))
    key_hidden = tuple(torch.randn(6, 4, generator=generator, dtype=dtype) for _ in range(2))
    return hidden, key_hidden, torch.randn(8, 9, generator=generator, dtype=dtype)


@pytest.mark.parametrize(
    ("sampler", "options", "filled"),
    [(*setting, filled) for filled in (0, 4, 8) for setting in MASKED_QUEUE_SETTINGS]
    + [(*setting, filled) for filled in (0, 4) for setting in UNDIMIX_QUEUE_SETTINGS],
    ids=lambda value: str(value),
)
def test_a_queue_masked_to_its_filled_rows_gives_the_loss_of_its_filled_part(sampler: str, options: dict, filled: int) -> None:
    """A compiled step's queue keeps one shape as it fills: the whole queue with its filled rows marked
    (``MomentumKeys.queue_valid``). Its loss and gradients are those of the filled part alone, whatever the other rows hold
    (issue 43 item 2); UnDiMix's too, its parts' min-max, its diversity's means and its normaliser over the filled rows."""
    generator = torch.Generator().manual_seed(filled)
    z1, z2, k1, k2 = (torch.randn(6, 5, generator=generator, dtype=torch.float64) for _ in range(4))
    queue, queue_labels = torch.randn(8, 5, generator=generator, dtype=torch.float64), torch.randint(0, 3, (8,), generator=generator)
    labels = torch.tensor([0, 1, 2, 0, 1, 1])
    hidden, key_hidden, features = undimix_inputs(generator, torch.float64)
    undimix = sampler == "undimix"
    if undimix:
        options = {**options, "head_inputs": hidden}
    losses, gradients = [], []
    for keys in (
        MomentumKeys(k1, k2, queue[:filled], queue_labels[:filled], key_hidden, features[:filled] if undimix else None),
        MomentumKeys(k1, k2, queue, queue_labels, key_hidden, features if undimix else None, queue_valid=torch.arange(8) < filled),
    ):
        anchors = z1.clone().requires_grad_(True)
        loss = contrastive_loss(anchors, z2, labels, sampler=sampler, momentum_keys=keys, **options)
        loss.backward()
        losses.append(loss.detach())
        gradients.append(anchors.grad)
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gradients[1], gradients[0], rtol=1e-8, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["hucl", "undimix"])
def test_a_compiled_run_over_a_batch_queue_compiles_once_as_the_queue_fills(compiled_runs: dict[str, str], sampler: str) -> None:
    """``--queue-size 192`` with the default ``--queue-mode batch``: 64 keys a step, so the queue fills over the first three
    steps. The step takes the whole queue with its filled rows marked, not the filled part: no recompile (issue 43 item 2),
    undimix's queued key features included."""
    assert_compiled_once_with_the_backward_break(compiled_run(compiled_runs, f"batch-queue-{sampler}"))


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["threshold", "anneal"])
def test_a_compiled_run_under_a_sampler_schedule_compiles_once(compiled_runs: dict[str, str], schedule: str) -> None:
    """hscl-threshold's threshold (-0.3, -0.15, 0) and ``--anneal``'s beta (1, 2/3, 1/3) change every epoch: tensors written
    in place, so that no epoch compiles the step again (issue 43 item 2)."""
    assert_compiled_once_with_the_backward_break(compiled_run(compiled_runs, schedule))


@pytest.fixture(scope="module")
def rgb_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared folder of 32 random 32x32 RGB training images: the SimCLR augmentation's recipe."""
    root = tmp_path_factory.mktemp("rgb")
    write_synthetic_image_folder(root / "images", 32)
    prepare.run(PrepareConfig(dataset="imagefolder", path=str(root / "images"), out=str(root / "prepared")))
    return root / "prepared"


def simclr_steps(data: Path, compiled: bool) -> list[StepValues]:
    """Three steps of small_cnn with hucl over a batch queue of 32 keys (filled over the first two), batches of 8."""
    modality = modality_of(data)
    samples, labels = modality.load_samples(data, ["train"])
    config = PretrainConfig(data=str(data), arch="small_cnn", batch_size=8, sampler="hucl", queue_size=32, compile=compiled)
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    context.seed_everything(0)
    _, step = build_training(modality, config, modality.load_card(data), context)
    options = config.loss_options(0).replaced({"objective": "nce"}, {})
    return [step(samples[8 * index : 8 * index + 8], labels[8 * index : 8 * index + 8], options).read() for index in range(3)]


@pytest.mark.slow
def test_the_compiled_simclr_step_gives_eager_mode_s_losses_in_two_graphs(rgb_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SimCLR recipe at 32x32 (its augmentation's constants made before compiling) over a filling batch queue: the
    compiled step's losses and gradient norms are eager mode's, and dynamo made two graphs, the forward up to the backward
    and the rest after it, once each (issue 43 item 2). Inductor's random numbers with its fallback to eager mode's."""
    monkeypatch.setattr(torch._inductor.config, "fallback_random", True)
    eager = simclr_steps(rgb_folder, compiled=False)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = simclr_steps(rgb_folder, compiled=True)
    for values, compiled_values in zip(eager, compiled):
        assert compiled_values.finite
        assert compiled_values.loss == pytest.approx(values.loss, rel=1e-5)
    assert compiled[0].grad_norm == pytest.approx(eager[0].grad_norm, rel=1e-5)  # later ones after Adam's sign-like first update
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2, dict(torch._dynamo.utils.counters["stats"])


@pytest.mark.parametrize(("sampler", "options"), MASKED_QUEUE_SETTINGS, ids=lambda value: str(value))
@pytest.mark.parametrize("queue", ["in-batch", "filling-queue"])
@pytest.mark.filterwarnings("ignore:.*functools.lru_cache")
def test_every_sampler_s_loss_traces_into_one_graph(sampler: str, options: dict, queue: str) -> None:
    """The loss of the compiled step (``sampler_loss``, the sampler loaded beforehand as the step loads it) has no graph
    break: no ``cached_property`` (a lock on Python 3.11), no ``set_flush_denormal`` (ot), no read of a filling queue's
    count (issue 43 item 2)."""
    spec = SAMPLERS[sampler]
    spec.load()
    generator = torch.Generator().manual_seed(0)
    z1, z2, k1, k2 = (torch.randn(6, 5, generator=generator) for _ in range(4))
    labels = torch.tensor([0, 1, 2, 0, 1, 1])
    keys = None
    if queue == "filling-queue":
        keys = MomentumKeys(
            k1, k2, torch.randn(8, 5, generator=generator), torch.randint(0, 3, (8,), generator=generator), queue_valid=torch.arange(8) < 4
        )
    resolved = SamplerOptions.resolve(spec, {"ot_iterations": 3, **options, "momentum_keys": keys})

    def loss(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return sampler_loss(z1, z2, labels, spec=spec, options=resolved)[0]

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(loss)(z1, z2)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), [reason.reason[:200] for reason in explanation.break_reasons]


@pytest.mark.parametrize(("sampler", "options"), UNDIMIX_QUEUE_SETTINGS, ids=lambda value: str(value))
@pytest.mark.parametrize("queue", ["in-batch", "filling-queue"])
@pytest.mark.filterwarnings("ignore:.*functools.lru_cache")
def test_undimix_s_loss_traces_into_one_graph(sampler: str, options: dict, queue: str) -> None:
    """UnDiMix's loss, in-batch too (its symmetric Gram product written into slices broke the graph ten times), is one
    graph with no break."""
    spec = SAMPLERS[sampler]
    spec.load()
    generator = torch.Generator().manual_seed(0)
    z1, z2, k1, k2 = (torch.randn(6, 5, generator=generator) for _ in range(4))
    labels = torch.tensor([0, 1, 2, 0, 1, 1])
    hidden, key_hidden, features = undimix_inputs(generator, torch.float32)
    keys = None
    if queue == "filling-queue":
        queue_keys, queue_labels = torch.randn(8, 5, generator=generator), torch.randint(0, 3, (8,), generator=generator)
        keys = MomentumKeys(k1, k2, queue_keys, queue_labels, key_hidden, features, queue_valid=torch.arange(8) < 4)
    resolved = SamplerOptions.resolve(spec, {**options, "head_inputs": hidden, "momentum_keys": keys})

    def loss(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return sampler_loss(z1, z2, labels, spec=spec, options=resolved)[0]

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(loss)(z1, z2)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), [reason.reason[:200] for reason in explanation.break_reasons]
