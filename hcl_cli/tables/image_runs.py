"""One run of an image table's row: what ``hcl pretrain`` trains for the row's values and seed, its kNN curve, and its readouts.

The training is the product's (:func:`hcl_cli.tables.runs.train_encoder` on the images: ``hcl pretrain``'s seeding,
model, step and epoch loop, without its checkpoints and log). Every ``eval_every`` epochs the backbone is read out by
pretrain's kNN probe (:class:`~hcl_cli.training.probes.KnnProbe`: k 200, a fixed subset of train and test images),
the curve of HCL Fig. 11. At the end the backbone features of every train and test image (the eval transform) are read
out twice, as ``hcl knn-eval`` and ``hcl linear-eval`` do by default: weighted kNN (k 200, temperature 0.5) and a
linear layer fitted by L-BFGS on the standardised train features (:func:`~hcl_cli.linear.linear_readout`). With
``train=False`` it reads out the untrained encoder of the seed, the initialisation every row of that seed starts from.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hcl_cli.config import KnnConfig, LinearConfig, PretrainConfig
from hcl_cli.image.modality import IMAGES
from hcl_cli.knn import knn_predict
from hcl_cli.linear import linear_readout
from hcl_cli.metrics import topk_accuracy
from hcl_cli.provenance import run_identity
from hcl_cli.runtime import resolve_device, uses_bf16
from hcl_cli.tables.runs import Prepared, train_encoder
from hcl_cli.training.probes import KnnProbe


@dataclass
class ImageData:
    """A prepared image folder, loaded once on the device: its card, the train and the test images and labels."""

    folder: Path
    card: Any
    device: torch.device
    train: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


def load_images(folder: Path, device: str) -> ImageData:
    """The prepared image folder ``folder`` (``hcl prepare``'s output), its train split on ``device`` (as pretrain holds it)."""
    resolved = resolve_device(device)
    card = IMAGES.load_card(folder)
    return ImageData(folder, card, resolved, IMAGES.load_samples(folder, ["train"], resolved), IMAGES.load_samples(folder, ["test"]))


def precision_of(values: dict[str, Any], device: torch.device) -> str:
    """The precision a run trains in (``auto``: bf16 on CUDA; :func:`hcl_cli.runtime.uses_bf16`)."""
    return "bf16" if uses_bf16(values.get("precision", "auto"), device) else "fp32"


def readouts(model: torch.nn.Module, data: ImageData, batch_size: int, seed: int) -> dict[str, float]:
    """kNN and linear top-1 (%) of the backbone features of every test image against the train images' (the readouts'
    defaults: ``hcl knn-eval`` and ``hcl linear-eval --protocol fixed``)."""
    train_x, _ = IMAGES.embed(model, data.card, data.train[0], batch_size, "train embeddings")
    test_x, _ = IMAGES.embed(model, data.card, data.test[0], batch_size, "test embeddings")
    train_y, test_y = data.train[1].to(train_x.device), data.test[1].to(test_x.device)
    knn, linear = KnnConfig(), LinearConfig()
    scores = knn_predict(
        train_x,
        train_y,
        test_x.to(data.device),
        k=min(knn.k, len(train_x)),
        temperature=knn.temperature,
        num_classes=data.card.num_classes,
        chunk_size=knn.chunk_size,
        bank_chunk_size=knn.bank_chunk_size,
    )
    fitted = linear_readout(
        train_x.to(data.device),
        train_y.to(data.device),
        test_x.to(data.device),
        data.card.num_classes,
        optimizer=linear.optimizer,
        epochs=linear.epochs,
        lr=linear.lr,
        weight_decay=linear.weight_decay,
        seed=seed,
    )
    return {"knn": 100 * topk_accuracy(scores, test_y, ks=(1,))[1], "linear": 100 * topk_accuracy(fitted, test_y, ks=(1,))[1]}


def run_image(values: dict[str, Any], seed: int, data: ImageData, scratch: Path, *, train: bool = True) -> dict[str, Any]:
    """Train (unless ``train`` is False: the untrained encoder) and read out one (row, seed): kNN and linear top-1 (%),
    the kNN probe's curve (``[epoch, top-1 %]`` every ``eval_every`` epochs), the seconds, the device and provenance."""
    config = PretrainConfig(**values, seed=seed, data=str(data.folder), device=data.device.type)
    splits = IMAGES.training_splits(data.card, config.needs_labels)
    samples, labels = data.train if splits == ["train"] else IMAGES.load_samples(data.folder, splits, data.device)
    curve: list[list[float]] = []
    probe = KnnProbe.from_prepared(str(data.folder), IMAGES, data.card, seed, config.batch_size) if train and config.eval_every else None

    def probed(epoch: int, model: torch.nn.Module) -> None:
        if probe is not None and (epoch + 1) % config.eval_every == 0:
            curve.append([epoch + 1, round(100 * probe(model), 2)])

    start = time.perf_counter()
    model = train_encoder(
        config,
        Prepared(data.folder, data.card, samples, labels),
        scratch,
        train=train,
        modality=IMAGES,
        device=data.device,
        after_epoch=probed,
    )
    trained = time.perf_counter()
    figures = readouts(model, data, config.batch_size, seed)
    done = time.perf_counter()
    return {
        "knn": round(figures["knn"], 2),
        "linear": round(figures["linear"], 2),
        "curve": curve,
        "train_seconds": round(trained - start, 3),
        "eval_seconds": round(done - trained, 3),
        "device": torch.cuda.get_device_name(data.device) if data.device.type == "cuda" else "cpu",
        "precision": precision_of(values, data.device),
        "compiled": config.compile,
        "load": round(os.getloadavg()[0], 2),
        "provenance": run_identity(),
    }
