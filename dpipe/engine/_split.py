"""A seeded split of an opened dataset's rows into a fitting part and a validation part, without writing a store.

Row ``i`` of shard ``k`` is a validation row when the ``i``-th draw of
``numpy.random.default_rng([seed, k])`` is below ``fraction``: a pure function of the
seed, the shard number and the row, so every engine, worker and rerun sees the same
split, and a shard's draws need nothing from the others. A part is the whole dataset
seen through sample weights: the other part's rows weigh 0 (their rows are still read,
and a pass costs what it did; the rate family's passes all honour weights, and a row of
weight 0 changes no rate, no threshold and no gradient).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ._pass_count import PassCount
    from ._protocols import Dataset

__all__ = ["RowSplit", "DatasetPart"]


@dataclasses.dataclass(frozen=True)
class RowSplit:
    """Which rows are validation rows: a share ``fraction`` of them, drawn with ``seed``: the rows whose
    draw is in ``[low, low + fraction)`` (``low`` deals the rows into folds: fold ``j`` of ``K`` is
    ``RowSplit(1 / K, seed, low=j / K)``)."""

    fraction: float
    seed: int = 0
    low: float = 0.0

    def validation_rows(self, shard: Any) -> np.ndarray:
        """Boolean mask of the shard's validation rows."""
        u = np.random.default_rng([int(self.seed), int(shard.index)]).random(shard.n_rows)
        return u < self.fraction if self.low == 0.0 else (u >= self.low) & (u < self.low + self.fraction)

    def part_of(self, shard: Any, part: str) -> Any:
        """The shard with the other part's rows at weight 0."""
        keep = self.validation_rows(shard)
        if part == "fit":
            keep = ~keep
        weight = keep.astype(np.float32) if shard.weight is None else np.where(keep, shard.weight, np.float32(0.0)).astype(np.float32)
        return dataclasses.replace(shard, weight=weight)


def _on_part(fn: Callable, split: RowSplit, part: str, shard: Any, *args: Any) -> Any:
    return fn(split.part_of(shard, part), *args)


class DatasetPart:
    """One part (``"fit"`` or ``"validation"``) of an opened dataset under a :class:`RowSplit`.

    It has the dataset's passes (``map_gather``, ``map_reduce``, ``map_reduce_each``), run on
    the shards with the other part's rows at weight 0, and its ``store``, ``n_features`` and
    ``n_shards``; it is always ``weighted``. The rank exchange runs on the driver (its range
    route reads the shards' own weights).
    """

    def __init__(self, dataset: Dataset, split: RowSplit, part: str) -> None:
        if part not in ("fit", "validation"):
            raise ValueError(f"DatasetPart: part must be 'fit' or 'validation', not {part!r}")
        self.dataset, self.split, self.part = dataset, split, part
        self.store = dataset.store
        self.group_names = getattr(dataset, "group_names", None)

    def __repr__(self) -> str:
        return f"DatasetPart({self.part}, {self.split.fraction:g} validation, seed {self.split.seed})"

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return int(self.dataset.n_features)

    @property
    def n_rows(self) -> int:
        """Rows of the dataset (both parts: a pass reads them all)."""
        return int(self.dataset.n_rows)

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return int(self.dataset.n_shards)

    @property
    def weighted(self) -> bool:
        """Always: the other part's rows weigh 0."""
        return True

    @property
    def passes(self) -> PassCount:
        """The dataset's pass counts (a pass over this part reads every shard of the dataset)."""
        return self.dataset.passes

    @property
    def keeps_orders(self) -> str:
        """The dataset's (:attr:`~dpipe.engine._protocols.Dataset.keeps_orders`)."""
        return str(self.dataset.keeps_orders)

    def _wrap(self, fn: Callable) -> Callable:
        return functools.partial(_on_part, fn, self.split, self.part)

    def map_gather(self, fn: Callable, *args: Any) -> list:
        """The dataset's ``map_gather`` on this part's rows."""
        return self.dataset.map_gather(self._wrap(fn), *args)

    def map_reduce(self, fn: Callable, combine: Callable[[Any, Any], Any], *args: Any) -> Any:
        """The dataset's ``map_reduce`` on this part's rows."""
        return self.dataset.map_reduce(self._wrap(fn), combine, *args)

    def map_reduce_each(self, fn: Callable, combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple], *args: Any) -> Any:
        """The dataset's ``map_reduce_each`` on this part's rows."""
        return self.dataset.map_reduce_each(self._wrap(fn), combine, per_shard, *args)
