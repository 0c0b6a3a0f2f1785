"""``hcl embed``: the frozen encoder's features of the train and test splits.

For every sample (image or graph, :mod:`hcl_cli.modality`) of the labelled train and test splits, the backbone feature ``f(x)`` (the
representation that kNN and linear readout evaluate, HCL Sec. 5.1) and the projection
``z = g(f(x))`` that the contrastive loss saw, under the eval transform (no augmentation, the
encoder's own normalisation). Written as one ``embeddings`` artifact by
:func:`hcl_cli.embeddings.save_embeddings`.
"""

from __future__ import annotations

from torch import Tensor

from hcl_cli.artifacts import check_outputs_apart, check_replaceable
from hcl_cli.config.embed import EmbedConfig
from hcl_cli.embeddings import EMBEDDINGS_KIND, SPLITS, save_embeddings
from hcl_cli.errors import shown
from hcl_cli.modality import modality_of
from hcl_cli.runtime import resolve_device


def run(config: EmbedConfig) -> None:
    """Embed the train and test splits of ``config.data`` with the encoder ``config.model``."""
    check_outputs_apart({"--data": config.data, "--model": config.model}, {"--out": config.out})
    check_replaceable("--out", config.out, EMBEDDINGS_KIND)
    modality = modality_of(config.data)
    card = modality.load_card(config.data)
    device = resolve_device(config.device)
    model, sidecar = modality.load_encoder(config.model, device)
    modality.check_fits(model, card, config.model, config.data)
    tensors: dict[str, Tensor] = {}
    for split in SPLITS:
        samples, labels = modality.load_samples(config.data, [split])
        backbone, projection = modality.embed(model, sidecar, samples, config.batch_size, f"embed {split}")
        tensors |= {f"{split}_backbone": backbone, f"{split}_projection": projection, f"{split}_labels": labels}
    encoder = {"config": sidecar.config, "arch": sidecar.arch, "epoch": sidecar.epoch}
    save_embeddings(config.out, tensors, {"dataset": card.name, "classes": card.classes, "encoder": encoder})
    dims = f"backbone {model.feature_dim}, projection {model.projection_dim}"
    print(
        f"hcl embed: wrote {shown(config.out)}: train {len(tensors['train_labels'])}, test {len(tensors['test_labels'])} {modality.sample_noun}s ({dims})"
    )
