"""UnDiMix's diversity score (Tabassum et al., Sec. 3, Eq. 4) under the three readings of ``undimix_diversity``.

Eq. (4): ``r(x~_j, x_i) = 1/(N - 2) sum_{j' = 1, j' not in {i, j}}^N (1 - s(x~_j, x~_j'))``, the
mean distance of the negative to the other images, every one of them in the negative's view: the
tilde is the view of the negatives (Eq. 1 contrasts the anchor x_i, with a bar, against the other
images' x~_j). In hcl both views are anchors and an anchor's 2B - 2 (+ K) negatives lie in both
views, so each negative j has a view of its own, v_j (``j // B`` in the batch, ``p mod 2`` for
queue row p, whose rows 2p and 2p + 1 are one image's two views):

- ``negative-view`` (the default and the UnDiMix presets' choice), Eq. (4) as written: j' runs over
  the candidates of the negative's view v_j whose images are neither i's nor j's, ``N - 2`` of them
  (N = B images per view in-batch, B + K/2 with a queue).
- ``anchor-view``: the same mean over the anchor's view instead, the negative's distance to the
  other images as the anchor's view shows them. In Eq. (1) the negatives are all in the other
  view, so there this is not the view Eq. (4) writes.
- ``both-views``: each of the N - 2 images counts with both of its views: in the 2B rows j' runs
  over the 2B - 4 rows other than i, partner(i), j and partner(j). The negative's own other view,
  its most similar row by construction, is left out as Eq. (4) leaves out j.

With a momentum encoder the candidates are the batch's keys and the queue, and the anchor's image
in view v is its key of view v. Each reading is one pass over the (2B, 2B + K) matrix of the
anchors' images against the candidates; the scores carry no gradient. A filling queue's empty rows
(:attr:`~hcl_cli.objectives.core.ScoreBatch.column_valid`, a compiled step's) are left out of every sum and count, K
its filled rows; their own columns hold any value (:func:`~hcl_cli.objectives.undimix.importance` leaves them out).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from hcl_cli.objectives.core import PairBatch


def candidate_views(batch: PairBatch) -> tuple[Tensor, Tensor]:
    """(2B + K,) the view of each candidate (0 or 1: ``j // B`` in the batch, ``p mod 2`` for queue row p) and
    (2, 2B + K) the candidate of the same image in view 0 and in view 1."""
    size, device = batch.batch_size, batch.masks.rows.device
    columns = torch.arange(2 * size, device=device)
    queue = torch.arange(batch.queue_size, device=device)
    views = torch.cat([columns // size, queue % 2])
    first = torch.cat([columns % size, 2 * size + queue - queue % 2])
    second = torch.cat([columns % size + size, 2 * size + queue - queue % 2 + 1])
    return views, torch.stack([first, second])


def view_sums(candidates: Tensor, views: Tensor, valid: Tensor | None) -> Tensor:
    """(2, d) the sum of each view's candidates (those that exist, ``valid``), as one product with the (2, 2B + K) view
    indicator (no boolean index, whose size would be read back from the device)."""
    indicator = views[None, :] == torch.arange(2, device=views.device)[:, None]
    return (indicator if valid is None else indicator & valid).to(candidates.dtype) @ candidates


def images_by_candidates(batch: PairBatch) -> Tensor:
    """(2B, 2B + K) the cosine of each anchor's image in the anchor's view (the anchor in-batch, its key with a queue) with each candidate."""
    return batch.cosine.detach() if batch.momentum_keys is None else batch.key_z @ batch.candidates.T


def at_least_one(count: int | Tensor) -> int | Tensor:
    """``max(count, 1)``: of a number, or on the device of a 0-d count."""
    return max(count, 1) if not isinstance(count, Tensor) else count.clamp(min=1)


def images_per_view(batch: PairBatch) -> int | Tensor:
    """N - 2, the number of terms of Eq. (4)'s mean (N = B + K/2 images per view), at least 1; counted on the device
    where :attr:`~hcl_cli.objectives.core.ScoreBatch.column_valid` marks the queue's filled rows."""
    queued = batch.queue_size if batch.column_valid is None else batch.column_valid.sum() - 2 * batch.batch_size
    return at_least_one(batch.batch_size + queued // 2 - 2)


def plus_share(base: Tensor, other: Tensor, count: int | Tensor) -> Tensor:
    """``base + other / count``: ``torch.add``'s ``alpha`` for a number, a product for a 0-d count on the device."""
    return torch.add(base, other, alpha=1.0 / count) if not isinstance(count, Tensor) else base + other / count


def negative_view_diversity(batch: PairBatch) -> Tensor:
    """(2B, 2B + K) ``r_ij`` of Eq. (4) as written: ``1 - mean cos(c_j, c_j')`` over the N - 2 candidates j' of
    the negative's view v_j whose images are neither i's nor j's.

    ``sum_{j' in view v_j} cos(c_j, c_j')`` is ``c_j`` against the sum of its view's candidates; taking away
    ``c_j`` itself and anchor i's image in view v_j (row ``v_j B + (i mod B)`` of :func:`images_by_candidates`)
    leaves the N - 2. Both views of an anchor's image get the same row: the mean does not depend on the anchor's view.
    """
    candidates = batch.candidates
    views, _ = candidate_views(batch)
    own_view = (view_sums(candidates, views, batch.column_valid) @ candidates.T).gather(0, views[None, :])[0] - (
        candidates * candidates
    ).sum(dim=1)
    count = images_per_view(batch)
    first, second = images_by_candidates(batch).view(2, batch.batch_size, -1)
    anchor_image = torch.where(views[None, :] == 1, second, first)
    return plus_share(1.0 - own_view / count, anchor_image, count).repeat(2, 1)


def anchor_view_diversity(batch: PairBatch) -> Tensor:
    """(2B, 2B + K) ``r_ij``, Eq. (4) over the anchor's view: ``1 - mean cos(c_j, c_j')`` over the N - 2 candidates
    j' of the anchor's view whose images are neither i's nor j's.

    ``sum_{j' in view v} cos(c_j, c_j')`` is ``c_j`` against the sum of view v's candidates; taking away the
    candidate's own image in view v (a (2, 2B + K) table by view) and the anchor's image (its row of
    :func:`images_by_candidates`) leaves the N - 2: one pass over the matrix, each half of the anchors against its view's row.
    """
    candidates = batch.candidates
    views, twins = candidate_views(batch)
    own_image = (candidates[None, :, :] * candidates[twins]).sum(dim=2)
    count = images_per_view(batch)
    by_view = 1.0 - (view_sums(candidates, views, batch.column_valid) @ candidates.T - own_image) / count
    rows_by_candidates = images_by_candidates(batch)
    halves = rows_by_candidates.view(2, batch.batch_size, -1)
    return plus_share(by_view[:, None, :], halves, count).view_as(rows_by_candidates)


def both_views_diversity(batch: PairBatch) -> Tensor:
    """(2B, 2B + K) ``r_ij``, Eq. (4) over both views: mean ``1 - cos(c_j, c_j')`` over the candidates j' of images other than i's and j's.

    ``own_j``, the sum over every candidate but j and its image's other view, is the column sum of
    the batch's keys' cosines with the candidates (the rows' own in-batch), plus ``c_j`` against
    the sum of the queue, less those two; taking away the two rows of anchor i's image leaves the
    ``2B + K - 4`` others.
    """
    rows_by_candidates = images_by_candidates(batch)
    partner, rows = batch.masks.partner, batch.masks.rows
    own, own_cosine, pair_cosine = rows_by_candidates.sum(dim=0), rows_by_candidates[rows, rows], rows_by_candidates[partner, rows]
    if batch.queue_size:
        queue = batch.queue_z
        pairs = torch.arange(batch.queue_size, device=queue.device) ^ 1
        filled = queue if batch.column_valid is None else torch.where(batch.column_valid[2 * batch.batch_size :, None], queue, 0.0)
        own = own + batch.candidates @ filled.sum(dim=0)
        own_cosine = torch.cat([own_cosine, (queue * queue).sum(dim=1)])
        pair_cosine = torch.cat([pair_cosine, (queue * queue[pairs]).sum(dim=1)])
    others = (own - own_cosine - pair_cosine)[None, :] - rows_by_candidates - rows_by_candidates.index_select(0, partner)
    return 1.0 - others / at_least_one(batch.num_negatives - 2)


DIVERSITY_READINGS: dict[str, Callable[[PairBatch], Tensor]] = {
    "negative-view": negative_view_diversity,
    "anchor-view": anchor_view_diversity,
    "both-views": both_views_diversity,
}
"""Each choice of ``undimix_diversity`` (:data:`~hcl_cli.objectives.registry.UNDIMIX_DIVERSITY`) and what computes it."""
