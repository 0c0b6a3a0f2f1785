"""linear-eval: top-1 and top-5 of a linear classifier on the frozen encoder's train features (HCL Sec. 6).

Two protocols (``linear.protocol``): ``fixed`` fits the classifier on the embeddings of ``hcl embed``
(:func:`~hcl_cli.linear.linear_readout`); ``paper`` trains it on features of augmented train images
through the encoder itself, as the papers' code (:func:`~hcl_cli.linear.augmented_readout`), and
records the augmentation in the metrics artifact (:mod:`hcl_cli.metrics`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch

from hcl_cli.artifacts import check_made_from, check_outputs_apart, prepared_sha256, read_inputs
from hcl_cli.artifacts.files import read_json
from hcl_cli.artifacts.tensors import sidecar_path
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.config.linear import LinearConfig, parse_c_grid
from hcl_cli.config.pretrain import TRANSDUCTIVE_LABELS, label_protocol_of
from hcl_cli.embeddings import EvalSet, load_embeddings
from hcl_cli.errors import UsageError, shown
from hcl_cli.graph.card import is_graph_folder
from hcl_cli.graph.svm import heldout_details, heldout_svm, svm_details, svm_protocol
from hcl_cli.image.augment import build_augmentation, build_eval_transform, resolve_recipe
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import check_fits_dataset, load_encoder
from hcl_cli.image.prepared import load_split
from hcl_cli.linear import augmented_readout, linear_readout
from hcl_cli.logs import LOG
from hcl_cli.metrics import EvaluationMetrics, check_metrics_replaceable, save_metrics, topk_accuracy
from hcl_cli.runtime import resolve_device, set_cpu_threads
from hcl_cli.text.prepared import load_text_card
from hcl_cli.text.readout import task_readout
from hcl_cli.text.senteval import CROSS_VALIDATED
from hcl_cli.text.tasks import baseline_features, task_features, top5_accuracy


def run(config: LinearConfig) -> None:
    """Fit the readout on the train split, score the test split and write ``config.out``."""
    for warning in config.unread_changes():
        LOG.warning(f"hcl linear-eval: warning: {warning}")
    inputs = {"--model": config.model, "--data": config.data} if config.protocol == "paper" else {"--embeddings": config.embeddings}
    if config.protocol == "senteval":
        inputs["--data"] = config.data
    check_outputs_apart(inputs, {"--out": config.out})
    check_metrics_replaceable(config.out, "linear-eval")
    if config.protocol in PROTOCOLS_ON_EMBEDDINGS:
        PROTOCOLS_ON_EMBEDDINGS[config.protocol](config)
        return
    device = resolve_device(config.device)
    set_cpu_threads(parse_threads(config.threads), device, CUDA_THREADS)
    scores, test_labels, details, inputs = paper_scores(config, device) if config.protocol == "paper" else fixed_scores(config, device)
    accuracy = topk_accuracy(scores, test_labels)
    save_metrics(config.out, EvaluationMetrics.measured(accuracy, len(test_labels), config, inputs, details), "linear-eval")
    LOG.info(
        f"hcl linear-eval: wrote {shown(config.out)}: top-1 {accuracy[1]:.4f}, top-5 {accuracy[5]:.4f} "
        f"({config.feature} features, {config.protocol} protocol, {config.optimizer})"
    )


def svm_metrics(config: LinearConfig) -> None:
    """The graph papers' SVM protocol (:func:`~hcl_cli.graph.svm.svm_protocol`) on the embeddings of every graph, train
    and test together (the papers cross-validate over the whole dataset), written as the metrics artifact; for an
    encoder that read the train split's labels under the inductive protocol, :func:`inductive_svm_metrics` instead.

    ``top1`` is the mean accuracy over all folds of all repeats and ``top5`` its top-5 counterpart;
    ``test_size`` is the number of graphs (each is tested once per repeat); ``details.svm`` records the std
    over folds, the folds, repeats, per-repeat means (and their std), every fold's accuracy and chosen C, and
    ``label_protocol``: ``transductive`` when the encoder saw every graph's label, None when it read none.
    """
    data = load_embeddings(config.embeddings, config.feature)
    protocol = label_protocol_of(data.encoder_config) if data.modality == "graph" else None
    if protocol == "inductive":
        inductive_svm_metrics(config, data)
        return
    embeddings = torch.cat([data.train_x, data.test_x]).double().numpy()
    labels = torch.cat([data.train_y, data.test_y]).numpy()
    result = svm_protocol(
        embeddings,
        labels,
        folds=config.svm_folds,
        repeats=config.svm_repeats,
        c_grid=parse_c_grid(config.svm_c_grid),
        inner_folds=config.svm_inner_folds,
        seed=config.seed,
    )
    details = {"svm": svm_details(result) | {"label_protocol": protocol}}
    accuracy = {1: result.mean, 5: result.top5}
    save_metrics(config.out, EvaluationMetrics.measured(accuracy, len(labels), config, data.scored, details), "linear-eval")
    LOG.info(
        f"hcl linear-eval: wrote {config.out}: SVM accuracy {result.mean:.4f} +- {result.std:.4f} over "
        f"{len(result.repeat_means)} x {result.folds} folds of {len(labels)} samples ({config.feature} features"
        f"{'; ' + TRANSDUCTIVE_LABELS if protocol else ''})"
    )


def senteval_metrics(config: LinearConfig) -> None:
    """SentEval's protocol (:func:`~hcl_cli.text.readout.task_readout`) on a task's embeddings, with the task's folder
    ``--data`` naming the task, its pairs and its items' order (:func:`~hcl_cli.text.tasks.task_features`). ``top1`` is the
    task's accuracy; ``top5`` the share of test items whose label is among the classifier's five likeliest (1 for tasks of
    five classes or fewer); ``details.senteval`` records the folds, the C grid and chosen C, MRPC's F1, the seed and, with
    ``senteval_baselines``, the same readout of the untrained encoder and of the mean word embeddings
    (:func:`~hcl_cli.text.tasks.baseline_features`)."""
    card = load_text_card(config.data)
    if card.task is None:
        raise UsageError(
            f"--protocol senteval reads a SentEval task, but --data {shown(config.data)} is a text corpus: give the task's folder"
        )
    data = load_embeddings(config.embeddings, config.feature)
    made_from = read_inputs(read_json(sidecar_path(config.embeddings), what="embeddings sidecar"), config.embeddings)
    embedded = f"--embeddings {shown(config.embeddings)}"
    check_made_from(embedded, made_from, "prepared", f"--data {shown(config.data)}", prepared_sha256(config.data))
    features, labels, splits, seconds = task_features(card, config.data, (data.train_x, data.train_y), (data.test_x, data.test_y))
    result = task_readout(card.task, features, labels, splits, seconds, seed=config.seed, folds=config.senteval_folds)
    baselines = {}
    for name, (train, test) in (baseline_features(config.data, data.encoder_config) if config.senteval_baselines else {}).items():
        baseline = task_readout(card.task, *task_features(card, config.data, train, test), seed=config.seed, folds=config.senteval_folds)
        baselines[name] = {"accuracy": baseline.accuracy, "f1": baseline.f1}
    details = {"senteval": {"task": card.task, **asdict(result), "baselines": baselines}}
    top5 = 1.0 if len(card.classes) <= 5 else max(result.accuracy, top5_accuracy(features, labels, splits, result.chosen_c[0], config.seed))
    test_size = len(labels) if card.task in CROSS_VALIDATED else splits.count("test")
    save_metrics(
        config.out, EvaluationMetrics.measured({1: result.accuracy, 5: top5}, test_size, config, data.scored, details), "linear-eval"
    )
    f1 = f", F1 {result.f1:.4f}" if result.f1 is not None else ""
    LOG.info(
        f"hcl linear-eval: wrote {shown(config.out)}: SentEval {card.task} accuracy {result.accuracy:.4f}{f1} ({config.feature} features)"
    )


def inductive_svm_metrics(config: LinearConfig, data: EvalSet) -> None:
    """The inductive protocol's readout (docs/protocol-graphs.md): the SVM, C by the inner search, fitted on the train
    split's embeddings (the graphs, and the labels, the encoder pretrained on) and scored on the test split's, which the
    encoder never saw (:func:`~hcl_cli.graph.svm.heldout_svm`). ``svm_folds`` and ``svm_repeats`` are not read: the
    prepared split is the one outer fold. ``details.svm`` records ``label_protocol: inductive``, the inner folds, the C
    grid and the chosen C."""
    grid = parse_c_grid(config.svm_c_grid)
    fold = heldout_svm(
        data.train_x.double().numpy(),
        data.train_y.numpy(),
        data.test_x.double().numpy(),
        data.test_y.numpy(),
        c_grid=grid,
        inner_folds=config.svm_inner_folds,
    )
    details = {"svm": heldout_details(fold, grid, config.svm_inner_folds)}
    test_size = len(data.test_y)
    save_metrics(
        config.out, EvaluationMetrics.measured({1: fold.accuracy, 5: fold.top5}, test_size, config, data.scored, details), "linear-eval"
    )
    LOG.info(
        f"hcl linear-eval: wrote {config.out}: SVM accuracy {fold.accuracy:.4f} on the {test_size} test graphs, fitted on the "
        f"{len(data.train_y)} train graphs (inductive: the encoder read the train labels only; {config.feature} features)"
    )


PROTOCOLS_ON_EMBEDDINGS = {"svm": svm_metrics, "senteval": senteval_metrics}
"""The protocols that read ``hcl embed``'s embeddings with a readout of their own, by ``--protocol``."""


def fixed_scores(config: LinearConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any], dict[str, Any]]:
    """Test scores of the readout fitted on the standardised embeddings of ``config.embeddings``, the test labels, the
    details to record (none) and the inputs (the sha256 of the embeddings and of their encoder)."""
    data = load_embeddings(config.embeddings, config.feature)
    scores = linear_readout(
        data.train_x.to(device),
        data.train_y.to(device),
        data.test_x.to(device),
        data.num_classes,
        optimizer=config.optimizer,
        epochs=config.epochs,
        lr=config.lr,
        weight_decay=config.weight_decay,
        seed=config.seed,
    )
    return scores, data.test_y, {}, data.scored


def paper_scores(config: LinearConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any], dict[str, Any]]:
    """Test scores of the papers' protocol: the encoder ``config.model`` on augmented views of ``config.data``; with the
    test labels, the details to record (the augmentation) and the inputs (the encoder's and the prepared files' sha256).

    The augmentation is the one the encoder was pretrained with: the recipe of its image size, with
    Gaussian blur when its pretraining had it. The encoder stays in eval mode (BatchNorm uses its
    running statistics).
    """
    if is_graph_folder(config.data):
        raise UsageError(
            f"--protocol paper reads augmented views of images, but {shown(config.data)} holds graphs: use --protocol svm or fixed"
        )
    card = load_card(config.data)
    model, sidecar = load_encoder(config.model, device)
    prepared = prepared_sha256(config.data)
    check_made_from(f"--model {shown(config.model)}", sidecar.inputs, "prepared", f"--data {shown(config.data)}", prepared)
    check_fits_dataset(model, card.image_shape, config.model, config.data)
    train_images, train_labels = load_split(config.data, "train", device)
    test_images, test_labels = load_split(config.data, "test")
    channels, image_size = card.image_shape[0], card.image_shape[-1]
    recipe = resolve_recipe(image_size)
    blur = recipe == "simclr" and bool((sidecar.config or {}).get("blur", False))  # the digits recipe has no blur
    augment = build_augmentation(image_size, channels, sidecar.mean, sidecar.std, blur=blur, recipe=recipe).to(device)
    output = 0 if config.feature == "backbone" else 2  # ContrastiveModel returns (features, hidden, z)
    scores = augmented_readout(
        lambda views: model(views)[output],
        augment,
        build_eval_transform(sidecar.mean, sidecar.std),
        (train_images, train_labels),
        test_images,
        card.num_classes,
        feature_dim=model.feature_dim if config.feature == "backbone" else model.projection_dim,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lr=config.lr,
        weight_decay=config.weight_decay,
        seed=config.seed,
    )
    inputs = {"encoder": sidecar.sha256, "prepared": prepared}
    return scores.cpu(), test_labels, {"augmentation": {"recipe": recipe, "blur": blur}}, inputs
