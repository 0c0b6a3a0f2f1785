"""One optimisation step of contrastive pretraining, and the model and optimizer it trains.

SimCLR's recipe as HCL trains it (Robinson et al., Sec. 5.1 and App. D.1): every image of a batch
gives two independently augmented views, the encoder and projection head map both to ``z``, and
:func:`hcl_cli.objectives.loss.sampler_loss` (the loss of :func:`hcl_cli.objectives.contrastive_loss`)
scores them under the sampler's negative distribution; Adam with the papers' lr 1e-3 and weight
decay 1e-6 by default, or ``--optimizer``'s (torch's fused optimizers, :mod:`hcl_cli.optimizer`). The step makes no host sync: its loss, the
gradients' norm and the finite check stay on the device, a non-finite step skips its update there,
and the epoch loop reads the results later (:class:`~hcl_cli.modality.StepResult`). At
``--precision bf16`` (``auto``: on CUDA; :mod:`hcl_cli.runtime`) the encoder runs under bf16
autocast in channels_last; the loss is computed in float32. ``--compile`` compiles the whole step
(:func:`compiled_step`). With ``--queue-size`` the anchors' candidates are a momentum key encoder's
keys of the batch and a queue of earlier keys (:mod:`hcl_cli.image.momentum`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import UsageError
from hcl_cli.image.augment import build_augmentation, prepare_augmentation, resolve_recipe
from hcl_cli.image.card import DatasetCard
from hcl_cli.image.momentum import MomentumQueue
from hcl_cli.image.networks import ContrastiveModel, build_model, resolve_arch
from hcl_cli.modality import StepResult
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.objectives.core import LossStats
from hcl_cli.objectives.loss import sampler_loss
from hcl_cli.objectives.moco import moco_sampler_loss
from hcl_cli.objectives.registry import SAMPLERS, Sampler
from hcl_cli.objectives.sampler_options import SamplerOptions, defaults
from hcl_cli.optimizer import OptimizerSettings, SkipNonFinite, finite_check
from hcl_cli.runtime import uses_bf16


@dataclass
class TrainingStep:
    """One optimisation step on a uint8 batch: two augmented views, forward, loss, backward, the optimizer's update.

    Both views go through the encoder as one batch of 2B (as SupContrast does), so BatchNorm
    normalises over both. ``network`` is the model, wrapped in DDP under torchrun. The loss is taken over the global batch of all ranks
    (:meth:`~hcl_cli.distributed.DistributedContext.gather_views`) and the reported loss is the
    global one, so every rank takes the same decision. The update (and with a queue, the enqueue)
    is applied only where the loss and the gradients are finite, decided on the device: the step
    reads nothing back (no host sync), and returns its :class:`StepResult` on the device.
    """

    network: nn.Module
    model: ContrastiveModel
    augment: nn.Module
    optimizer: SkipNonFinite
    sampler: str
    context: DistributedContext
    queue: MomentumQueue | None = None
    """The momentum key encoder and its queue (``--queue-size`` > 0), or None: in-batch negatives."""
    learned: nn.ParameterDict = field(default_factory=nn.ParameterDict)
    """Tensors the loss learns with the encoder (UnDiMix's learned weights), passed to it by name."""
    bf16: bool = False
    """The encoder runs under bf16 autocast on channels_last views (``--precision``), else in float32."""
    compiled: bool = False
    """Run :attr:`body` compiled (``--compile``; :func:`compiled_step`)."""
    compiled_train: Callable[[Tensor, Tensor, SamplerOptions], Tensor] | None = field(init=False, default=None, repr=False)
    scheduled: ScheduledValues | None = field(init=False, default=None, repr=False)
    """With ``--compile``: the sampler's scheduled values as tensors (:class:`ScheduledValues`)."""

    @property
    def spec(self) -> Sampler:
        return SAMPLERS[self.sampler]

    @property
    def state(self) -> nn.Module:
        """What a checkpoint holds besides the optimizer: the model, and with a queue the key encoder and the queue too."""
        parts = {
            "model": self.model,
            **({"queue": self.queue} if self.queue is not None else {}),
            **({"learned": self.learned} if len(self.learned) else {}),
        }
        return self.model if len(parts) == 1 else nn.ModuleDict(parts)

    def __post_init__(self) -> None:
        if self.compiled:
            self.spec.load()  # imported now, not inside the compiled step
            self.spec.load_key_features()
            torch._dynamo.mark_static_address(self.optimizer.found_inf)  # written in place every step: one address
            for group in self.optimizer.param_groups:  # likewise a scheduled learning rate (hcl_cli/optimizer.py)
                if isinstance(group["lr"], Tensor):
                    torch._dynamo.mark_static_address(group["lr"])
            if self.queue is not None:  # likewise
                for buffer in self.queue.buffers(recurse=False):
                    torch._dynamo.mark_static_address(buffer)
                self.queue.masked = True  # the whole queue and its filled rows' mask: one shape as it fills
            self.scheduled = ScheduledValues.of(self.spec, self.context.device)
            self.compiled_train = compiled_step(self.body, self.context.device)

    def __call__(self, images: Tensor, labels: Tensor, loss_options: SamplerOptions) -> StepResult:
        """Train on ``images`` with the sampler options of the current epoch (:meth:`PretrainConfig.loss_options`,
        resolved once per epoch): the step adds its tensors and checks nothing. The gradients are cleared before
        :attr:`body` and the optimizer's fused update (skipped on the device where it found a non-finite
        value) runs after it, outside the compiled part: dynamo traces neither ``Optimizer.zero_grad`` nor torch's
        fused optimizers (``torch.compiler.disable``d), and each would break the graph."""
        self.optimizer.zero_grad()
        if self.compiled_train is None:
            values = self.body(images, labels, loss_options)
        else:
            if self.scheduled is not None:
                loss_options = self.scheduled.written(loss_options)
            torch.compiler.cudagraph_mark_step_begin()
            values = self.compiled_train(images, labels, loss_options).clone()  # a CUDA graph's next replay overwrites it
        self.optimizer.step()  # outside the compiled part: torch's fused kernels are compiler-disabled (graph breaks)
        return StepResult(values)

    @property
    def body(self) -> Callable[[Tensor, Tensor, SamplerOptions], Tensor]:
        """The step itself up to the optimizer's update (compiled with ``--compile``): :meth:`train`, or with
        ``queue_mode: moco`` :meth:`moco_step`; the values of its :class:`StepResult`. Chosen here, not by a call from
        one to the other: a graph break inside a called function makes it a frame of its own, two more graphs."""
        return self.moco_step if self.queue is not None and self.queue.moco else self.train

    def train(self, images: Tensor, labels: Tensor, loss_options: SamplerOptions) -> Tensor:
        """Augmentation, forward, loss, backward, the finite check and the enqueue of a batch queue."""
        spec = self.spec
        views = self.augment(images.repeat(2, 1, 1, 1))  # both views in one call: each image's parameters are drawn per row
        if self.bf16:
            views = views.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.context.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            _, hidden, z = self.network(views)
        z1, z2 = z.float().chunk(2)
        head = {"head_layer": self.model.head.output_layer} if spec.head_inputs else {}
        head_inputs = tuple(hidden.float().chunk(2)) if spec.head_inputs else None
        batch = self.context.gather_views(z1, z2, labels if spec.label_positives(loss_options) else None, head_inputs)
        keys = None if self.queue is None else self.momentum_keys(self.queue, views, batch.labels is not None)
        options = loss_options.with_inputs(head_inputs=batch.head_inputs, momentum_keys=keys, **head, **self.learned)
        loss, stats = sampler_loss(batch.z1, batch.z2, batch.labels, spec=spec, options=options, anchor_mask=batch.anchor_mask)
        # The compiled step's one graph break: dynamo does not trace Tensor.backward (AOTAutograd compiled the backward of
        # the graph before it; the graph after it is the finite check and the enqueue). Here, not in a method, so that
        # dynamo makes two graphs, not four (a call that breaks is compiled again as a frame of its own).
        (loss * self.context.loss_scale).backward()
        values = self.checked(loss, stats)
        if self.queue is not None and keys is not None:
            self.enqueue(self.queue, keys, batch.labels, StepResult(values).finite)
        return values

    def checked(self, loss: Tensor, stats: LossStats) -> Tensor:
        """After the backward: the check that the global loss and the gradients are finite, which the optimizer's update
        after :attr:`body` reads (:func:`~hcl_cli.optimizer.finite_check`)."""
        return finite_check(self.optimizer, self.context.reduce_sum(loss), stats.terms, stats.anchors_without_negatives)

    def moco_step(self, images: Tensor, labels: Tensor, loss_options: SamplerOptions) -> Tensor:
        """One step of MoCo-v2 (``queue_mode: moco``; moco/builder.py's forward, then the update): the first views'
        queries through the model, the key encoder moved one step of its average and its keys of the second views
        with shuffled BatchNorm, the loss of the queries against their keys and the K queued keys, and, after a
        finite step, the global batch's keys enqueued. ``labels`` are not read (one positive per query: its key)."""
        queue = self.queue
        if queue is None:
            raise ValueError("moco_step needs the momentum queue (--queue-size > 0, --queue-mode moco)")
        first, second = self.augment(images), self.augment(images)
        if self.bf16:
            first, second = (views.contiguous(memory_format=torch.channels_last) for views in (first, second))
        with torch.autocast(self.context.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            _, _, queries = self.network(first)
            queue.follow(self.model)
            keys = queue.encode_shuffled(second)
        batch = self.context.gather_views(queries.float(), keys.float())
        anchor_mask = None if batch.anchor_mask is None else batch.anchor_mask[: len(batch.z1)]
        loss, stats = moco_sampler_loss(batch.z1, batch.z2, queue.keys, spec=self.spec, options=loss_options, anchor_mask=anchor_mask)
        (loss * self.context.loss_scale).backward()  # the one graph break, as in train
        values = self.checked(loss, stats)
        queue.push_keys(batch.z2.detach(), keep=StepResult(values).finite)
        return values

    def momentum_keys(self, queue: MomentumQueue, views: Tensor, labelled: bool) -> MomentumKeys:
        """Move the key encoder one step of its average towards the model; its keys of the global batch, and the queue."""
        spec = self.spec
        queue.follow(self.model)
        with torch.autocast(self.context.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden, keys = queue.encode(views)
        k1, k2 = self.context.gather_rows(keys.float()).chunk(2)
        head_inputs = tuple(self.context.gather_rows(hidden.float()).chunk(2)) if spec.head_inputs else None
        queued, queued_labels, queued_features = queue.queued()
        return MomentumKeys(
            k1,
            k2,
            queued,
            queued_labels if labelled else None,
            head_inputs,
            queued_features if spec.key_features else None,
            queue.valid_rows(),
        )

    def enqueue(self, queue: MomentumQueue, keys: MomentumKeys, labels: Tensor | None, keep: Tensor) -> None:
        """Let the global batch's keys (and labels, and their ``key_features``) into the queue where ``keep`` (the step was
        finite, on the device) holds."""
        batch_keys = torch.cat([keys.k1, keys.k2])
        features_of = self.spec.load_key_features()
        features = None if features_of is None or keys.head_inputs is None else features_of(batch_keys, torch.cat(keys.head_inputs))
        queue.push(batch_keys, labels, features, keep=keep)


@dataclass
class ScheduledValues:
    """A compiled step's scheduled sampler values (``beta`` of hucl and hscl, annealed by ``--anneal``; hscl-threshold's
    ``threshold``), each a 0-d float32 tensor on the device at one address for the whole run, written in place when the
    epoch's value changes. The compiled step reads them as inputs: as numbers they would be guards, and every epoch
    that changes one would compile the step again (an eager step keeps the numbers, and their arithmetic)."""

    tensors: dict[str, Tensor]
    values: dict[str, float] = field(default_factory=dict)
    """The value each tensor holds."""

    @classmethod
    def of(cls, spec: Sampler, device: torch.device) -> ScheduledValues:
        names = spec.schedule(defaults(), 0, 1) if spec.schedule is not None else {}
        tensors = {name: torch.zeros((), device=device) for name in names}
        for tensor in tensors.values():
            torch._dynamo.mark_static_address(tensor)
        return cls(tensors)

    def written(self, options: SamplerOptions) -> SamplerOptions:
        """``options`` with the scheduled values as the tensors, written first where the value changed."""
        for name, tensor in self.tensors.items():
            if self.values.get(name) != options[name]:
                tensor.fill_(options[name])
                self.values[name] = options[name]
        return options.replaced(self.tensors, {}) if self.tensors else options


def build_training(config: PretrainConfig, card: DatasetCard, context: DistributedContext) -> tuple[ContrastiveModel, TrainingStep]:
    """The model (on the rank's device; channels_last in bf16) and the step that trains it with ``--optimizer`` (DDP under torchrun)."""
    device = context.device
    channels, image_size = card.image_shape[0], card.image_shape[-1]
    arch = resolve_arch(config.arch, image_size)
    model = build_model(arch, channels, image_size, config.projection_dim, config.projection_hidden, config.projection_batchnorm).to(device)
    bf16 = uses_bf16(config.precision, device)
    if bf16:
        model = model.to(memory_format=torch.channels_last)
    augment = build_augmentation(image_size, channels, card.mean, card.std, blur=config.blur, recipe=resolve_recipe(image_size)).to(device)
    if config.compile:
        prepare_augmentation(augment, card.image_shape, device)
    learned = nn.ParameterDict(
        {name: nn.Parameter(value) for name, value in config.spec.learned_tensors(config.sampler_options).items()}
    ).to(device)
    if len(learned) and context.world_size > 1:
        raise UsageError(f"learned loss tensors ({', '.join(learned)}) are not supported under torchrun yet: run in one process")
    optimizer = OptimizerSettings.of(config).build([*model.parameters(), *learned.parameters()])
    queue = None
    if config.queue_size:
        feature_dim = model.projection_dim + model.head.output_layer.in_features if config.spec.key_features else 0
        dtype = torch.bfloat16 if bf16 else torch.float32
        queue = MomentumQueue(model, config.queue_size, config.momentum, dtype, feature_dim, mode=config.queue_mode)
    network = context.wrap_model(model, sync_batchnorm=config.sync_batchnorm)
    return model, TrainingStep(network, model, augment, optimizer, config.sampler, context, queue, learned, bf16, config.compile)


def compiled_step(
    train: Callable[[Tensor, Tensor, SamplerOptions], Tensor], device: torch.device
) -> Callable[[Tensor, Tensor, SamplerOptions], Tensor]:
    """The step's body (``train``, :attr:`TrainingStep.body`) compiled by ``torch.compile`` with static shapes:
    augmentation, forward and loss, backward (the graph that AOTAutograd derives), the finite check and the enqueue,
    none of which reads anything back; the fused update runs after it (:meth:`TrainingStep.__call__`). The one graph break is the backward call itself
    (``Tensor.backward``, which dynamo does not trace: it ends the forward's graph, and the finite check is the next).
    Nothing the step reads changes between steps but tensors at fixed addresses (the queue's buffers, the scheduled
    values, the learning rate, ``found_inf``): it compiles once. On CUDA in ``reduce-overhead`` mode each graph is
    replayed as a CUDA graph, one launch where eager mode launches every kernel from the host. The functions the step
    calls through a cache (constants, masks) are pure, so tracing through the cache, which dynamo warns of, is what
    they mean. AOTAutograd traces the backward under anomaly mode, which prints the forward's traceback of any error
    there: a stop signal while it traces is a stop (one line), not torch's anomaly report."""
    warnings.filterwarnings("ignore", message=r".*functools\.lru_cache.*-wrapped function")
    warnings.filterwarnings("ignore", message=r"Error detected in \w+Backward", category=UserWarning)
    return torch.compile(train, mode="reduce-overhead" if device.type == "cuda" else None, dynamic=False)
