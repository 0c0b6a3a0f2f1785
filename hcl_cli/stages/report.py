"""``hcl report``: ``reports/report.md``, the run's metrics, protocol, parameters and figures.

Sections, each written only when its inputs exist (only the metrics folder is required):

- the metric table, read from ``metrics/knn.json`` and ``metrics/linear.json`` (4 decimals);
- the evaluation protocol, with the settings those files record;
- the parameter table, one row per key of each params.yaml group, holding the value the run
  recorded (pretrain: the encoder's sidecar; knn, linear: their metrics files) where there is one;
- figures (PNG, in ``figures/`` beside the report): the training loss and kNN top-1 per epoch
  (HCL Fig. 11) and, for the supervised samplers, H-SCL's Assumption 1 share and four losses
  (H-SCL Figs. 4-5), all from pretrain's dvclive logs; same- vs different-label cosine similarity
  histograms of the test embeddings, of the feature the kNN (else linear) evaluation read (HCL
  Fig. 5); and the hardest negatives of a few test anchors under the run's sampler (HCL Fig. 12),
  which needs the encoder and the prepared images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from hcl_cli import figures
from hcl_cli.artifacts import check_outputs_apart, is_finite_number, read_json, sidecar_path, write_text
from hcl_cli.augment import build_eval_transform
from hcl_cli.config import KnnConfig, LinearConfig, PretrainConfig, ReportConfig, StageConfig
from hcl_cli.datasets import load_card, load_split
from hcl_cli.diagnostics import ASSUMPTION1_KEY, LOSS_SAMPLERS, hardest_negatives, label_pair_similarities, loss_key, pick_anchors
from hcl_cli.embeddings import load_embeddings
from hcl_cli.errors import HclError, UsageError
from hcl_cli.models import check_fits_dataset, load_encoder
from hcl_cli.params import load_params
from hcl_cli.runtime import resolve_device

METRIC_FILES: dict[str, tuple[str, type[StageConfig]]] = {"knn": ("kNN", KnnConfig), "linear": ("Linear readout", LinearConfig)}
FIGURES_FOLDER = "figures"
PRETRAIN_METRICS = Path("pretrain") / "plots" / "metrics"
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


@dataclass(frozen=True)
class Recorded:
    """A stage's parameter values as the run recorded them, and the file that records them."""

    values: dict[str, Any]
    source: str


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
    metrics = read_metrics(metrics_folder)
    recorded = {
        name: Recorded({key: metrics[name][key] for key in stage.param_names()}, f"`{metrics_folder / f'{name}.json'}`")
        for name, (_, stage) in METRIC_FILES.items()
        if name in metrics
    }
    model = Path(config.model)
    encoder = trained_config(model) if model.is_file() else None
    if encoder is not None:
        recorded["pretrain"] = Recorded(encoder.params(), f"`{sidecar_path(model)}`")
    recorded["report"] = Recorded(config.params(), "`hcl report` options")

    feature = next(iter(metrics.values()))["feature"]
    drawn = [
        *training_figures(Path(config.plots) / PRETRAIN_METRICS),
        *similarity_figure(Path(config.embeddings), feature),
        *(hard_negative_figure(config, encoder) if encoder is not None else []),
    ]
    sections = [
        f"# {config.title}",
        metric_section(metrics, metrics_folder),
        protocol_section(metrics),
        parameter_section(Path(config.params_file), recorded),
        figure_section(drawn),
    ]
    for figure in drawn:
        figure.draw(figure_folder / figure.file)
    write_text(out, "\n\n".join(section for section in sections if section) + "\n")
    print(f"hcl report: wrote {out} with {len(drawn)} figure(s)")


def read_metrics(folder: Path) -> dict[str, dict[str, Any]]:
    """The metrics files present in ``folder``, by stage; a missing folder, or neither file, is an error."""
    if not folder.is_dir():
        raise HclError(f"metrics folder {folder} not found: run hcl knn-eval and hcl linear-eval first")
    paths = {name: folder / f"{name}.json" for name in METRIC_FILES}
    metrics = {name: read_json(path, what=f"{METRIC_FILES[name][0]} metrics") for name, path in paths.items() if path.is_file()}
    if not metrics:
        raise HclError(f"metrics folder {folder} holds neither knn.json nor linear.json: run hcl knn-eval and hcl linear-eval first")
    for name, values in metrics.items():
        path = paths[name]
        for key in ("top1", "top5"):
            value = values.get(key)
            if not is_finite_number(value) or not 0.0 <= value <= 1.0:
                raise HclError(f"{path}: {key!r} must be a number in [0, 1] (got {value!r})")
        missing = [key for key in METRIC_FILES[name][1].param_names() if key not in values]
        if missing:
            raise HclError(f"{path} does not record its setting {', '.join(missing)}: run hcl {name}-eval again")
    return metrics


def trained_config(model: Path) -> PretrainConfig:
    """The pretrain configuration recorded in the encoder's sidecar (``config``)."""
    sidecar = read_json(sidecar_path(model), what="encoder sidecar")
    try:
        return PretrainConfig(**sidecar["config"])
    except (KeyError, TypeError, UsageError) as exc:
        raise HclError(f"{sidecar_path(model)}: 'config' is not a valid pretrain configuration ({exc})") from exc


def metric_section(metrics: dict[str, dict[str, Any]], folder: Path) -> str:
    """The metric table: top-1 and top-5 of each evaluation on the test split, as the files hold them."""
    rows = [
        f"| {METRIC_FILES[name][0]} | {values['feature']} | {values['top1']:.4f} | {values['top5']:.4f} | `{folder / f'{name}.json'}` |"
        for name, values in metrics.items()
    ]
    return "\n".join(
        [
            "## Metrics",
            "",
            "Accuracy on the test split (share of test images, rounded to 4 decimals).",
            "",
            "| Evaluation | Feature | Top-1 | Top-5 | Source |",
            "|:--|:--|--:|--:|:--|",
            *rows,
        ]
    )


def protocol_section(metrics: dict[str, dict[str, Any]]) -> str:
    """How each number was obtained, with the settings recorded in its metrics file."""
    lines = ["## Evaluation protocol", "", "Evaluations read the frozen encoder's embeddings of the train and test splits (eval mode, no augmentation).", ""]
    if "knn" in metrics:
        knn = metrics["knn"]
        lines.append(
            f"- **kNN** (Wu et al. 2018, as in HCL Sec. 6.3): the {knn['feature']} features are L2-normalised; each test "
            f"embedding's k = {knn['k']} most cosine-similar train embeddings vote for their label with weight "
            f"exp(cos / T), T = {knn['temperature']}; top-1 and top-5 rank the summed votes per class. Nothing is trained."
        )
    if "linear" in metrics:
        linear = metrics["linear"]
        solver = (
            f"full-batch L-BFGS (strong Wolfe line search, step size {linear['lr']}) for at most {linear['epochs']} iterations"
            if linear["optimizer"] == "lbfgs"
            else f"full-batch Adam (learning rate {linear['lr']}) for {linear['epochs']} steps"
        )
        lines.append(
            f"- **Linear readout** (HCL Sec. 6): a linear classifier W x + b on the {linear['feature']} features, standardised "
            "with the train split's per-feature mean and standard deviation, trained on the whole train split by minimising "
            f"cross-entropy + {linear['weight_decay']} / 2 * ||W||^2 with {solver}, initialisation seed {linear['seed']}; "
            "scored once on the test split."
        )
    return "\n".join(lines)


def parameter_section(params_file: Path, recorded: dict[str, Recorded]) -> str:
    """One row per parameter of every group of ``params_file`` (and of every recorded stage).

    The value is the one the run recorded where there is one, else params.yaml's; a params.yaml
    value that differs from the recorded one (a change not yet reproduced) is shown beside it.
    """
    declared = load_params(params_file) if params_file.is_file() else {}
    rows = []
    for group in dict.fromkeys([*declared, *recorded]):
        planned = declared.get(group) if isinstance(declared.get(group), dict) else {}
        run = recorded.get(group)
        for name in dict.fromkeys([*planned, *(run.values if run else {})]):
            if run is not None and name in run.values:
                value, source = format_value(run.values[name]), run.source
                if name in planned and planned[name] != run.values[name]:
                    value += f" (params.yaml: {format_value(planned[name])})"
            else:
                value, source = format_value(planned[name]), f"`{params_file}`"
            rows.append(f"| {group} | {name} | {value} | {source} |")
    if not rows:
        return ""
    return "\n".join(["## Parameters", "", "| Stage | Parameter | Value | Source |", "|:--|:--|:--|:--|", *rows])


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
        lines += ["", f"### {figure.heading}", "", f"![{figure.heading}]({FIGURES_FOLDER}/{figure.file})", "", f"*Figure {number}. {figure.caption}*"]
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
        draw = partial(figures.plot_curve, epoch_series(loss_log), title="Contrastive loss during pretraining", ylabel="loss (mean over the epoch's batches)")
        drawn.append(Figure("loss.png", "Training loss", f"Mean contrastive loss of the run's sampler over each epoch of pretraining (from `{loss_log}`).", draw))
    if knn_log.is_file():
        draw = partial(figures.plot_curve, epoch_series(knn_log), title="kNN top-1 on held-out images during pretraining", ylabel="top-1 accuracy")
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


def hard_negative_figure(config: ReportConfig, trained: PretrainConfig) -> list[Figure]:
    """The hardest negatives of a few test anchors under the run's sampler, if the prepared images exist (computed now).

    The batch is a fixed random draw of the pretraining batch size from the test split, embedded
    without augmentation; the sampler runs with its settings of the final epoch.
    """
    if config.anchors == 0 or not Path(config.data).is_dir():
        return []
    card = load_card(config.data)
    images, labels = load_split(config.data, "test")
    device = resolve_device("auto")
    model, sidecar = load_encoder(config.model, device)
    check_fits_dataset(model, card["image_shape"], config.model, config.data)
    batch_size = min(trained.batch_size, len(labels))
    batch = torch.randperm(len(labels), generator=torch.Generator().manual_seed(HARD_NEGATIVE_SEED))[:batch_size]
    batch_images, batch_labels = images[batch], labels[batch]
    with torch.no_grad():
        _, hidden, z = model(build_eval_transform(sidecar["mean"], sidecar["std"])(batch_images.to(device)))
    options = trained.loss_options(trained.epochs - 1) | {"head_inputs": (hidden, hidden)}
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
            partial(figures.plot_hard_negatives, rows, batch_images, batch_labels, card["classes"], title=title),
        )
    ]
