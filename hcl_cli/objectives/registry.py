"""The negative samplers and the options they read, each declared once.

A sampler is one function ``(PairBatch, SamplerOptions) -> NegativeWeights`` in its own module
and one :class:`Sampler` entry in :data:`SAMPLERS`. The entry names the function as an entry
point, ``"module:function"``, loaded on first use, so that ``hcl --help`` never imports torch.
It also says what the sampler needs (labels, the projection head's inputs), which options it
reads, and how they change over training (its ``schedule``). ``hcl pretrain``'s command-line
options, the ``pretrain`` group of params.yaml, validation, help text, the defaults of
:func:`~hcl_cli.objectives.contrastive_loss` and the README's option table all derive from here.

This module imports nothing heavy: the CLI reads it to build ``--help``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hcl_cli.errors import UsageError
from hcl_cli.objectives.schedules import ANNEALS, BETA_ANNEAL_STEPS, beta_at, threshold_at
from hcl_cli.option import Option

UNDIMIX_WEIGHT_LIMIT = 1000.0
"""The largest weight of one UnDiMix score (the scores are combined unnormalised)."""
UNDIMIX_WEIGHT_FLOOR = 1e-6
"""The smallest weight of a score that is not left out (0): the weights are divided by their sum in the training
precision, where a weight of 1e-300 is 0 and a sum of such weights divides 0 by 0."""


def undimix_weight_values(text: str | tuple[float, ...] | list[float]) -> tuple[float, float, float]:
    """``"1,1,1"`` (or a sequence of three numbers) as three floats, each 0 or in [1e-6, 1000], not all zero."""
    try:
        values = tuple(float(part) for part in (text.split(",") if isinstance(text, str) else text))
    except (TypeError, ValueError):
        raise ValueError("must be three comma-separated numbers (similarity, uncertainty, diversity)") from None
    if (
        len(values) != 3
        or any(value != 0 and not UNDIMIX_WEIGHT_FLOOR <= value <= UNDIMIX_WEIGHT_LIMIT for value in values)
        or sum(values) == 0
    ):
        raise ValueError(
            f"must be three numbers, each 0 or in [{UNDIMIX_WEIGHT_FLOOR:g}, {UNDIMIX_WEIGHT_LIMIT:g}] (similarity, uncertainty, diversity), not all zero"
        )
    return values  # type: ignore[return-value]


TEMPERATURE = Option("temperature", 0.5, "Softmax temperature t of the similarities s_ij = z_i.z_j / t.", minimum=1e-3, maximum=1e3)
OBJECTIVE = Option(
    "objective",
    "auto",
    "Loss: nce (InfoNCE, with tau+ debiasing where the sampler has it) or bcl (the basic contrastive loss E_q[z_i.z_j] - z_i.z_p, HCL-OT Eq. 9; no debiasing) for images (two views); jsd (InfoGraph's Jensen-Shannon local-global loss, nodes against graphs) for graphs; auto: nce for images, jsd for graphs.",
    choices=("auto", "nce", "bcl", "jsd"),
)
POSITIVES = Option(
    "positives",
    "partner",
    "Positives: partner (the anchor's other view) or labels (every same-label sample, partner included: HCL Fig. 4's oracle, H-SCL Sec. V-B; needs labels). Supervised samplers always use labels.",
    choices=("partner", "labels"),
)
BETA = Option("beta", 1.0, "Hardness concentration: negatives are tilted by exp(beta * s_ij).", minimum=0.0, maximum=1e3)
ANNEAL = Option(
    "anneal",
    "none",
    "Beta schedule: none (fixed); paper (HCL App. D.1: beta drops by beta/l every epochs/l epochs, ending at beta/l); official (HCL's code: linspace(beta, 0, l), first level twice as long).",
    choices=ANNEALS,
)
ANNEAL_STEPS = Option(
    "anneal_steps",
    BETA_ANNEAL_STEPS,
    "Beta levels l of the annealing.",
    minimum=1,
    maximum=10_000,
    read_when=(ANNEAL.name, tuple(anneal for anneal in ANNEALS if anneal != "none")),
)
DETACH_WEIGHTS = Option(
    "detach_weights",
    False,
    "Stop the gradient through the negative weights exp(beta * s_ij), as H-SCL's code does (HCL's backpropagates through them).",
)
TAU_PLUS = Option(
    "tau_plus",
    0.1,
    "Class prior tau+ of the debiasing (Chuang et al. 2020; HCL Eq. 2-4), 0 disables it. On graphs under graph_weights paper it is carried over from those image equations: HCL App. B's graph objective has none.",
    minimum=0.0,
    maximum=1.0,
    max_exclusive=True,
)
CLIP = Option(
    "clip", False, "Scale the inner products used for the negative weights into [-2, 2] (HCL Fig. 14, for unnormalised embeddings)."
)
GRAPH_WEIGHTS = Option(
    "graph_weights",
    "paper",
    "Graphs only (objective jsd), debiased, hucl and undimix: the reading of HCL's hard graph objective, which also sets tau+ and the sign of its positive correction. paper: weights exp(beta * s) on scores scaled into [-2, 2] (HCL App. B, D.2), tau+ from --tau-plus debiasing the negative term as the image Eq. 2-4 do (an extrapolation: App. B has no tau+), lowering the loss by tau+/(1 - tau+) sp(s_ip). official: HCL's graph code, JSD_hard: weights exp(-2 beta s / max|s|) that favour easy negatives, tau+ fixed at 0.5 whatever --tau-plus says, and the positive term raising the loss by tau+/(1 - tau+) sp(s_ip). undimix: paper is InfoGraph's loss with q proportional to UnDiMix's weights (no tau+); official is JSD_hard with UnDiMix's weights in place of its own (UnDiMix App. A).",
    choices=("paper", "official"),
    modality="graph",
)
THRESHOLD_START = Option("threshold_start", -0.3, "Cosine threshold l at the first epoch (H-SCL Eq. 4).", minimum=-1.0, maximum=1.0)
THRESHOLD_END = Option("threshold_end", 0.0, "Cosine threshold l at the last epoch.", minimum=-1.0, maximum=1.0)
OT_EPSILON = Option(
    "ot_epsilon",
    0.5,
    "Entropic regularisation of the coupling (the official code's reg; twice the epsilon of HCL-OT Eq. 5, whose cost has a factor 0.5).",
    minimum=1e-3,
    maximum=1e9,
)
OT_COST = Option("ot_cost", "sq", "Ground cost: sq (||z_i - z_j||^2) or exp (exp(||z_i - z_j||^2 - kappa)).", choices=("sq", "exp"))
OT_KAPPA = Option("ot_kappa", 1.0, "Offset kappa of the exp cost.", minimum=-20.0, maximum=20.0)
OT_ITERATIONS = Option("ot_iterations", 50, "Maximum Sinkhorn iterations (stops early at convergence).", minimum=1, maximum=100_000)
UNDIMIX_WEIGHTS = Option(
    "undimix_weights",
    "1,1,1",
    "Weights of similarity, uncertainty and diversity, comma-separated (the initial ones when learned).",
    parse=undimix_weight_values,
)
UNDIMIX_LEARNED = Option(
    "undimix_learned",
    False,
    "Learn the weights with the encoder (UnDiMix Table 3): softmax of learnable logits over the parts of positive weight, trained by descent on the loss (the trainer passes them as undimix_attention). Descent lowers E_q[exp(s)]: on random batches it shrinks the similarity weight and grows diversity's, toward easier negatives (an inf over q where HCL's hard sampling takes the sup).",
)
UNDIMIX_UNCERTAINTY = Option(
    "undimix_uncertainty",
    "badge",
    "Uncertainty gradients of UnDiMix Eq. 3: literal (Eq. 3 as written: the gradient of every last-layer parameter through every embedding; needs head_layer; in-batch only; the UnDiMix presets' choice) or badge (BADGE's closed form, which the paper cites: last-layer weight, other embeddings held fixed; cheap, and what a queue can keep per key). Either way Eq. 2's pseudo-posterior is a softmax over all B rows of the other view, the partner included: the printed denominator (i' != j) leaves out the match the pseudo-labelling task asks for (Sec. 3, Fig. 4).",
    choices=("badge", "literal"),
)
UNDIMIX_DIVERSITY = Option(
    "undimix_diversity",
    "negative-view",
    "Rows of UnDiMix Eq. 4's mean distance of a negative to the N - 2 images other than the anchor's and its own: negative-view (as written, x~_j': those images in the negative's view; the UnDiMix presets' choice), anchor-view (in the anchor's view) or both-views (both views of each).",
    choices=("negative-view", "anchor-view", "both-views"),
)

QUEUE_AND_AUTOGRAD = (
    "undimix with --undimix-uncertainty literal cannot use a queue: Eq. (3)'s full last-layer gradient of a queued key "
    "is not kept (use --undimix-uncertainty badge, or --queue-size 0)"
)

MOCO_SAMPLERS = ("ucl", "debiased", "hucl")
"""The samplers of ``queue_mode: moco`` (:mod:`hcl_cli.objectives.moco`): each reweights the K queued keys."""


def check_moco(sampler: str, label_positives: bool) -> None:
    """A one-line usage error for a sampler, or same-label positives, that ``queue_mode: moco`` cannot run."""
    if sampler not in MOCO_SAMPLERS:
        raise UsageError(
            f"--queue-mode moco runs {', '.join(MOCO_SAMPLERS)} (MoCo-v2's negatives are the queued keys alone); "
            f"{sampler} needs --queue-mode batch"
        )
    if label_positives:
        raise UsageError("--queue-mode moco has one positive per query (its key); --positives labels needs --queue-mode batch")


RUNTIME_INPUTS: dict[str, str] = {
    "momentum_keys": "MomentumKeys: a momentum encoder's keys of the batch and its queue of earlier keys, the candidates of every sampler (MoCo; None: in-batch)",
    "head_inputs": "(h1, h2): the inputs of the projection head's last linear layer for both views (undimix); on graphs the (n, H) inputs of the local head's last linear layer",
    "head_layer": "the projection head's last linear layer, with .weight and .bias (undimix with undimix_uncertainty=literal; on graphs the local head's, always)",
    "undimix_attention": "(3,) learnable logits of the similarity, uncertainty and diversity weights (undimix with undimix_learned)",
}
"""Tensors (not options) that :func:`~hcl_cli.objectives.contrastive_loss` takes from the trainer, by keyword."""

Schedule = Callable[[Mapping[str, Any], int, int], dict[str, Any]]
"""``(options, epoch, epochs) -> values``: the options a sampler reads in ``epoch`` (0-based)."""


def annealed_beta(options: Mapping[str, Any], epoch: int, epochs: int) -> dict[str, Any]:
    """``beta`` in ``epoch`` under the ``anneal`` schedule (HCL App. D.1)."""
    return {"beta": beta_at(options["beta"], epoch, epochs, options["anneal"], options["anneal_steps"])}


def linear_threshold(options: Mapping[str, Any], epoch: int, epochs: int) -> dict[str, Any]:
    """``threshold``, the cosine threshold of ``epoch``, linear from ``threshold_start`` to ``threshold_end`` (H-SCL Eq. 4)."""
    return {"threshold": threshold_at(options["threshold_start"], options["threshold_end"], epoch, epochs)}


LOADED: dict[str, Callable[..., Any]] = {}
"""The functions :func:`entry_point` has looked up, by name."""


def entry_point(name: str) -> Callable[..., Any]:
    """The function ``"module:function"`` names (imports its module on first use; looked up once). A plain dict, not
    ``functools.cache``: ``torch.compile`` reads the dict, where it would trace through a cache into ``importlib``."""
    if name not in LOADED:
        module, _, function = name.partition(":")
        LOADED[name] = getattr(importlib.import_module(module), function)
    return LOADED[name]


@dataclass(frozen=True)
class Sampler:
    """A negative distribution q(x-|x): its function, its paper, what it needs and the options it reads.

    ``supervised``: its negatives depend on the labels, and every same-label sample is a
    positive; an unsupervised sampler may take label positives too (``positives="labels"``, see
    :meth:`label_positives`). ``head_inputs``: it needs the inputs of the projection head's last
    layer (``options.head_inputs``). ``key_features``: what a momentum encoder's queue keeps of
    each key for it besides the key, as ``"module:function"`` ``(keys, head_inputs) -> (2B, e)``
    (the raw keys ``[k1; k2]`` and the key encoder's head inputs, as ``MomentumKeys.queue_features``
    rows), or None.
    ``schedule`` gives the values that change over training; the training loop calls it each
    epoch, and a direct call of the loss uses its values at the first epoch unless given.
    """

    weights: str
    """The function, as ``"module:function"``."""
    paper: str
    options: tuple[Option, ...] = ()
    supervised: bool = False
    head_inputs: bool = False
    schedule: Schedule | None = None
    key_features: str | None = None
    learned: str | None = None
    """Tensors the loss learns with the encoder, as ``"module:function"`` ``(options) -> {name: initial tensor}``
    (empty when the options learn nothing); the trainer optimises them and passes them by name."""

    def load(self) -> Callable[..., Any]:
        """The sampler's function (imports its module, and torch, on first use)."""
        return entry_point(self.weights)

    def learned_tensors(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The initial values of the tensors the loss learns under ``options`` (none for most samplers)."""
        return {} if self.learned is None else entry_point(self.learned)(options)

    def load_key_features(self) -> Callable[..., Any] | None:
        """The function that gives what a queue keeps of each key for this sampler, or None."""
        return None if self.key_features is None else entry_point(self.key_features)

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(option.name for option in self.options)

    def label_positives(self, options: Mapping[str, Any]) -> bool:
        """Whether every same-label sample is a positive, so that the loss needs labels, under
        ``options`` (a sampler's option values by name, missing ones at their default)."""
        return self.supervised or (POSITIVES in self.options and options.get(POSITIVES.name, POSITIVES.default) == "labels")


SAMPLERS: dict[str, Sampler] = {
    # Each entry's function is in the file its "module:function" names; tests/test_config.py resolves every one and
    # checks its signature, (PairBatch, SamplerOptions) -> NegativeWeights, and that it reads only declared options.
    "ucl": Sampler("hcl_cli.objectives.simclr:ucl", "SimCLR, Chen et al. 2020", (POSITIVES,)),  # hcl_cli/objectives/simclr.py
    "debiased": Sampler(
        "hcl_cli.objectives.hcl:debiased",  # hcl_cli/objectives/hcl.py
        "Chuang et al. 2020",
        (POSITIVES, TAU_PLUS, GRAPH_WEIGHTS),
    ),
    "hucl": Sampler(
        "hcl_cli.objectives.hcl:hucl",  # hcl_cli/objectives/hcl.py
        "HCL, Robinson et al. 2021",
        (POSITIVES, BETA, ANNEAL, ANNEAL_STEPS, DETACH_WEIGHTS, TAU_PLUS, CLIP, GRAPH_WEIGHTS),
        schedule=annealed_beta,
    ),
    "scl": Sampler("hcl_cli.objectives.hscl:scl", "H-SCL, Jiang et al.", supervised=True),  # hcl_cli/objectives/hscl.py
    "hscl": Sampler(
        "hcl_cli.objectives.hscl:hscl",  # hcl_cli/objectives/hscl.py
        "H-SCL, Jiang et al.",
        (BETA, ANNEAL, ANNEAL_STEPS, DETACH_WEIGHTS, CLIP),
        supervised=True,
        schedule=annealed_beta,
    ),
    "hscl-threshold": Sampler(
        "hcl_cli.objectives.hscl:hscl_threshold",  # hcl_cli/objectives/hscl.py
        "H-SCL, Jiang et al.",
        (THRESHOLD_START, THRESHOLD_END),
        supervised=True,
        schedule=linear_threshold,
    ),
    "ot": Sampler(
        "hcl_cli.objectives.ot:ot",  # hcl_cli/objectives/ot.py
        "HCL-OT, Jiang et al.",
        (POSITIVES, TAU_PLUS, OT_EPSILON, OT_COST, OT_KAPPA, OT_ITERATIONS),
    ),
    "undimix": Sampler(
        "hcl_cli.objectives.undimix:undimix",  # hcl_cli/objectives/undimix.py
        "UnDiMix, Tabassum et al.",
        (POSITIVES, UNDIMIX_WEIGHTS, UNDIMIX_LEARNED, UNDIMIX_UNCERTAINTY, UNDIMIX_DIVERSITY, GRAPH_WEIGHTS),
        head_inputs=True,
        key_features="hcl_cli.objectives.undimix:key_features",
        learned="hcl_cli.objectives.undimix:learned_tensors",
    ),
}
"""Every sampler by its ``--sampler`` name."""

LOSS_OPTIONS: tuple[Option, ...] = (TEMPERATURE, OBJECTIVE)
"""The options of the loss itself, read by every sampler."""


def sampler_options() -> tuple[Option, ...]:
    """Every option of the loss and the samplers, once each, in declaration order."""
    options = {option.name: option for option in LOSS_OPTIONS}
    for sampler in SAMPLERS.values():
        for option in sampler.options:
            options.setdefault(option.name, option)
    return tuple(options.values())


def users_of(name: str) -> tuple[str, ...]:
    """The samplers that read option ``name`` (all of them for the loss's own options)."""
    if any(option.name == name for option in LOSS_OPTIONS):
        return tuple(SAMPLERS)
    return tuple(sampler for sampler, spec in SAMPLERS.items() if name in spec.option_names)


def users_label(name: str) -> str:
    """``used by hucl, hscl`` (or ``used by all samplers``): who reads option ``name``, for help texts."""
    users = users_of(name)
    return "used by all samplers" if len(users) == len(SAMPLERS) else f"used by {', '.join(users)}"


def supervised_samplers() -> tuple[str, ...]:
    """The samplers that need labels."""
    return tuple(name for name, spec in SAMPLERS.items() if spec.supervised)


def lookup(sampler: str) -> Sampler:
    """The registered sampler called ``sampler``, or a one-line usage error."""
    if sampler not in SAMPLERS:
        raise UsageError(f"--sampler must be one of {', '.join(SAMPLERS)} (got {sampler!r})")
    return SAMPLERS[sampler]
