"""The report's figures drawn with matplotlib (Agg backend) as PNG files; no markdown here.

Each ``plot_*`` writes one PNG at the path it is given (the report's writer gives a path in its
staging folder and makes the set appear at once):

- training curves from dvclive's per-epoch logs: the loss, kNN top-1 (HCL Fig. 11), and for
  ``scl``/``hscl`` the share of anchors meeting H-SCL Assumption 1 beside the four losses UCL, SCL,
  H-UCL and H-SCL on the same batches (H-SCL Figs. 4 and 5);
- overlaid, density-normalised histograms of same-label and different-label cosine similarity
  (HCL Fig. 5);
- a grid of each anchor's ten highest-weighted negatives under the run's sampler (HCL Fig. 12).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from hcl_cli.diagnostics import HardNegatives  # noqa: E402

DPI = 150
CURVE_SIZE = (6.4, 4.0)
SAME_COLOUR = "tab:blue"
DIFFERENT_COLOUR = "tab:orange"
COLLISION_COLOUR = "tab:red"
HISTOGRAM_BINS = 60
LOSS_COLOURS = ("tab:green", "tab:purple", "tab:blue", "tab:orange")
"""UCL, SCL, H-UCL, H-SCL: H-SCL Fig. 5's colours (H-UCL blue, H-SCL orange, UCL green)."""

Series = tuple[list[float], list[float]]


def save_png(figure: Figure, path: str | os.PathLike[str]) -> None:
    """Write ``figure`` as a PNG at ``path`` and close it."""
    try:
        figure.savefig(path, format="png", dpi=DPI)
    finally:
        plt.close(figure)


def plot_curve(series: Series, path: str | os.PathLike[str], *, title: str, ylabel: str) -> None:
    """One per-epoch curve, its last value annotated."""
    figure, axis = plt.subplots(figsize=CURVE_SIZE, layout="constrained")
    steps, values = series
    draw_epoch_curve(axis, series, colour="tab:blue")
    axis.annotate(f"last: {values[-1]:.4g}", (steps[-1], values[-1]), textcoords="offset points", xytext=(-6, 8), ha="right")
    axis.margins(y=0.12)
    axis.set(title=title, ylabel=ylabel)
    save_png(figure, path)


def draw_epoch_curve(axis: plt.Axes, series: Series, *, colour: str, label: str | None = None) -> None:
    """A curve against whole epochs: markers while they stay legible, integer ticks, a light grid."""
    steps, values = series
    axis.plot(steps, values, marker="o" if len(steps) <= 40 else None, markersize=3, color=colour, label=label)
    axis.set_xlabel("epoch")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.grid(alpha=0.3)


def plot_hscl_diagnostics(fraction: Series, losses: Mapping[str, Series], path: str | os.PathLike[str]) -> None:
    """H-SCL Figs. 4-5 side by side: the share of anchors meeting Assumption 1, and the four losses
    (``losses`` in the order UCL, SCL, H-UCL, H-SCL)."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.0), layout="constrained")
    draw_epoch_curve(left, fraction, colour="tab:green")
    left.set(title="Anchors meeting H-SCL Assumption 1", ylabel="fraction of anchors", ylim=(0.0, 1.02))
    for (label, series), colour in zip(losses.items(), LOSS_COLOURS):
        draw_epoch_curve(right, series, colour=colour, label=label)
    right.set(title="UCL, SCL, H-UCL and H-SCL losses on the same batch", ylabel="loss")
    right.legend()
    save_png(figure, path)


def plot_similarity_histograms(same: torch.Tensor, different: torch.Tensor, path: str | os.PathLike[str], *, feature: str) -> None:
    """Overlaid, density-normalised histograms of same-label and different-label cosine similarity (HCL Fig. 5)."""
    figure, axis = plt.subplots(figsize=CURVE_SIZE, layout="constrained")
    bins = torch.linspace(-1.0, 1.0, HISTOGRAM_BINS + 1).tolist()
    axis.hist(same.numpy(), bins=bins, density=True, alpha=0.55, color=SAME_COLOUR, label=f"same label ({len(same):,} pairs)")
    axis.hist(
        different.numpy(), bins=bins, density=True, alpha=0.55, color=DIFFERENT_COLOUR, label=f"different label ({len(different):,} pairs)"
    )
    axis.set(title=f"Cosine similarity of test pairs ({feature} features)", xlabel="cosine similarity", ylabel="density", xlim=(-1.0, 1.0))
    axis.legend()
    axis.grid(alpha=0.3)
    save_png(figure, path)


def plot_hard_negatives(
    rows: Sequence[HardNegatives],
    images: torch.Tensor,
    labels: torch.Tensor,
    classes: Sequence[str],
    path: str | os.PathLike[str],
    *,
    title: str,
) -> None:
    """One row per anchor: the anchor image, then its negatives by decreasing weight, each titled class and weight.

    A negative that shares the anchor's label (a false negative the sampler could not exclude) is
    titled in red.
    """
    columns = 1 + max(len(row.indices) for row in rows)
    header_inches = 0.85
    height = 1.5 * len(rows) + header_inches
    figure, axes = plt.subplots(len(rows), columns, figsize=(1.25 * columns, height), squeeze=False)
    figure.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=1 - header_inches / height, wspace=0.08, hspace=0.55)
    for axis_row, row in zip(axes, rows):
        anchor_class = int(labels[row.anchor])
        show_image(axis_row[0], images[row.anchor])
        axis_row[0].set_title(f"anchor\n{literal(classes[anchor_class])}", fontsize=9, fontweight="bold")
        for axis, index, weight in zip(axis_row[1:], row.indices, row.weights):
            show_image(axis, images[index])
            negative_class = int(labels[index])
            colour = COLLISION_COLOUR if negative_class == anchor_class else "black"
            axis.set_title(f"{literal(classes[negative_class])}\nw={weight:.3g}", fontsize=8, color=colour)
        for axis in axis_row[1 + len(row.indices) :]:
            axis.axis("off")
    figure.suptitle(title, fontsize=11, y=1 - 0.1 / height, va="top")
    save_png(figure, path)


def literal(text: str) -> str:
    """``text`` (a class name, a folder's name) drawn as written: each ``$`` escaped, so matplotlib parses no mathtext."""
    return text.replace("$", r"\$")


def show_image(axis: plt.Axes, image: torch.Tensor) -> None:
    """Draw one uint8 (C, H, W) image without ticks; one channel as greyscale."""
    pixels = image.cpu()
    if pixels.shape[0] == 1:
        axis.imshow(pixels[0].numpy(), cmap="gray", vmin=0, vmax=255, interpolation="nearest")
    else:
        axis.imshow(pixels.permute(1, 2, 0).numpy(), interpolation="nearest")
    axis.set_xticks([])
    axis.set_yticks([])
