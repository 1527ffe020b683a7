"""What the passes and the fits rely on: the dataset interface and the risk interfaces, as typing protocols.

:class:`Dataset` is what every opened dataset offers (:class:`~dpipe.engine.LocalDataset`,
:class:`~dpipe.engine.ShardedDataset`, :class:`~dpipe.engine._collection.CollectionDataset`,
:class:`~dpipe.engine._split.DatasetPart`): its sizes, its store (None for shards held in
memory or built from a dask collection) and the three passes. :class:`HostedDataset` adds the
shard hosts of a cluster dataset, which :class:`~dpipe.engine.RangeExchange` calls.

Optional capabilities, read with ``getattr`` and a default where they are used:

* ``has_hosts()`` (cluster datasets): whether the shards are persisted on shard hosts
  (:func:`~dpipe.engine._ranges.resolve_exchange`);
* ``group_names`` (in-memory shards and their parts): the names of the group codes
  (a store's are in its manifest);
* ``client`` (cluster datasets): the dask client; ``load_seconds``: seconds spent reading the
  store into memory.

The risks: :class:`ScoreRisk` is a smoothed risk of the merged scores (what
:class:`~dpipe.fit._smooth.SmoothedObjective` calls), :class:`CurvedRisk` one with a
generalized Hessian (what :class:`~dpipe.fit._newton.PairwiseNewtonObjective` calls).
:class:`RangeRisk` (with :class:`CurvedRangeRisk`, Newton's) and :class:`DualRisk` are the two ways the workers evaluate a risk without
the driver merging the scores (:func:`~dpipe.engine._ranges.supports_ranges` probes them).

The protocols are checked statically (mypy); none is ``runtime_checkable``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from .._runs import MergedScores, RangeInput
    from ..io._store import Store
    from ..objectives._curvature import Curvature
    from ..objectives._prbep_dual import DualScale, SortedClass
    from ..objectives._range_curvature import RangeCurvature
    from ..objectives._risk import RiskAt
    from ._pass_count import PassCount

__all__ = ["Dataset", "HostedDataset", "ScoreRisk", "CurvedRisk", "RangeRisk", "CurvedRangeRisk", "DualRisk"]


class Dataset(Protocol):
    """An opened dataset: shard-aligned data and the passes over it.

    A pass applies a pure shard function ``fn(shard, *args)`` to every shard; the results
    are gathered in shard order (:meth:`map_gather`) or merged pairwise in the tree order of
    :mod:`dpipe.engine._tree` (:meth:`map_reduce`, :meth:`map_reduce_each`), the same bits on
    every engine.
    """

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        ...

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        ...

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        ...

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        ...

    @property
    def store(self) -> Store | None:
        """The store the shards are read from; None for shards held in memory or built from a dask collection."""
        ...

    @property
    def passes(self) -> PassCount:
        """The passes made over the shards so far, by kind (:mod:`dpipe.engine._pass_count`)."""
        ...

    @property
    def keeps_orders(self) -> str:
        """Where a score pass's row orders wait for the passes at the same ``w``: ``"workers"`` (beside shards held in
        memory) or ``"driver"`` (streamed shards: a worker then holds nothing per row between passes)."""
        ...

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """``[fn(shard, *args) for shard]`` in shard order."""
        ...

    def map_reduce(self, fn: Callable[..., Any], combine: Callable[[Any, Any], Any], *args: Any) -> Any:
        """``fn(shard, *args)`` of every shard, merged pairwise with ``combine``."""
        ...

    def map_reduce_each(self, fn: Callable[..., Any], combine: Callable[[Any, Any], Any], per_shard: Sequence[tuple[Any, ...]], *args: Any) -> Any:
        """``fn(shard, *args, *per_shard[i])`` of every shard, merged pairwise with ``combine``."""
        ...


class HostedDataset(Dataset, Protocol):
    """A cluster dataset whose shards are persisted on shard hosts (actors), each holding some shards."""

    def has_hosts(self) -> bool:
        """Whether the shards are on shard hosts."""
        ...

    def host_count(self) -> int:
        """Number of shard hosts."""
        ...

    def host_calls(self, method: str, per_host: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``host.method(*per_host[i])`` on every host ``i``, results in host order."""
        ...


class ScoreRisk(Protocol):
    """A smoothed risk of the merged sorted scores: its value, exact value and per-row weights."""

    name: str

    def at(self, s: MergedScores) -> RiskAt:
        """The risk at the scores ``s``."""
        ...


class CurvedRisk(ScoreRisk, Protocol):
    """A smoothed pairwise risk whose generalized Hessian is a :class:`~dpipe.objectives._curvature.Curvature`."""

    def curvature(self, s: MergedScores) -> Curvature:
        """Where the generalized Hessian is not zero at the scores ``s``."""
        ...


class RangeRisk(Protocol):
    """A risk the workers evaluate score range by score range (the optional ``ranged = False`` turns it off)."""

    name: str

    @property
    def halo(self) -> float:
        """Width of the halo a score range needs beyond its bounds."""
        ...

    def at_range(self, r: RangeInput) -> tuple[float, float, np.ndarray, np.ndarray]:
        """One range's value share, exact share and its own positives' and negatives' weights (a RiskAt or a Plane)."""
        ...

    def range_scale(self, class_weights: tuple[float, float]) -> float:
        """The factor the summed range shares are scaled by, from the class weights."""
        ...


class CurvedRangeRisk(RangeRisk, Protocol):
    """A range risk whose generalized Hessian the workers apply range by range (Newton-CG on the workers' route:
    :class:`~dpipe.engine._range_newton.RangeNewton`)."""

    def range_curvature(self, r: RangeInput) -> RangeCurvature:
        """Where the generalized Hessian is not zero on the range's own rows, not yet times :meth:`range_scale`."""
        ...


class DualRisk(Protocol):
    """A risk the workers evaluate through scalar functions searched by the driver (:mod:`dpipe.objectives._prbep_dual`)."""

    name: str
    #: scalar name -> ``"root"`` or ``"min"``: what the driver's search looks for
    SCALARS: Mapping[str, str]

    def dual_scale(self, class_weights: tuple[float, float]) -> DualScale: ...

    def scalar_grid(self, name: str, pos_scores: np.ndarray, neg_scores: np.ndarray, k: DualScale, size: int) -> np.ndarray: ...

    def scalar_sums(self, name: str, pos: SortedClass, neg: SortedClass, k: DualScale, grid: np.ndarray) -> tuple[Any, ...]: ...

    def scalar_breakpoints(self, name: str, pos: SortedClass, neg: SortedClass, k: DualScale, a: float, b: float, limit: int) -> np.ndarray | None: ...

    def dual_weights(self, pos: SortedClass, neg: SortedClass, vp: np.ndarray | None, vn: np.ndarray | None, k: DualScale,
                     theta: float) -> tuple[np.ndarray, np.ndarray, float]: ...

    def exact_from(self, lowest: float) -> float: ...
