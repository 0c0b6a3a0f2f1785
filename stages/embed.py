"""``hcl embed``: the frozen encoder's features of the train and test splits.

For every image of the labelled train and test splits, the backbone feature ``f(x)`` (the
representation that kNN and linear readout evaluate, HCL Sec. 5.1) and the projection
``z = g(f(x))`` that the contrastive loss saw, under the eval transform (no augmentation, the
encoder's own normalisation). Written as one ``embeddings`` artifact by
:func:`hcl_cli.embeddings.save_embeddings`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from tqdm import tqdm

from hcl_cli.augment import build_eval_transform
from hcl_cli.config import EmbedConfig
from hcl_cli.datasets import load_card, load_split
from hcl_cli.embeddings import SPLITS, save_embeddings
from hcl_cli.models import ContrastiveModel, check_fits_dataset, load_encoder
from hcl_cli.runtime import resolve_device


def run(config: EmbedConfig) -> None:
    """Embed the train and test splits of ``config.data`` with the encoder ``config.model``."""
    card = load_card(config.data)
    device = resolve_device(config.device)
    model, sidecar = load_encoder(config.model, device)
    check_fits_dataset(model, card["image_shape"], config.model, config.data)
    transform = build_eval_transform(sidecar["mean"], sidecar["std"])
    tensors: dict[str, Tensor] = {}
    for split in SPLITS:
        images, labels = load_split(config.data, split)
        backbone, projection = encode(model, transform, images, config.batch_size, description=f"embed {split}")
        tensors |= {f"{split}_backbone": backbone, f"{split}_projection": projection, f"{split}_labels": labels}
    encoder = {"config": sidecar.get("config"), "arch": sidecar["arch"], "epoch": sidecar.get("epoch")}
    save_embeddings(config.out, tensors, {"dataset": card["name"], "classes": card["classes"], "encoder": encoder})
    dims = f"backbone {model.feature_dim}, projection {model.projection_dim}"
    print(f"hcl embed: wrote {config.out}: train {len(tensors['train_labels'])}, test {len(tensors['test_labels'])} images ({dims})")


@torch.no_grad()
def encode(model: ContrastiveModel, transform: nn.Module, images: Tensor, batch_size: int, description: str = "embed") -> tuple[Tensor, Tensor]:
    """Backbone features and projections (float32, on the CPU) of uint8 ``images``, in batches.

    The model is run in eval mode (BatchNorm uses its running statistics) on its own device; its
    previous mode is restored afterwards, so training code can call this between epochs.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    features, projections = [], []
    for start in tqdm(range(0, len(images), batch_size), desc=description, unit="batch", disable=None, leave=False):
        batch = transform(images[start : start + batch_size].to(device, non_blocking=True))
        batch_features, _, batch_projections = model(batch)
        features.append(batch_features.float().cpu())
        projections.append(batch_projections.float().cpu())
    model.train(was_training)
    return torch.cat(features), torch.cat(projections)
