"""The report's markdown: its sections, assembled from inputs already read; no drawing and no writing here.

Every string from outside hcl enters through :mod:`~hcl_cli.report.escaping`; the parameter table is
in :mod:`~hcl_cli.report.parameters`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hcl_cli.artifacts import is_finite_number, sidecar_path
from hcl_cli.config.pretrain import TRANSDUCTIVE_LABELS
from hcl_cli.image.card import CARD_FILE
from hcl_cli.metrics import EvaluationMetrics
from hcl_cli.modality import Modality, modality_named
from hcl_cli.provenance import describe_extent, occasion_path
from hcl_cli.report.escaping import code, inline
from hcl_cli.report.inputs import Prepared, TrainedEncoder
from hcl_cli.report.writer import FIGURES_FOLDER
from hcl_cli.stats import wilson_interval

if TYPE_CHECKING:
    from hcl_cli.report.figures import Figure


def title_line(title: str) -> str:
    """The report's level-1 heading."""
    return f"# {inline(title)}"


@dataclass(frozen=True)
class MetricRow:
    """One row of the metric table: an evaluation of an encoder (or of none), and where its numbers come from (markdown)."""

    evaluation: str
    encoder: str
    metrics: EvaluationMetrics
    source: str

    @property
    def fold_std(self) -> float | None:
        """The SVM protocol's standard deviation over its folds; None for a result on the test split."""
        svm = self.metrics.details.get("svm") if self.metrics.params.get("protocol") == "svm" else None
        return float(svm["std"]) if isinstance(svm, dict) and is_finite_number(svm.get("std")) else None

    @property
    def top1_range(self) -> tuple[float, float]:
        """Top-1's spread: the mean ± the std over the folds (SVM), else the 95% Wilson interval on the test split."""
        std = self.fold_std
        if std is not None:
            return self.metrics.top1 - std, self.metrics.top1 + std
        return wilson_interval(self.metrics.top1, self.metrics.test_size)

    def cells(self, top5: bool = True) -> list[str]:
        """The row's cells; ``top5``: with the top-5 columns (shown only where there are more than five classes)."""
        svm = self.metrics.details.get("svm") if self.metrics.params.get("protocol") == "svm" else None
        if isinstance(svm, dict) and svm.get("label_protocol") != "inductive":  # mean and std over the folds of the cross-validation
            std = f"{svm['std']:.4f}" if is_finite_number(svm.get("std")) else "?"
            spread = f"± {std} (std over {inline(svm.get('repeats', '?'))} x {inline(svm.get('folds', '?'))} folds)"
            accuracies = [f"{self.metrics.top1:.4f}", spread, *([f"{self.metrics.top5:.4f}", "(over the folds)"] if top5 else [])]
            return [self.evaluation, inline(self.encoder), self.metrics.feature, f"{self.metrics.test_size:,}", *accuracies, self.source]
        keys = ("top1", "top5") if top5 else ("top1",)
        accuracies = [cell for key in keys for cell in accuracy_cells(getattr(self.metrics, key), self.metrics.test_size)]
        return [self.evaluation, inline(self.encoder), self.metrics.feature, f"{self.metrics.test_size:,}", *accuracies, self.source]


def baseline_verdict(rows: list[MetricRow]) -> str:
    """A sentence for each baseline that the trained encoder does not beat beyond the spread (the same evaluation: kNN
    against the kNN baselines, the SVM against the untrained SVM row); empty when it beats every one."""
    missed = []
    for trained in (row for row in rows if row.encoder == "trained"):
        family = trained.evaluation.split(" ")[0]
        for baseline in (row for row in rows if row.evaluation == f"{family} (baseline)"):
            if trained.top1_range[0] > baseline.top1_range[1]:
                continue
            where = "below" if trained.metrics.top1 < baseline.metrics.top1 else "within the spread of"
            missed.append(f"{family} top-1 {trained.metrics.top1:.4f} is {where} {inline(baseline.encoder)}'s {baseline.metrics.top1:.4f}")
    if not missed:
        return ""
    return (
        "**The trained encoder does not beat every baseline**, so this run has not shown that pretraining paid for itself: "
        + "; ".join(missed)
        + "."
    )


def accuracy_cells(accuracy: float, test_size: int) -> list[str]:
    """An accuracy (4 decimals) and its 95% Wilson interval on ``test_size`` test images."""
    low, high = wilson_interval(accuracy, test_size)
    return [f"{accuracy:.4f}", f"[{low:.4f}, {high:.4f}]"]


def labels_note(encoder: TrainedEncoder) -> str:
    """Whether pretraining read the labels, and why; a run that read the test labels says so (:data:`TRANSDUCTIVE_LABELS`)."""
    config, noun = encoder.config, encoder.modality.sample_noun
    if config.needs_labels and "test" in encoder.modality.training_splits(None, True, config.transductive):
        return (
            f"**yes, {TRANSDUCTIVE_LABELS}**: `{config.sampler}` reads the labels, and under label_protocol transductive "
            f"pretraining read every {noun}, test {noun}s with their labels, so the encoder has seen the labels it is evaluated "
            "on (docs/protocol-graphs.md): this is not a self-supervised result, nor an inductive one"
        )
    if config.needs_labels and encoder.modality.name == "graph":
        return (
            f"**yes**, inductive: `{config.sampler}` reads the labels of the train split, the only {noun}s pretraining read (the "
            f"test {noun}s and their labels never reached it, docs/protocol-graphs.md): this is not a self-supervised result"
        )
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
        lines.append(f"- **Dataset**: not known: no prepared dataset folder at {code(data)}.")
    else:
        card = prepared.card
    if prepared is not None:
        lines.append(
            f"- **Dataset**: {code(card.name)} ({inline(card.source or 'source not recorded')}): "
            f"{inline(prepared.modality.card_summary(card))}; from {code(prepared.folder / CARD_FILE)}."
        )
    if prepared is not None:
        if encoder is not None and encoder.sidecar.dataset not in (None, card.name):
            lines.append(
                f"- **Warning**: the encoder's sidecar says it was trained on {code(encoder.sidecar.dataset)}, not {code(card.name)}."
            )
    if encoder is None:
        lines.append(f"- **Encoder**: none at {code(model)}: the pretraining, its provenance and the untrained baseline are not reported.")
        return "\n".join(lines)
    sidecar, source = encoder.sidecar, code(sidecar_path(encoder.path))
    lines.append(
        f"- **Pretraining**: `{encoder.config.sampler}`, {architecture(encoder)}, {inline(describe_extent(sidecar.run, sidecar.epoch))}; labels used: {labels_note(encoder)}."
    )
    record = sidecar.run
    if record is not None:
        device = record.get("device") or {}
        processes = sidecar.world_size
        lines.append(
            f"- **Trained**: on {inline(device.get('type', '?'))} ({inline(device.get('name') or 'unnamed')})"
            f"{f' x {processes} processes' if processes != 1 else ''}; when, on which host and at which commit: "
            f"{code(occasion_path(encoder.path))}, a record DVC does not track (a rerun's outputs stay byte for byte the same)."
        )
    else:
        lines.append(f"- **Trained**: the device is not recorded in {source} (an encoder from before hcl recorded its runs).")
    versions = sidecar.versions
    software = ", ".join(f"{name} {inline(versions[name])}" for name in ("torch", "torchvision", "hcl", "python") if name in versions)
    lines.append(f"- **Software**: {software or 'not recorded'} (from {source}).")
    return "\n".join(lines)


def architecture(encoder: TrainedEncoder) -> str:
    """The encoder's architecture, with its sizes for a GIN (``gin (3 layers of 32, 96-d graph embedding)``)."""
    model = encoder.model
    if model.arch == "gin":
        return f"gin ({model.encoder.layers} layers of {model.encoder.hidden}, {model.feature_dim}-d graph embedding)"
    return str(model.arch)


def metric_section(rows: list[MetricRow], encoder: TrainedEncoder | None, prepared: Prepared | None) -> str:
    """The metric table: top-1 and top-5 of each evaluation and baseline on the test split, with 95% intervals."""
    labelled = (
        f" **Pretraining used the labels** (`{encoder.config.sampler}`; see Run)."
        if encoder is not None and encoder.config.needs_labels
        else ""
    )
    classes = prepared.card.num_classes if prepared is not None else None
    noun = prepared.modality.sample_noun if prepared is not None else "image"
    top5 = classes is None or classes > 5
    shown = (
        "is the top class (top-1) or among the five top classes (top-5)"
        if top5
        else f"is the top class (top-1; top-5 is not shown: with {classes} classes it is 1 by construction)"
    )
    verdict = baseline_verdict(rows)
    return "\n".join(
        [
            "## Metrics",
            "",
            f"Accuracy on the test split: the share of its test {noun}s whose label {shown}, rounded to 4 decimals, with its 95% "
            f"Wilson interval from the number of test {noun}s; differences within the intervals are test-split noise. The kNN "
            "baselines beside the result use the same kNN settings; the numbers come from one pretraining seed (the spread over "
            f"seeds is not measured here: `dvc exp run -S pretrain.seed=...` and `hcl compare` give it).{labelled}",
            "",
            f"| Evaluation | Encoder | Feature | Test {noun}s | Top-1 | 95% interval |"
            + (" Top-5 | 95% interval |" if top5 else "")
            + " Source |",
            "|:--|:--|:--|--:|--:|:--|" + ("--:|:--|" if top5 else "") + ":--|",
            *(f"| {' | '.join(row.cells(top5))} |" for row in rows),
            *(["", verdict] if verdict else []),
        ]
    )


def protocol_section(
    metrics: dict[str, EvaluationMetrics], encoder: TrainedEncoder | None, *, baselines: bool, modality: Modality | None = None
) -> str:
    """How each number was obtained, with the settings recorded in its metrics file."""
    modality = modality or modality_named("image")
    noun = modality.sample_noun
    lines = ["## Evaluation protocol", "", "The encoder is frozen and in eval mode (BatchNorm uses its running statistics).", ""]
    if "knn" in metrics:
        knn = metrics["knn"].params
        lines.append(
            f"- **kNN** (Wu et al. 2018, as in HCL Sec. 6.3), on the embeddings of the un-augmented train and test {noun}s: the "
            f"{knn['feature']} features are L2-normalised; each test embedding's k = {knn['k']} most cosine-similar train "
            f"embeddings vote for their label with weight exp(cos / T), T = {knn['temperature']}; top-1 and top-5 rank the summed "
            "votes per class. Nothing is trained."
        )
    if "linear" in metrics:
        lines.append(linear_protocol(metrics["linear"], noun))
    if baselines:
        untrained = (
            f"the same architecture ({encoder.model.arch}) untrained: initialised with the run's seed {encoder.config.seed}, "
            f"in eval mode (BatchNorm at its initial statistics), its features of the prepared {modality.eval_inputs}; and "
            if encoder is not None
            else ""
        )
        svm = encoder is not None and "linear" in metrics and metrics["linear"].params.get("protocol") == "svm"
        lines.append(
            f"- **Baselines** (computed by `hcl report` with the kNN settings above): {untrained}{modality.raw_description}. Pretraining is worth its "
            "cost where the trained encoder beats both beyond the intervals."
            + (
                " The untrained encoder is also read out by the SVM protocol below, with its settings (the SVM (baseline) row)."
                if svm
                else ""
            )
        )
    lines.append(
        f"- **Intervals**: the 95% Wilson score interval of a binomial proportion (Wilson 1927) on the number of test {noun}s; "
        "it counts the test-split noise only, not the variation over pretraining seeds."
    )
    return "\n".join(lines)


def linear_protocol(linear: EvaluationMetrics, noun: str = "image") -> str:
    """The linear readout's protocol bullet: on the fixed embeddings, or the papers' on augmented views."""
    params = linear.params
    svm = linear.details.get("svm") if isinstance(linear.details.get("svm"), dict) else {}
    if params.get("protocol") == "svm" and svm.get("label_protocol") == "inductive":
        return (
            f"- **SVM** (inductive: the encoder read the train split's labels only, docs/protocol-graphs.md): on the "
            f"{params['feature']} embeddings, an RBF SVC whose C is chosen from {inline(params['svm_c_grid'])} by "
            f"{inline(params['svm_inner_folds'])}-fold cross-validated accuracy on the train split (the {noun}s pretraining "
            f"read), refitted on it and scored on the test split's {noun}s, which the encoder never saw (one fold of HCL "
            "App. D.2's protocol, evaluate_embedding.py); with the 95% Wilson interval."
        )
    if params.get("protocol") == "svm":
        transductive = f" ({TRANSDUCTIVE_LABELS})" if svm.get("label_protocol") == "transductive" else ""
        return (
            f"- **SVM** (the graph papers' protocol, HCL App. D.2, as evaluate_embedding.py): on the {params['feature']} embeddings "
            f"of every graph, train and test together, {inline(params['svm_repeats'])} x {inline(params['svm_folds'])}-fold "
            f"stratified cross-validation (seed {inline(params['seed'])}); in each training fold an RBF SVC's C is chosen from "
            f"{inline(params['svm_c_grid'])} by {inline(params['svm_inner_folds'])}-fold cross-validated accuracy, refitted, and "
            f"scored on the held-out fold{transductive}. Reported: the mean accuracy over all folds and its standard deviation "
            "(not a Wilson interval)."
        )
    if params.get("protocol") == "paper":
        augmentation = linear.details.get("augmentation") if isinstance(linear.details.get("augmentation"), dict) else {}
        recipe = (
            f"the {inline(augmentation['recipe'])} recipe{' with blur' if augmentation.get('blur') else ''}, "
            if "recipe" in augmentation
            else ""
        )
        return (
            f"- **Linear readout** (the papers' protocol, as HCL's code): a linear classifier W x + b on the raw {params['feature']} "
            f"features of train images augmented afresh every epoch as in pretraining ({recipe}seed {inline(params['seed'])}), "
            f"trained by minibatch Adam (batches of {inline(params['batch_size'])}, learning rate {inline(params['lr'])}, weight "
            f"decay {inline(params['weight_decay'])} on W and b) on the cross-entropy for {inline(params['epochs'])} epochs; scored "
            "once on the un-augmented test images."
        )
    solver = (
        f"full-batch L-BFGS (strong Wolfe line search, step size {inline(params['lr'])}) for at most {inline(params['epochs'])} iterations"
        if params["optimizer"] == "lbfgs"
        else f"full-batch Adam (learning rate {inline(params['lr'])}) for {inline(params['epochs'])} steps"
    )
    return (
        f"- **Linear readout** (HCL Sec. 6), on the embeddings of the un-augmented train and test {noun}s: a linear classifier "
        f"W x + b on the {params['feature']} features, standardised with the train split's per-feature mean and standard "
        "deviation, trained on the whole train split by minimising "
        f"cross-entropy + {inline(params['weight_decay'])} / 2 * ||W||^2 with {solver}, initialisation seed {inline(params['seed'])}; "
        "scored once on the test split."
    )


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
