"""``hcl embed``: the frozen encoder's features of the train and test splits.

For every sample (image or graph, :mod:`hcl_cli.modality`) of the labelled train and test splits, the backbone feature ``f(x)`` (the
representation that kNN and linear readout evaluate, HCL Sec. 5.1) and the projection
``z = g(f(x))`` that the contrastive loss saw, under the eval transform (no augmentation, the
encoder's own normalisation). Written as one ``embeddings`` artifact by
:func:`hcl_cli.embeddings.save_embeddings`, recording the sha256 of the encoder and of the prepared files it
embeds; a non-finite feature stops the stage with nothing written, and so does a prepared folder other
than the one the encoder trained on (replaced since).
"""

from __future__ import annotations

from torch import Tensor

from hcl_cli.artifacts import check_made_from, check_outputs_apart, check_replaceable, prepared_sha256
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.config.embed import EmbedConfig
from hcl_cli.embeddings import EMBEDDINGS_OUTPUT, SPLITS, save_embeddings
from hcl_cli.errors import HclError, shown
from hcl_cli.logs import LOG
from hcl_cli.modality import modality_of
from hcl_cli.runtime import resolve_device, set_cpu_threads


def run(config: EmbedConfig) -> None:
    """Embed the train and test splits of ``config.data`` with the encoder ``config.model``."""
    check_outputs_apart({"--data": config.data, "--model": config.model}, {"--out": config.out})
    check_replaceable("--out", config.out, EMBEDDINGS_OUTPUT)
    modality = modality_of(config.data)
    card = modality.load_card(config.data)
    device = resolve_device(config.device)
    set_cpu_threads(parse_threads(config.threads), device, CUDA_THREADS)
    model, sidecar = modality.load_encoder(config.model, device)
    prepared = prepared_sha256(config.data)
    check_made_from(f"--model {shown(config.model)}", sidecar.inputs, "prepared", f"--data {shown(config.data)}", prepared)
    modality.check_fits(model, card, config.model, config.data)
    tensors: dict[str, Tensor] = {}
    for split in SPLITS:
        samples, labels = modality.load_samples(config.data, [split])
        backbone, projection = modality.embed(model, sidecar, samples, config.batch_size, f"embed {split}")
        for name, features in (("backbone", backbone), ("projection", projection)):
            broken = int((~features.isfinite()).any(dim=1).sum())
            if broken:
                raise HclError(
                    f"--model {shown(config.model)} gives non-finite {name} features for {broken} of the {len(features)} {split} "
                    f"{modality.sample_noun}s; nothing written (an encoder whose weights overflow: retrain it)"
                )
        tensors |= {f"{split}_backbone": backbone, f"{split}_projection": projection, f"{split}_labels": labels}
    encoder = {"config": sidecar.config, "arch": sidecar.arch, "epoch": sidecar.epoch, "inputs": sidecar.inputs}
    inputs = {"encoder": sidecar.sha256, "prepared": prepared}
    meta = {"dataset": card.name, "modality": modality.name, "classes": card.classes, "encoder": encoder, "inputs": inputs}
    save_embeddings(config.out, tensors, meta)
    dims = f"backbone {model.feature_dim}, projection {model.projection_dim}"
    LOG.info(
        f"hcl embed: wrote {shown(config.out)}: train {len(tensors['train_labels'])}, test {len(tensors['test_labels'])} {modality.sample_noun}s ({dims})"
    )
