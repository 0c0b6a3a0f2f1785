"""``hcl report``: ``reports/report.md``, the run's metrics, baselines, provenance, protocol, parameters and figures.

Sections, each written only when its inputs exist (only the metrics folder is required):

- the run: the dataset as its prepared card describes it (name, source, images per split,
  classes, image shape), whether pretraining read the labels (a supervised sampler, or
  ``positives = labels``), and when, where and with which torch and git commit the encoder was
  trained (its sidecar's ``run`` and ``versions``);
- the metric table, read from ``metrics/knn.json`` and ``metrics/linear.json`` (4 decimals), each
  accuracy with its 95% Wilson interval from the test size the file records, and beside the kNN
  result two baselines computed here with the same kNN settings: the same encoder architecture
  untrained (seeded with the run's seed, embedded with the same eval transform) and the raw
  pixels (flattened, scaled to [0, 1], L2-normalised);
- the evaluation protocol, with the settings those files record;
- the parameter table: the pretrain parameters the run's sampler reads (none it ignores), and
  every key of the other params.yaml groups, each holding the value the run recorded (pretrain:
  the encoder's sidecar; prepare: the dataset card; knn, linear: their metrics files) where there
  is one;
- figures (PNG, in ``figures/`` beside the report): the training loss and kNN top-1 per epoch
  (HCL Fig. 11) and, for the supervised samplers, H-SCL's Assumption 1 share and four losses
  (H-SCL Figs. 4-5), all from pretrain's dvclive logs; same- vs different-label cosine similarity
  histograms of the test embeddings, of the feature the kNN (else linear) evaluation read (HCL
  Fig. 5); and the hardest negatives of a few test anchors under the run's sampler (HCL Fig. 12),
  which needs the encoder and the prepared images.

Every input is read, and every baseline computed, before the first file is written.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from hcl_cli import figures
from hcl_cli.artifacts import check_outputs_apart, sidecar_path, write_text
from hcl_cli.augment import build_eval_transform
from hcl_cli.config import FEATURES, KnnConfig, LinearConfig, PretrainConfig, ReportConfig, StageConfig
from hcl_cli.datasets import CARD_FILE, DatasetCard, load_card, load_split
from hcl_cli.diagnostics import ASSUMPTION1_KEY, LOSS_SAMPLERS, hardest_negatives, label_pair_similarities, loss_key, pick_anchors
from hcl_cli.embeddings import load_embeddings
from hcl_cli.errors import HclError, UsageError
from hcl_cli.knn import knn_predict
from hcl_cli.metrics import EvaluationMetrics, load_metrics, topk_accuracy
from hcl_cli.models import ContrastiveModel, EncoderSidecar, build_model, check_fits_dataset, encode, load_encoder
from hcl_cli.params import load_params
from hcl_cli.runtime import resolve_device
from hcl_cli.stats import wilson_interval

METRIC_FILES: dict[str, tuple[str, type[StageConfig]]] = {"knn": ("kNN", KnnConfig), "linear": ("Linear readout", LinearConfig)}
FIGURES_FOLDER = "figures"
PRETRAIN_METRICS = Path("pretrain") / "plots" / "metrics"
HISTOGRAM_PAIRS = 100_000
HARD_NEGATIVES = 10
HARD_NEGATIVE_SEED = 0
BASELINE_BATCH_SIZE = 512
KNN_SETTINGS = ("k", "temperature", "chunk_size", "bank_chunk_size")
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


@dataclass(frozen=True)
class Recorded:
    """A stage's parameter values as the run recorded them, and the file that records them."""

    values: dict[str, Any]
    source: str


@dataclass(frozen=True)
class TrainedEncoder:
    """The run's encoder (in eval mode), its sidecar and the pretrain configuration the sidecar records."""

    path: Path
    model: ContrastiveModel
    sidecar: EncoderSidecar
    config: PretrainConfig

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


@dataclass(frozen=True)
class Prepared:
    """The prepared dataset folder: its card and its labelled splits, read once."""

    folder: Path
    card: DatasetCard
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class MetricRow:
    """One row of the metric table: an evaluation of an encoder (or of none), and where its numbers come from."""

    evaluation: str
    encoder: str
    metrics: EvaluationMetrics
    source: str

    def cells(self) -> list[str]:
        accuracies = [cell for key in ("top1", "top5") for cell in accuracy_cells(getattr(self.metrics, key), self.metrics.test_size)]
        return [self.evaluation, self.encoder, self.metrics.feature, f"{self.metrics.test_size:,}", *accuracies, self.source]


def run(config: ReportConfig) -> None:
    """Write ``config.out`` and its figures from whichever inputs exist, once all of them are read."""
    metrics_folder, out = Path(config.metrics), Path(config.out)
    figure_folder = out.parent / FIGURES_FOLDER
    inputs = {
        "--params-file": config.params_file,
        "--metrics": config.metrics,
        "--plots": config.plots,
        "--embeddings": config.embeddings,
        "--data": config.data,
        "--model": config.model,
    }
    check_outputs_apart(inputs, {"--out": out, "--out (its figures)": figure_folder})
    metrics = read_metric_files(metrics_folder)
    prepared = read_prepared(Path(config.data), metrics, metrics_folder) if Path(config.data).is_dir() else None
    encoder = read_encoder(Path(config.model), prepared) if Path(config.model).is_file() else None
    recorded = {name: Recorded(metrics[name].params, f"`{metrics_folder / f'{name}.json'}`") for name in METRIC_FILES if name in metrics}
    if prepared is not None:
        card = prepared.card
        recorded["prepare"] = Recorded(
            {"dataset": card.name} | ({"seed": card.seed} if card.seed is not None else {}), f"`{prepared.folder / CARD_FILE}`"
        )
    if encoder is not None:
        recorded["pretrain"] = Recorded(encoder.config.params(), f"`{sidecar_path(encoder.path)}`")
    recorded["report"] = Recorded(config.params(), "`hcl report` options")

    rows = [MetricRow(METRIC_FILES[name][0], "trained", values, f"`{metrics_folder / f'{name}.json'}`") for name, values in metrics.items()]
    if "knn" in metrics and prepared is not None:
        rows[1:1] = baseline_rows(metrics["knn"], prepared, encoder)
    feature = next(iter(metrics.values())).feature
    drawn = [
        *training_figures(Path(config.plots) / PRETRAIN_METRICS),
        *similarity_figure(Path(config.embeddings), feature),
        *(hard_negative_figure(config, prepared, encoder) if prepared is not None and encoder is not None else []),
    ]
    sections = [
        f"# {config.title}",
        run_section(prepared, encoder, Path(config.data), Path(config.model)),
        metric_section(rows, encoder, prepared),
        protocol_section(metrics, encoder, baselines=len(rows) > len(metrics)),
        parameter_section(Path(config.params_file), recorded, encoder),
        figure_section(drawn),
    ]
    for figure in drawn:
        figure.draw(figure_folder / figure.file)
    write_text(out, "\n\n".join(section for section in sections if section) + "\n")
    print(f"hcl report: wrote {out} with {len(drawn)} figure(s)")


def read_metric_files(folder: Path) -> dict[str, EvaluationMetrics]:
    """The metrics files present in ``folder``, by stage; a missing folder, or neither file, is an error."""
    if not folder.is_dir():
        raise HclError(f"metrics folder {folder} not found: run hcl knn-eval and hcl linear-eval first")
    paths = {name: folder / f"{name}.json" for name in METRIC_FILES}
    metrics = {name: load_metrics(path, METRIC_FILES[name][1]) for name, path in paths.items() if path.is_file()}
    if not metrics:
        raise HclError(f"metrics folder {folder} holds neither knn.json nor linear.json: run hcl knn-eval and hcl linear-eval first")
    return metrics


def read_prepared(folder: Path, metrics: dict[str, EvaluationMetrics], metrics_folder: Path) -> Prepared:
    """The prepared dataset's card and labelled splits; its test split must be the one the metrics scored."""
    card = load_card(folder)
    for name, values in metrics.items():
        if values.test_size != card.counts["test"]:
            raise HclError(
                f"{metrics_folder / f'{name}.json'} scored {values.test_size} test images, but {folder} holds {card.counts['test']}: "
                "the metrics come from another dataset (run the pipeline again, or give the --data it evaluated)"
            )
    return Prepared(folder, card, {split: load_split(folder, split) for split in ("train", "test")})


def read_encoder(path: Path, prepared: Prepared | None) -> TrainedEncoder:
    """The encoder, its sidecar and its pretrain configuration (``config``), checked against the prepared images."""
    model, sidecar = load_encoder(path, resolve_device("auto"))
    try:
        config = PretrainConfig(**sidecar.config)
    except (KeyError, TypeError, UsageError) as exc:
        raise HclError(f"{sidecar_path(path)}: 'config' is not a valid pretrain configuration ({exc})") from exc
    if prepared is not None:
        check_fits_dataset(model, prepared.card.image_shape, str(path), str(prepared.folder))
    return TrainedEncoder(path, model, sidecar, config)


def baseline_rows(knn: EvaluationMetrics, prepared: Prepared, encoder: TrainedEncoder | None) -> list[MetricRow]:
    """kNN of the untrained encoder (when the encoder is known) and of the raw pixels, with the settings of ``knn``.

    The untrained encoder is the run's architecture initialised with the run's seed, in eval mode,
    embedded with the run's eval transform; the pixels are each image flattened (the bank stays
    uint8: kNN converts each chunk to float32 and L2-normalises it, in which the 1/255 scale cancels).
    """
    (train_images, train_labels), (test_images, test_labels) = prepared.splits["train"], prepared.splits["test"]
    device = encoder.device if encoder is not None else resolve_device("auto")
    steps: list[tuple[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]]] = []
    if encoder is not None:
        untrained = f"untrained {encoder.model.arch} (seed {encoder.config.seed})"
        steps.append((untrained, partial(untrained_features, encoder, train_images, test_images, knn.feature)))
    steps.append(("none: raw pixels", lambda: (train_images.flatten(1), test_images.flatten(1).float() / 255.0)))
    rows = []
    for name, features in tqdm(steps, desc="report baselines", unit="baseline", disable=None):
        bank, queries = features()
        scores = knn_predict(
            bank,
            train_labels,
            queries.to(device),
            num_classes=prepared.card.num_classes,
            **{key: knn.params[key] for key in KNN_SETTINGS},
        )
        accuracy = topk_accuracy(scores, test_labels)
        params = knn.params | {"feature": knn.feature if name.startswith("untrained") else "pixels"}
        rows.append(
            MetricRow(
                "kNN (baseline)", name, EvaluationMetrics(accuracy[1], accuracy[5], len(test_labels), params), "computed by `hcl report`"
            )
        )
    return rows


def untrained_features(
    encoder: TrainedEncoder, train_images: torch.Tensor, test_images: torch.Tensor, feature: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``feature`` embeddings of the train and test images by the run's architecture at its seeded initialisation."""
    trained = encoder.model
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(encoder.config.seed)
        model = build_model(trained.arch, trained.in_channels, trained.image_size, trained.projection_dim)
    model = model.to(encoder.device).eval()
    transform = build_eval_transform(encoder.sidecar.mean, encoder.sidecar.std)
    index = FEATURES.index(feature)  # encode returns (backbone, projection)
    train = encode(model, transform, train_images, BASELINE_BATCH_SIZE, description="untrained: embed train")[index]
    test = encode(model, transform, test_images, BASELINE_BATCH_SIZE, description="untrained: embed test")[index]
    return train, test


def accuracy_cells(accuracy: float, test_size: int) -> list[str]:
    """An accuracy (4 decimals) and its 95% Wilson interval on ``test_size`` test images."""
    low, high = wilson_interval(accuracy, test_size)
    return [f"{accuracy:.4f}", f"[{low:.4f}, {high:.4f}]"]


def labels_note(encoder: TrainedEncoder) -> str:
    """Whether pretraining read the labels, and why."""
    config = encoder.config
    if config.spec.supervised:
        return (
            f"**yes**: `{config.sampler}` is a supervised sampler (its negatives are chosen by label and every same-label "
            "image is a positive), so the encoder has seen the train labels: this is not a self-supervised result"
        )
    if config.needs_labels:
        return (
            f"**yes**: `{config.sampler}` ran with positives = labels (every same-label image is a positive), so the encoder "
            "has seen the train labels: this is not a self-supervised result"
        )
    return f"no: `{config.sampler}` is self-supervised (the labels are read only by the evaluations)"


def run_section(prepared: Prepared | None, encoder: TrainedEncoder | None, data: Path, model: Path) -> str:
    """The dataset (from its card), whether pretraining used labels, and when, where and with what the encoder was trained."""
    lines = ["## Run", ""]
    if prepared is None:
        lines.append(f"- **Dataset**: not known: no prepared dataset folder at `{data}`.")
    else:
        card = prepared.card
        counts = ", ".join(f"{count:,} {split}" for split, count in card.counts.items())
        shape = " x ".join(map(str, card.image_shape))
        skipped = f"; {card.skipped:,} unreadable files were skipped" if card.skipped else ""
        lines.append(
            f"- **Dataset**: `{card.name}` ({card.source or 'source not recorded'}): {counts} images, "
            f"{card.num_classes} classes, images of {shape} (channels x height x width){skipped}; from `{prepared.folder / CARD_FILE}`."
        )
        if encoder is not None and encoder.sidecar.dataset not in (None, card.name):
            lines.append(f"- **Warning**: the encoder's sidecar says it was trained on `{encoder.sidecar.dataset}`, not `{card.name}`.")
    if encoder is None:
        lines.append(f"- **Encoder**: none at `{model}`: the pretraining, its provenance and the untrained baseline are not reported.")
        return "\n".join(lines)
    sidecar, source = encoder.sidecar, f"`{sidecar_path(encoder.path)}`"
    lines.append(
        f"- **Pretraining**: `{encoder.config.sampler}`, {encoder.model.arch}, {sidecar.epoch if sidecar.epoch is not None else '?'} epochs; labels used: {labels_note(encoder)}."
    )
    record = sidecar.run
    if record is not None:
        device = record.get("device") or {}
        processes = sidecar.world_size
        lines.append(
            f"- **Trained**: {record.get('started', '?')} to {record.get('finished', '?')}{duration(record)} on "
            f"{device.get('type', '?')} ({device.get('name') or 'unnamed'}){f' x {processes} processes' if processes != 1 else ''}, "
            f"host `{record.get('host', '?')}`, git commit `{record.get('git_commit') or 'none (not in a git repository)'}`."
        )
    else:
        lines.append(
            f"- **Trained**: when, where and at which commit is not recorded in {source} (an encoder from before hcl recorded its runs)."
        )
    versions = sidecar.versions
    software = ", ".join(f"{name} {versions[name]}" for name in ("torch", "torchvision", "hcl", "python") if name in versions)
    lines.append(f"- **Software**: {software or 'not recorded'} (from {source}).")
    return "\n".join(lines)


def duration(record: dict[str, Any]) -> str:
    """`` (1 h 02 min)`` between the record's start and finish, or nothing when either is unreadable."""
    try:
        seconds = int(
            (datetime.datetime.fromisoformat(record["finished"]) - datetime.datetime.fromisoformat(record["started"])).total_seconds()
        )
    except (KeyError, TypeError, ValueError):
        return ""
    hours, minutes = divmod(seconds // 60, 60)
    return f" ({hours} h {minutes:02d} min)" if hours else f" ({minutes} min {seconds % 60:02d} s)"


def metric_section(rows: list[MetricRow], encoder: TrainedEncoder | None, prepared: Prepared | None) -> str:
    """The metric table: top-1 and top-5 of each evaluation and baseline on the test split, with 95% intervals."""
    labelled = (
        f" **Pretraining used the labels** (`{encoder.config.sampler}`; see Run)."
        if encoder is not None and encoder.config.needs_labels
        else ""
    )
    classes = prepared.card.num_classes if prepared is not None else None
    trivial = f" With {classes} classes, top-5 is 1 by construction." if classes is not None and classes <= 5 else ""
    return "\n".join(
        [
            "## Metrics",
            "",
            "Accuracy on the test split: the share of its test images whose label is the top class (top-1) or among the five "
            "top classes (top-5), rounded to 4 decimals, with its 95% Wilson interval from the number of test images; "
            "differences within the intervals are test-split noise. The kNN baselines beside the result use the same kNN "
            "settings; the numbers come from one pretraining seed (the spread over seeds is not measured here: "
            f"`dvc exp run -S pretrain.seed=...` and `hcl compare` give it).{trivial}{labelled}",
            "",
            "| Evaluation | Encoder | Feature | Test images | Top-1 | 95% interval | Top-5 | 95% interval | Source |",
            "|:--|:--|:--|--:|--:|:--|--:|:--|:--|",
            *(f"| {' | '.join(row.cells())} |" for row in rows),
        ]
    )


def protocol_section(metrics: dict[str, EvaluationMetrics], encoder: TrainedEncoder | None, *, baselines: bool) -> str:
    """How each number was obtained, with the settings recorded in its metrics file."""
    lines = ["## Evaluation protocol", "", "The encoder is frozen and in eval mode (BatchNorm uses its running statistics).", ""]
    if "knn" in metrics:
        knn = metrics["knn"].params
        lines.append(
            f"- **kNN** (Wu et al. 2018, as in HCL Sec. 6.3), on the embeddings of the un-augmented train and test images: the "
            f"{knn['feature']} features are L2-normalised; each test embedding's k = {knn['k']} most cosine-similar train "
            f"embeddings vote for their label with weight exp(cos / T), T = {knn['temperature']}; top-1 and top-5 rank the summed "
            "votes per class. Nothing is trained."
        )
    if "linear" in metrics:
        lines.append(linear_protocol(metrics["linear"]))
    if baselines:
        untrained = (
            f"the same architecture ({encoder.model.arch}) untrained: initialised with the run's seed {encoder.config.seed}, "
            "in eval mode (BatchNorm at its initial statistics), its features of the prepared images under the run's eval "
            "transform (per-channel normalisation, no augmentation); and "
            if encoder is not None
            else ""
        )
        lines.append(
            f"- **Baselines** (computed by `hcl report` with the kNN settings above): {untrained}the raw pixels, each image "
            "flattened, scaled to [0, 1] and L2-normalised. Pretraining is worth its cost where the trained encoder beats both "
            "beyond the intervals."
        )
    lines.append(
        "- **Intervals**: the 95% Wilson score interval of a binomial proportion (Wilson 1927) on the number of test images; "
        "it counts the test-split noise only, not the variation over pretraining seeds."
    )
    return "\n".join(lines)


def linear_protocol(linear: EvaluationMetrics) -> str:
    """The linear readout's protocol bullet: on the fixed embeddings, or the papers' on augmented views."""
    params = linear.params
    if params.get("protocol") == "paper":
        augmentation = linear.details.get("augmentation") if isinstance(linear.details.get("augmentation"), dict) else {}
        recipe = (
            f"the {augmentation['recipe']} recipe{' with blur' if augmentation.get('blur') else ''}, " if "recipe" in augmentation else ""
        )
        return (
            f"- **Linear readout** (the papers' protocol, as HCL's code): a linear classifier W x + b on the raw {params['feature']} "
            f"features of train images augmented afresh every epoch as in pretraining ({recipe}seed {params['seed']}), trained by "
            f"minibatch Adam (batches of {params['batch_size']}, learning rate {params['lr']}, weight decay {params['weight_decay']} "
            f"on W and b) on the cross-entropy for {params['epochs']} epochs; scored once on the un-augmented test images."
        )
    solver = (
        f"full-batch L-BFGS (strong Wolfe line search, step size {params['lr']}) for at most {params['epochs']} iterations"
        if params["optimizer"] == "lbfgs"
        else f"full-batch Adam (learning rate {params['lr']}) for {params['epochs']} steps"
    )
    return (
        f"- **Linear readout** (HCL Sec. 6), on the embeddings of the un-augmented train and test images: a linear classifier "
        f"W x + b on the {params['feature']} features, standardised with the train split's per-feature mean and standard "
        "deviation, trained on the whole train split by minimising "
        f"cross-entropy + {params['weight_decay']} / 2 * ||W||^2 with {solver}, initialisation seed {params['seed']}; "
        "scored once on the test split."
    )


def parameter_section(params_file: Path, recorded: dict[str, Recorded], encoder: TrainedEncoder | None) -> str:
    """One row per parameter of every group of ``params_file`` (and of every recorded stage).

    The value is the one the run recorded where there is one, else params.yaml's; a params.yaml
    value that differs from the recorded one (a change not yet reproduced) is shown beside it. The
    pretrain group lists only the parameters the run's sampler reads (by the encoder's
    configuration, else by params.yaml's).
    """
    declared = load_params(params_file) if params_file.is_file() else {}
    used = used_pretrain_params(encoder, declared.get("pretrain"))
    rows = []
    for group in dict.fromkeys([*declared, *recorded]):
        planned = declared.get(group) if isinstance(declared.get(group), dict) else {}
        run = recorded.get(group)
        for name in dict.fromkeys([*planned, *(run.values if run else {})]):
            if group == "pretrain" and used is not None and name not in used:
                continue
            if run is not None and name in run.values:
                value, source = format_value(run.values[name]), run.source
                if name in planned and planned[name] != run.values[name]:
                    value += f" (params.yaml: {format_value(planned[name])})"
            else:
                value, source = format_value(planned[name]), f"`{params_file}`"
            rows.append(f"| {group} | {name} | {value} | {source} |")
    if not rows:
        return ""
    note = "The pretrain parameters are those the run's sampler reads; the others do not change the run." if used is not None else ""
    return "\n".join(
        ["## Parameters", "", *([note, ""] if note else []), "| Stage | Parameter | Value | Source |", "|:--|:--|:--|:--|", *rows]
    )


def used_pretrain_params(encoder: TrainedEncoder | None, planned: Any) -> set[str] | None:
    """The names of the pretrain parameters the run's sampler reads; None when neither the encoder nor params.yaml tells."""
    if encoder is not None:
        return set(encoder.config.used_params())
    try:
        return set(PretrainConfig(**planned).used_params()) if isinstance(planned, dict) else None
    except UsageError:
        return None


def format_value(value: Any) -> str:
    """A parameter value as it reads in params.yaml (``true``, ``0.001``, ``hucl``), safe in a table cell."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value).replace("|", "\\|")


def figure_section(drawn: list[Figure]) -> str:
    """Each figure as a linked image and a numbered caption; empty when none was drawn."""
    if not drawn:
        return ""
    lines = ["## Figures"]
    for number, figure in enumerate(drawn, start=1):
        lines += [
            "",
            f"### {figure.heading}",
            "",
            f"![{figure.heading}]({FIGURES_FOLDER}/{figure.file})",
            "",
            f"*Figure {number}. {figure.caption}*",
        ]
    return "\n".join(lines)


def epoch_series(path: Path) -> figures.Series:
    """A dvclive log with its steps (0-based epochs, as pretrain logs them) as epochs 1, 2, ..."""
    steps, values = figures.read_dvclive_series(path)
    return [step + 1 for step in steps], values


def training_figures(logs: Path) -> list[Figure]:
    """Loss, kNN top-1 and H-SCL diagnostic curves from pretrain's dvclive logs, those that were logged (read now)."""
    drawn = []
    loss_log, knn_log = logs / "loss.tsv", logs / "knn_top1.tsv"
    if loss_log.is_file():
        draw = partial(
            figures.plot_curve,
            epoch_series(loss_log),
            title="Contrastive loss during pretraining",
            ylabel="loss (mean over the epoch's batches)",
        )
        drawn.append(
            Figure(
                "loss.png",
                "Training loss",
                f"Mean contrastive loss of the run's sampler over each epoch of pretraining (from `{loss_log}`).",
                draw,
            )
        )
    if knn_log.is_file():
        draw = partial(
            figures.plot_curve, epoch_series(knn_log), title="kNN top-1 on held-out images during pretraining", ylabel="top-1 accuracy"
        )
        drawn.append(
            Figure(
                "knn_top1.png",
                "kNN accuracy during pretraining",
                f"Weighted kNN top-1 of the backbone on held-out labelled test images, every `eval_every` epochs (HCL Fig. 11; from `{knn_log}`).",
                draw,
            )
        )
    diagnostic_logs = {name: logs / f"{name}.tsv" for name in (ASSUMPTION1_KEY, *map(loss_key, LOSS_SAMPLERS))}
    if all(path.is_file() for path in diagnostic_logs.values()):
        losses = {LOSS_LABELS[sampler]: epoch_series(diagnostic_logs[loss_key(sampler)]) for sampler in LOSS_SAMPLERS}
        drawn.append(
            Figure(
                "hscl_diagnostics.png",
                "H-SCL diagnostics",
                "Measured after each epoch on one fixed batch of training images with fixed views. Left: share of its anchors "
                "meeting H-SCL Assumption 1 (the exp(beta s)-tilted mean of exp(s) over same-label candidates is at least that "
                "over different-label ones; H-SCL Fig. 4). Right: the UCL, SCL, H-UCL (tau+ = 0) and H-SCL losses of that batch "
                "(H-SCL Fig. 5); Lemma 1 predicts H-SCL <= H-UCL where the assumption holds.",
                partial(figures.plot_hscl_diagnostics, epoch_series(diagnostic_logs[ASSUMPTION1_KEY]), losses),
            )
        )
    return drawn


def similarity_figure(embeddings: Path, feature: str) -> list[Figure]:
    """Same- vs different-label cosine similarity histograms of the test embeddings, if they exist (read now)."""
    if not embeddings.is_file():
        return []
    data = load_embeddings(embeddings, feature)
    same, different = label_pair_similarities(data.test_x, data.test_y, pairs=HISTOGRAM_PAIRS)
    return [
        Figure(
            "similarity.png",
            "Cosine similarity of same- and different-label pairs",
            f"Density-normalised histograms of the cosine similarity between {feature} features of random pairs of test images "
            f"with the same label and with different labels ({len(same):,} and {len(different):,} pairs; HCL Fig. 5). Less "
            "overlap means the representation separates the classes better.",
            partial(figures.plot_similarity_histograms, same, different, feature=feature),
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
    options = trained.loss_options(trained.epochs - 1) | {"head_inputs": (hidden, hidden), "head_layer": model.head.output_layer} | learned
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
            partial(figures.plot_hard_negatives, rows, batch_images, batch_labels, prepared.card.classes, title=title),
        )
    ]
