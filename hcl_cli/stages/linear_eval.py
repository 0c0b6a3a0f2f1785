"""linear-eval: top-1 and top-5 of a linear classifier trained on the frozen train embeddings (HCL Sec. 6)."""

from __future__ import annotations

from hcl_cli.artifacts import check_outputs_apart, write_json
from hcl_cli.config import LinearConfig
from hcl_cli.embeddings import load_embeddings, topk_accuracy
from hcl_cli.linear import linear_readout
from hcl_cli.runtime import resolve_device


def run(config: LinearConfig) -> None:
    """Fit the readout on the train split, score the test split and write ``config.out``."""
    check_outputs_apart({"--embeddings": config.embeddings}, {"--out": config.out})
    device = resolve_device(config.device)
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
    accuracy = topk_accuracy(scores, data.test_y)
    write_json(config.out, {"top1": accuracy[1], "top5": accuracy[5], **config.params()})
    print(f"hcl linear-eval: wrote {config.out}: top-1 {accuracy[1]:.4f}, top-5 {accuracy[5]:.4f} ({config.feature} features, {config.optimizer})")
