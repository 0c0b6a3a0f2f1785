"""The report's figures: which ones the inputs allow, each input read now, with the heading and caption the report gives it.

Each figure's drawing is deferred (:class:`Figure`'s ``draw``, a function of :mod:`~hcl_cli.report.plots`
bound to data already read and checked), so that every input is read before the first file is
written:

- the training loss and kNN top-1 per epoch (HCL Fig. 11) and, for the supervised samplers, H-SCL's
  Assumption 1 share and four losses (H-SCL Figs. 4-5), all from pretrain's dvclive logs;
- same- vs different-label cosine similarity histograms of the test embeddings (HCL Fig. 5);
- the hardest negatives of a few test anchors under the run's sampler (HCL Fig. 12), which needs
  the encoder and the prepared images.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

from hcl_cli.config.report import ReportConfig
from hcl_cli.diagnostics import (
    ASSUMPTION1_KEY,
    LOSS_SAMPLERS,
    distinct_label_pairs,
    hardest_negatives,
    label_pair_similarities,
    loss_key,
    pick_anchors,
)
from hcl_cli.embeddings import load_embeddings
from hcl_cli.errors import HclError
from hcl_cli.image.augment import build_eval_transform
from hcl_cli.report import plots
from hcl_cli.report.escaping import code
from hcl_cli.report.inputs import Prepared, TrainedEncoder
from hcl_cli.report.plots import Series

PRETRAIN_METRICS = Path("pretrain") / "plots" / "metrics"
"""Where pretrain's dvclive logs lie under ``--plots``."""
HISTOGRAM_PAIRS = 100_000
HARD_NEGATIVES = 10
HARD_NEGATIVE_SEED = 0
LOSS_LABELS = {"ucl": "UCL", "scl": "SCL", "hucl": "H-UCL", "hscl": "H-SCL"}


@dataclass(frozen=True)
class Figure:
    """A PNG for the figures folder, with the heading and caption the report gives it.

    ``draw(path)`` writes it from inputs already read: every input is read and checked before the
    first figure is written.
    """

    file: str
    heading: str
    caption: str
    draw: Callable[[Path], None] = field(compare=False)


def read_dvclive_series(source: Path) -> Series:
    """``(steps, values)`` of one dvclive metric file (``plots/metrics/NAME.tsv``: ``step<TAB>NAME``)."""
    try:
        with open(source, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
    except OSError as exc:
        raise HclError(f"cannot read dvclive log {source}: {exc.strerror or exc}") from exc
    name = source.stem
    try:
        series = [float(row["step"]) for row in rows], [float(row[name]) for row in rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise HclError(f"dvclive log {source} is not a 'step<TAB>{name}' table: {exc}") from exc
    if not rows:
        raise HclError(f"dvclive log {source} holds no values")
    return series


def logged(path: Path) -> bool:
    """Whether pretrain logged ``path``: a regular file; anything else there (a folder, a FIFO) is a one-line HclError, never a hang or a silent skip."""
    if path.exists() and not path.is_file():
        raise HclError(f"dvclive log {path} is not a regular file")
    return path.is_file()


def pretrain_logs(plots: Path) -> Path:
    """Where pretrain's curves lie under ``--plots``: ``PLOTS/pretrain/plots/metrics`` when ``--plots`` is the dvclive folder
    (the default), ``PLOTS/plots/metrics`` when it names pretrain's ``--live-dir`` itself."""
    nested, direct = plots / PRETRAIN_METRICS, plots / PRETRAIN_METRICS.relative_to("pretrain")
    return direct if not nested.exists() and direct.exists() else nested


def epoch_series(path: Path) -> Series:
    """A dvclive log with its steps (0-based epochs, as pretrain logs them) as epochs 1, 2, ..."""
    steps, values = read_dvclive_series(path)
    return [step + 1 for step in steps], values


def training_figures(logs: Path, noun: str = "image") -> list[Figure]:
    """Loss, kNN top-1 (on test ``noun``s) and H-SCL diagnostic curves from pretrain's dvclive logs, those that were logged (read now)."""
    drawn = []
    loss_log, knn_log = logs / "loss.tsv", logs / "knn_top1.tsv"
    if logged(loss_log):
        draw = partial(
            plots.plot_curve,
            epoch_series(loss_log),
            title="Contrastive loss during pretraining",
            ylabel="loss (mean over the epoch's batches)",
        )
        drawn.append(
            Figure(
                "loss.png",
                "Training loss",
                f"Mean contrastive loss of the run's sampler over each epoch of pretraining (from {code(loss_log)}).",
                draw,
            )
        )
    if logged(knn_log):
        draw = partial(
            plots.plot_curve, epoch_series(knn_log), title=f"kNN top-1 on held-out {noun}s during pretraining", ylabel="top-1 accuracy"
        )
        drawn.append(
            Figure(
                "knn_top1.png",
                "kNN accuracy during pretraining",
                f"Weighted kNN top-1 of the backbone on held-out labelled test {noun}s, every `eval_every` epochs (HCL Fig. 11; from {code(knn_log)}).",
                draw,
            )
        )
    diagnostic_logs = {name: logs / f"{name}.tsv" for name in (ASSUMPTION1_KEY, *map(loss_key, LOSS_SAMPLERS))}
    if all([logged(path) for path in diagnostic_logs.values()]):
        losses = {LOSS_LABELS[sampler]: epoch_series(diagnostic_logs[loss_key(sampler)]) for sampler in LOSS_SAMPLERS}
        drawn.append(
            Figure(
                "hscl_diagnostics.png",
                "H-SCL diagnostics",
                "Measured after each epoch on one fixed batch of training images with fixed views. Left: share of its anchors "
                "meeting H-SCL Assumption 1 (the exp(beta s)-tilted mean of exp(s) over same-label candidates is at least that "
                "over different-label ones; H-SCL Fig. 4). Right: the UCL, SCL, H-UCL (tau+ = 0) and H-SCL losses of that batch "
                "(H-SCL Fig. 5); Lemma 1 predicts H-SCL <= H-UCL where the assumption holds.",
                partial(plots.plot_hscl_diagnostics, epoch_series(diagnostic_logs[ASSUMPTION1_KEY]), losses),
            )
        )
    return drawn


def similarity_figure(embeddings: Path, feature: str, noun: str = "image") -> list[Figure]:
    """Same- vs different-label cosine similarity histograms of the test embeddings (of ``noun``s), if they exist (read now):
    of every distinct pair when there are at most :data:`HISTOGRAM_PAIRS` (47 test graphs: 1,081), else of random pairs."""
    if not embeddings.is_file():
        return []
    data = load_embeddings(embeddings, feature)
    count = len(data.test_y)
    if count * (count - 1) // 2 <= HISTOGRAM_PAIRS:
        same, different = distinct_label_pairs(data.test_x, data.test_y)
        pairs = f"every distinct pair of the {count:,} test {noun}s, {len(same):,} with the same label and {len(different):,} with different labels"
    else:
        same, different = label_pair_similarities(data.test_x, data.test_y, pairs=HISTOGRAM_PAIRS)
        pairs = f"random pairs of test {noun}s with the same label and with different labels ({len(same):,} and {len(different):,} pairs)"
    return [
        Figure(
            "similarity.png",
            "Cosine similarity of same- and different-label pairs",
            f"Density-normalised histograms of the cosine similarity between {feature} features of {pairs} (HCL Fig. 5). Less "
            "overlap means the representation separates the classes better.",
            partial(plots.plot_similarity_histograms, same, different, feature=feature),
        )
    ]


def hard_negative_figure(config: ReportConfig, prepared: Prepared, encoder: TrainedEncoder) -> list[Figure]:
    """The hardest negatives of a few test anchors under the run's sampler (computed now).

    The batch is a fixed random draw of the pretraining batch size from the test split, embedded
    without augmentation; the sampler runs with its settings of the final epoch.
    """
    if config.anchors == 0:
        return []
    trained, model, device = encoder.config, encoder.model, encoder.device
    images, labels = prepared.splits["test"]
    batch_size = min(trained.batch_size, len(labels))
    batch = torch.randperm(len(labels), generator=torch.Generator().manual_seed(HARD_NEGATIVE_SEED))[:batch_size]
    batch_images, batch_labels = images[batch], labels[batch]
    with torch.no_grad():
        _, hidden, z = model(build_eval_transform(encoder.sidecar.mean, encoder.sidecar.std)(batch_images.to(device)))
    learned = {name: torch.tensor(values, device=device) for name, values in encoder.sidecar.learned.items()}
    options = {
        **trained.loss_options(trained.epochs - 1),
        "head_inputs": (hidden, hidden),
        "head_layer": model.head.output_layer,
        **learned,
    }
    anchors = pick_anchors(batch_labels, config.anchors)
    rows = hardest_negatives(z, batch_labels.to(device), anchors, count=HARD_NEGATIVES, sampler=trained.sampler, **options)
    title = f"The {HARD_NEGATIVES} highest-weighted negatives of {len(rows)} test anchors under the {trained.sampler} sampler"
    return [
        Figure(
            "hard_negatives.png",
            f"Hardest negatives under {trained.sampler}",
            f"Each row: a test anchor (left) and the {HARD_NEGATIVES} images its negative distribution q(x-|x) under the run's "
            f"sampler ({trained.sampler}, settings of the final epoch) weights highest, within one batch of {batch_size} "
            "un-augmented test images (the pretraining batch size); each is titled with its class and its weight w = q(x-|x). "
            "A red title marks a negative of the anchor's own class (HCL Fig. 12).",
            partial(plots.plot_hard_negatives, rows, batch_images, batch_labels, prepared.card.classes, title=title),
        )
    ]
