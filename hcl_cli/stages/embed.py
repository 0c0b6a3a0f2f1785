"""``hcl embed``: the frozen encoder's features of the train and test splits.

For every sample (image or graph, :mod:`hcl_cli.modality`) of the labelled train and test splits, the backbone feature ``f(x)`` (the
representation that kNN and linear readout evaluate, HCL Sec. 5.1) and the projection
``z = g(f(x))`` that the contrastive loss saw, under the eval transform (no augmentation, the
encoder's own normalisation). Written as one ``embeddings`` artifact by
:func:`hcl_cli.embeddings.save_embeddings`, recording the sha256 of the encoder and of the prepared files it
embeds; a non-finite feature stops the stage with nothing written, and so does a prepared folder other
than the one the encoder trained on (replaced since).

``--init PATH`` embeds images with weights made elsewhere instead (:func:`initial_encoder`): the backbone of a
safetensors state dict, hcl export's or torchvision's ResNet's, loaded as ``hcl pretrain --init`` loads it
(:func:`~hcl_cli.image.transfer.load_backbone_file`), under a projection head left at its seeded initialisation (the
readouts read the backbone, HCL Sec. 5.1). Its architecture and normalisation are those hcl export's record
``PATH.json`` names, else ``--arch`` and the prepared dataset's per-channel statistics; the embeddings record the
sha256 of PATH as their ``init`` input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from hcl_cli.artifacts import check_made_from, check_outputs_apart, check_replaceable, header_kind, prepared_sha256
from hcl_cli.config.base import CUDA_THREADS, PROJECTION_DIM, parse_threads
from hcl_cli.config.embed import RECORDED, EmbedConfig
from hcl_cli.embeddings import EMBEDDINGS_OUTPUT, SPLITS, save_embeddings
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.image.card import DatasetCard
from hcl_cli.image.networks import ContrastiveModel, build_model
from hcl_cli.image.transfer import existing_file, export_sidecar, file_digest, load_backbone_file, read_export_record
from hcl_cli.logs import LOG
from hcl_cli.modality import Modality, encoder_kinds, modality_of
from hcl_cli.runtime import resolve_device, set_cpu_threads

HEAD_SEED = 0
"""The seed of the untrained projection head an ``--init`` encoder carries (the weights give only the backbone)."""


@dataclass(frozen=True)
class Normalisation:
    """The per-channel ``mean`` and ``std`` an ``--init`` backbone reads its images under (the eval transform's)."""

    mean: list[float]
    std: list[float]


def run(config: EmbedConfig) -> None:
    """Embed the train and test splits of ``config.data`` with the encoder ``config.model`` (or ``config.init``'s weights)."""
    weights = {"--init": config.init} if config.init else {"--model": config.model}
    check_outputs_apart({"--data": config.data, **weights}, {"--out": config.out})
    check_replaceable("--out", config.out, EMBEDDINGS_OUTPUT)
    modality = modality_of(config.data)
    card = modality.load_card(config.data)
    device = resolve_device(config.device)
    set_cpu_threads(parse_threads(config.threads), device, CUDA_THREADS)
    prepared = prepared_sha256(config.data)
    if config.init:
        model, stats, encoder, inputs = initial_encoder(config, modality, card, device)
    else:
        model, sidecar = modality.load_encoder(config.model, device)
        trained_on = modality.encoder_data(config.data, card)
        check_made_from(f"--model {shown(config.model)}", sidecar.inputs, "prepared", f"--data {shown(config.data)}", trained_on)
        modality.check_fits(model, card, config.model, config.data)
        stats, inputs = sidecar, {"encoder": sidecar.sha256} | ({"corpus": trained_on} if trained_on != prepared else {})
        encoder = {"config": sidecar.config, "arch": sidecar.arch, "epoch": sidecar.epoch, "inputs": sidecar.inputs}
    source = f"--init {shown(config.init)}" if config.init else f"--model {shown(config.model)}"
    tensors: dict[str, Tensor] = {}
    for split in SPLITS:
        samples, labels = modality.load_samples(config.data, [split])
        backbone, projection = modality.embed(model, stats, samples, config.batch_size, f"embed {split}")
        for name, features in (("backbone", backbone), ("projection", projection)):
            broken = int((~features.isfinite()).any(dim=1).sum())
            if broken:
                raise HclError(
                    f"{source} gives non-finite {name} features for {broken} of the {len(features)} {split} "
                    f"{modality.sample_noun}s; nothing written (an encoder whose weights overflow: retrain it)"
                )
        tensors |= {f"{split}_backbone": backbone, f"{split}_projection": projection, f"{split}_labels": labels}
    inputs |= {"prepared": prepared}
    meta = {"dataset": card.name, "modality": modality.name, "classes": card.classes, "encoder": encoder, "inputs": inputs}
    save_embeddings(config.out, tensors, meta)
    dims = f"backbone {model.feature_dim}, projection {model.projection_dim}" + (f"; from {source}" if config.init else "")
    LOG.info(
        f"hcl embed: wrote {shown(config.out)}: train {len(tensors['train_labels'])}, test {len(tensors['test_labels'])} {modality.sample_noun}s ({dims})"
    )


def initial_encoder(
    config: EmbedConfig, modality: Modality, card: DatasetCard, device: torch.device
) -> tuple[ContrastiveModel, Normalisation, dict[str, Any], dict[str, str]]:
    """The encoder of ``config.init``'s backbone weights, on ``device`` in eval mode; the normalisation it reads; the
    embeddings' record of it; their inputs (the sha256 of the weights, as ``init``)."""
    option = f"--init {shown(config.init)}"
    if modality.name != "image":
        raise UsageError(f"{option}: --init embeds images, and --data {shown(config.data)} holds graphs: give a graph encoder as --model")
    source = existing_file(config.init, "--init")
    kind = header_kind(source)
    if kind in encoder_kinds():
        raise UsageError(f"{option} is an hcl {kind!r} artifact: give an encoder as --model")
    if kind:
        raise UsageError(f"{option} is an hcl {kind!r} artifact, not a state dict of weights")
    digest = file_digest(source, "--init")
    record = read_export_record(source, digest, "--init")
    channels, height, width = card.image_shape
    if record is None and config.arch == RECORDED:
        raise UsageError(f"{option} has no hcl export record ({shown(export_sidecar(source))}) naming its architecture: give --arch")
    if record is not None and config.arch not in (RECORDED, record["arch"]):
        raise UsageError(f"{option} holds a {record['arch']} backbone, as its export record says, not --arch {config.arch}")
    if height != width:
        raise UsageError(f"--data {shown(config.data)} holds {height}x{width} images; hcl's encoders read square images")
    arch = record["arch"] if record else config.arch
    shape = (record["in_channels"], record["image_size"]) if record else (channels, height)
    stats = Normalisation(record["mean"], record["std"]) if record else Normalisation(card.mean, card.std)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(HEAD_SEED)
        model = build_model(arch, *shape, PROJECTION_DIM)
    modality.check_fits(model, card, option, f"--data {shown(config.data)}")
    described = load_backbone_file(model, config.init, "--init")
    made = {"path": shown(config.init), "weights": described, "record": record is not None, "head_seed": HEAD_SEED}
    encoder = {"config": {}, "arch": arch, "epoch": None, "inputs": {}, "init": made}
    return model.to(device).eval(), stats, encoder, {"init": digest}
