"""The score and gradient passes where the driver keeps each shard's row order (worker side, pure).

:func:`~dpipe.reduce.score_pass` leaves each shard's sort order in its worker's memo for the
gradient pass that follows: 4 bytes a row held on the workers between the two passes (8 for
two fits). That is free where the shards are held in memory anyway, and it is what an
out-of-core fit cannot afford: streaming 10^8 rows on two workers, the orders alone take
200 MB of each worker's limit. Here the order travels with the scores instead (4 bytes a
row more to the driver, which holds it), the driver sends each shard its row weights in row
order, and a worker holds nothing per row between passes: only the shards and results in
flight. The products are the same as :func:`~dpipe.reduce.weighted_row_sum`'s, bit for bit
(the same row weights, the same kernel).
"""

from __future__ import annotations

import numpy as np

from ._sorted import ClassRuns, class_runs, score_shard

__all__ = ["scores_with_order", "row_gradient_pass", "row_product_pass", "row_gradient_squares_pass", "row_direction_pass"]


def scores_with_order(shard, w: np.ndarray) -> tuple[ClassRuns, np.ndarray, np.ndarray]:
    """A shard's sorted scores per class (:func:`~dpipe.reduce.class_scores`) and each class's rows in that order (int32
    within the shard, int64 beyond 2^31 rows); nothing is remembered."""
    sc = score_shard(shard, w)
    small = np.int32 if shard.n_rows < 2**31 else np.int64
    return class_runs(shard, sc), sc.pos_rows.astype(small), sc.neg_rows.astype(small)


def row_gradient_pass(shard, g: np.ndarray) -> np.ndarray:
    """``X^T g`` for one weight per row, in row order."""
    return shard.block.rmatvec(g) if shard.n_rows else np.zeros(shard.block.shape[1])


def row_product_pass(shard, g: np.ndarray) -> np.ndarray:
    """:func:`row_gradient_pass` in a Hessian-vector product (counted as the product passes)."""
    return row_gradient_pass(shard, g)


def row_gradient_squares_pass(shard, g: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[X^T g, (X * X)^T c]`` (shape ``(2, d)``, reading ``X`` once) for per-row values in row order."""
    return shard.block.rmatvec_squares(g, c) if shard.n_rows else np.zeros((2, shard.block.shape[1]))


def row_direction_pass(shard, d: np.ndarray) -> np.ndarray:
    """``X d`` in row order."""
    return shard.block.matvec(d) if shard.n_rows else np.zeros(0)


# counted as the passes they stand for (:func:`dpipe.engine._pass_count.pass_kind`): the same record on every engine
scores_with_order.pass_kind = "score_pass"  # type: ignore[attr-defined]
row_gradient_pass.pass_kind = "gradient_pass"  # type: ignore[attr-defined]
row_product_pass.pass_kind = "product_pass"  # type: ignore[attr-defined]
row_gradient_squares_pass.pass_kind = "gradient_squares_pass"  # type: ignore[attr-defined]
row_direction_pass.pass_kind = "direction_pass"  # type: ignore[attr-defined]
