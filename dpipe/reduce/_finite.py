"""Non-finite values refused on read, at no extra pass over the features.

Every pass already computes something from every feature value: the scores
``X w`` (score, evaluation and prediction passes) or the class / column moments.
A NaN or an infinite feature makes that result non-finite, so each pass checks its
own result (O(n) for scores, O(d^2) for moments) and only when it is not finite
scans the shard for the first offending row, raising a
:class:`~dpipe.exceptions.ShardValueError` naming the shard and the row (the
engine adds the store's path). Sample weights are checked directly (finite and
>= 0, O(n) on 4 bytes per row) by the passes that use them.

A result that is not finite although every feature is (a non-finite ``w``) raises
nothing here: it is the solver's, not the store's.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import ShardValueError
from ._block import as_block

__all__ = ["check_features", "check_scores", "check_weights", "first_bad_row"]

def first_bad_row(X) -> tuple[int, int] | None:
    """(row, column) of the first non-finite value of a feature block (dense or CSR), or None."""
    return as_block(X).first_nonfinite()


def check_features(shard) -> None:
    """Scan ``shard.block`` and raise at its first non-finite value (called once a pass's result is not finite)."""
    found = shard.block.first_nonfinite()
    if found is not None:
        r, c = found
        raise ShardValueError(f"feature {c} is {shard.block.value_at(r, c)!r} (non-finite values cannot be used)", shard.index, r)


def check_scores(shard, s: np.ndarray) -> None:
    """Raise when the scores ``s`` of ``shard`` are not finite because of a feature value (O(n))."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf rows: NaN, no warning
        total = s.sum() if s.size else 0.0
    if not np.isfinite(total):
        check_features(shard)


def check_weights(shard) -> None:
    """Raise at the first sample weight that is not finite or is negative (O(n))."""
    v = shard.weight
    if v is None or v.size == 0:
        return
    if v.min() >= 0 and np.isfinite(v.max()):  # a NaN fails the first test
        return
    r = int(np.argmax(~(np.isfinite(v) & (v >= 0))))
    raise ShardValueError(f"sample weight is {float(v[r])!r} (weights must be finite and >= 0)", shard.index, r)
