"""Evaluations on the workers: the hosts merge and weigh the scores, the driver handles O(hosts) numbers.

The driver-merged route (:class:`._passes.RankPasses`) brings every score to the driver,
merges them and runs the kernel there: O(n) serial work and bytes per evaluation,
whatever the number of workers. Here the shard hosts (one per worker, holding that
worker's persisted shards) do it among themselves. A risk with a *range kernel*
(auc-smooth, the ROCArea oracle) takes three host calls per evaluation:

1. ``range_scores`` — every host scores and sorts its shards (kept in its memory until
   the next evaluation) and returns each shard's sketch (:func:`dpipe.reduce._ranges.sketch`:
   at most 2 x 257 keys) and class weights; the driver cuts the score axis into
   :func:`range_count` ranges of equal rows (of at most about :data:`RANGE_ROWS` rows, so
   that their arrays come from the allocator's heap and stay in cache:
   :func:`choose_splitters`) and gives each host a block of consecutive ranges
   (:func:`host_blocks`);
2. ``range_evaluate`` — every host fetches its ranges' pieces from every host, worker to
   worker (the rows, halos of width ``t`` and three totals: :func:`dpipe.reduce._ranges.cut`,
   answered by the peers' ``async`` methods on their event loops), merges each range
   and runs the risk's range kernel (``risk.at_range``, pure); it keeps each piece's
   results and returns a few floats per range;
3. ``range_gradient`` — every host fetches its shards' results from the range hosts and
   returns ``X^T g`` of each of its shards; the driver adds one d-vector per shard.

A risk with a *scalar dual* (prbep-smooth: every row's weight depends on the scores
through one number) exchanges no rows: after ``range_scores`` a few ``dual_round`` calls
evaluate per-shard sums on grids that narrow around the root (:class:`_ScalarSearch`),
and ``dual_gradient`` weighs each shard's rows locally.

The driver sends ``w`` and receives per shard a sketch (at most 8 KB) and a d-vector: bytes
that do not grow with the rows. Between the workers travel the rows whose range is on
another host (8 bytes a row, 16 with weights) and their weights back (8 bytes a row).
One more round trip than the driver-merged route, so on small data that route is
faster: :func:`resolve_exchange` chooses by the store's rows.

Newton-CG (auc) evaluates on the same ranges and keeps each range's curvature there for its
Hessian-vector products, three host calls per CG step: :mod:`._range_newton`.

The exact training AUC (for the progress lines) is one more exchange, run only when
asked (:meth:`RangeExchange.train_auc`): each host gathers the negatives scoring in its
ranges (and, after a dual evaluation, the positives too) and counts the pairs.

Determinism. Every result of this route is a function of the data alone, whichever host
holds which shard and however many hosts there are: the number of ranges and their
bounds depend on the rows and every shard's sketch (taken in shard order), never on the
hosts; a range merges its pieces in shard order, whichever host sent them; hosts return
one result per shard (sketch, class weights, scalar sums, d-vector) or per range (value
shares, pair counts), never a sum over their own shards, and the driver adds them in a
fixed order (d-vectors in one pairwise tree over the shard indices, scalars with
``math.fsum``, which is correctly rounded). So fits on 1, 2 or 12 workers, or with the
shards placed differently, are bit-identical. The local engine runs this route too,
on shard hosts in its own process (one per thread, :meth:`._local.LocalDataset.host_calls`),
so the local engine and any cluster agree bit for bit on either route. This route rounds
differently from the driver-merged one (the kernels run per range, within about 1e-12
relative): a fit that loses a host part way goes on on the driver's route
(:mod:`dpipe.fit._smooth`), so its last bits differ from an undisturbed fit's. ``auto``
keeps stores of fewer than :data:`EXCHANGE_AUTO_ROWS` rows on the driver's route, where a
fit that lost a worker agrees bit for bit too.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from .._config import get_setting
from .._validation import check_choice
from ..exceptions import ParameterError
from ._range_host import StaleScores
from ._tree import pairwise

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from ._protocols import Dataset, DualRisk, HostedDataset, RangeRisk

__all__ = [
    "RangeExchange", "RANGE_ROWS", "MAX_ROUNDS", "exchange_may_run", "RangeEvaluation", "GRID",
    "LIST_LIMIT", "choose_splitters", "resolve_exchange", "supports_ranges", "EXCHANGE_MODES", "SKETCH_SIZE", "EXCHANGE_AUTO_ROWS", "RANGE_MULTIPLE",
    "range_count", "host_blocks", "in_shard_order", "Scored",
]

#: ``dpipe.rank-exchange``: where the smoothed objectives merge and weigh the scores
EXCHANGE_MODES = ("auto", "driver", "workers")
#: keys per class and shard in a splitter sketch
SKETCH_SIZE = 256
#: ``auto`` exchanges on the workers from this many rows (measured: bench/results/scaling.md)
EXCHANGE_AUTO_ROWS = 500_000
#: rows per range at most, about (arrays of about 4 MB: from the allocator's heap, in cache)
RANGE_ROWS = 500_000
#: the number of ranges is a multiple of this: as many ranges on each of 1, 2, 3, 4, 6 or 12 hosts
RANGE_MULTIPLE = 12


def choose_splitters(sketches: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], ranges: int) -> np.ndarray:
    """Bounds of ``ranges`` ranges that share the sketched rows of both classes evenly.

    Parameters
    ----------
    sketches : sequence of tuples
        :func:`~dpipe.reduce._ranges.sketch` results (keys and counts per class; the
        negatives' keys are their scores plus 1).
    ranges : int
        How many ranges.

    Returns
    -------
    ndarray of shape (ranges + 1,)
        ``-inf``, the ``ranges - 1`` splitters (non-decreasing; equal ones make empty ranges), ``+inf``.
    """
    keys = np.concatenate([np.concatenate([s[0], s[2]]) for s in sketches]) if sketches else np.zeros(0)
    counts = np.concatenate([np.concatenate([s[1], s[3]]) for s in sketches]) if sketches else np.zeros(0)
    inner = np.zeros(max(ranges - 1, 0))
    if ranges > 1 and keys.size:
        order = np.argsort(keys, kind="stable")
        keys, cum = keys[order], np.cumsum(counts[order])
        targets = cum[-1] * np.arange(1, ranges) / ranges
        inner = keys[np.minimum(np.searchsorted(cum, targets, side="left"), keys.size - 1)]
    return np.concatenate([[-np.inf], inner, [np.inf]])


def range_count(rows: float) -> int:
    """How many score ranges an evaluation of ``rows`` rows cuts the score axis into: a function of the rows only.

    A multiple of :data:`RANGE_MULTIPLE` ranges of at most about :data:`RANGE_ROWS` rows.
    The ranges' bounds (:func:`choose_splitters` on every shard's sketch, in shard order),
    and with them each range's rounding, then depend on the data and never on the number
    of hosts, which only decides which host runs which ranges (:func:`host_blocks`).
    """
    return RANGE_MULTIPLE * max(1, math.ceil(rows / (RANGE_MULTIPLE * RANGE_ROWS)))


def host_blocks(ranges: int, hosts: int) -> list[tuple[int, int]]:
    """Each host's consecutive ranges ``[first, stop)``, in host order, their sizes differing by at most one."""
    return [(ranges * h // hosts, ranges * (h + 1) // hosts) for h in range(hosts)]


def in_shard_order(parts: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
    """The sum of ``(shard index, d-vector)`` parts, from any hosts in any order, in one pairwise tree over the shard indices."""
    return pairwise([g for _, g in sorted(parts, key=itemgetter(0))], np.add)


def supports_ranges(risk: object) -> bool:
    """Whether the workers can evaluate ``risk`` without the driver merging the scores.

    Either a range kernel (``at_range(RangeInput) -> (value share, exact share, own
    positives' weights, own negatives' weights)``, ``range_scale(class_weights)``,
    ``halo``, and ``ranged`` not False) or a scalar dual (``scalar_sums``,
    ``scalar_breakpoints``, ``dual_weights``: :class:`~dpipe.objectives.SmoothedPRBEPRisk`).
    """
    if callable(getattr(risk, "scalar_sums", None)):
        return True
    return callable(getattr(risk, "at_range", None)) and bool(getattr(risk, "ranged", True))


def _is_dual(risk: object) -> TypeIs[DualRisk]:
    """Whether the workers evaluate ``risk`` through its scalar dual (:class:`~dpipe.engine._protocols.DualRisk`)."""
    return callable(getattr(risk, "scalar_sums", None))


def exchange_may_run(n_rows: int) -> bool:
    """Whether a fit on persisted shards of a store of ``n_rows`` rows may evaluate on the workers (for the memory model)."""
    mode = check_choice(get_setting("rank-exchange"), "rank-exchange", "the dpipe settings", EXCHANGE_MODES)
    return mode == "workers" or (mode == "auto" and n_rows >= EXCHANGE_AUTO_ROWS)


def resolve_exchange(dataset: Dataset, risk: object, mode: str | None = None) -> str:
    """``"driver"`` or ``"workers"``: where an evaluation of ``risk`` merges and weighs the scores.

    ``dpipe.rank-exchange``: ``"workers"`` needs shard hosts (the shards held in memory: persisted on a
    dask cluster, or the local engine's hosts in this process) and a risk the workers can evaluate (:func:`supports_ranges`:
    auc's surrogates, auc-smooth, prbep-smooth, the ROCArea oracle); ``"auto"`` takes it when both are
    there and the store has at least :data:`EXCHANGE_AUTO_ROWS` rows. Each route's
    results are a function of the data only (on any number of hosts, any placement), but
    the two round differently: below that size ``auto`` merges on the driver, so that a fit
    that lost a worker agrees bit for bit too (see the module's notes on determinism). The
    local engine chooses by the same rule, so it and any cluster take the same route.

    Parameters
    ----------
    dataset : LocalDataset or ShardedDataset
        The training data.
    risk : object
        The pure risk or oracle to evaluate.
    mode : {"auto", "driver", "workers"}, optional
        Overrides the setting.

    Returns
    -------
    str

    Raises
    ------
    ParameterError
        ``"workers"`` where it cannot run, or an unknown mode.
    """
    mode = check_choice(get_setting("rank-exchange", mode), "rank-exchange", "the dpipe settings", EXCHANGE_MODES)
    if mode == "driver":
        return mode
    hosts = bool(getattr(dataset, "has_hosts", lambda: False)())
    ranged = supports_ranges(risk)
    if mode == "workers":
        if not ranged:
            raise ParameterError(f"dpipe.rank-exchange='workers': {getattr(risk, 'name', risk)} has no range kernel yet "
                                 "(auc, auc-smooth, prbep-smooth and the rocarea oracle have); use 'auto' or 'driver'")
        if not hosts:
            raise ParameterError("dpipe.rank-exchange='workers' needs the shards held in memory (cache='memory'); "
                                 "this dataset streams its shards: use 'auto' or 'driver'")
        return mode
    rows = int(dataset.n_rows)
    return "workers" if hosts and ranged and exchange_may_run(rows) else "driver"


class Scored(NamedTuple):
    """What the driver keeps of one scoring call (:meth:`RangeExchange._score`)."""

    key: str
    #: per host, the seconds its scoring took
    host_seconds: list[float]
    #: every shard's sketch, in shard order
    sketches: list[tuple]
    class_weights: tuple[float, float]
    #: the :func:`range_count` ranges' bounds
    bounds: np.ndarray


class RangeEvaluation(NamedTuple):
    """A smoothed risk evaluated range by range."""

    value: float
    exact: float
    #: ``X^T dR/ds`` (d,)
    gradient: np.ndarray
    class_weights: tuple[float, float]
    #: the sum of every row's weight ``dR/ds_i`` (a constant feature's gradient)
    weight_sum: float


class _ScalarSearch:
    """The driver's search for one scalar of a piecewise-linear monotone function summed over every shard.

    ``kind="root"``: the root of a decreasing function (positive at the grid's first
    point, at most 0 at its last). ``kind="min"``: the minimum of a convex function whose
    slope is the second thing the hosts sum (negative first, at least 0 last). Every
    round evaluates a grid (:data:`GRID`), brackets the sign change between two adjacent
    points, and goes on inside the bracket: a finer grid while more than
    :data:`LIST_LIMIT` breakpoints lie inside, their list when fewer, then those points
    themselves. It ends when no breakpoint lies strictly inside the bracket, where the
    function is linear.
    """

    def __init__(self, kind: str, grid: np.ndarray) -> None:
        self.kind = kind
        self.grid: np.ndarray | None = np.asarray(grid, dtype=np.float64)
        self.bracket: tuple[float, float] | None = None
        self.done = False
        self.ends: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # a, b and the function (root) at them
        self.best = np.inf  # min: the lowest value seen
        self.inside: int | None = None  # breakpoints strictly inside the bracket (ties counted apart)

    def take_sums(self, sums: tuple) -> None:
        """The hosts' sums at :attr:`grid`: ``(value, below, at_or_below)`` or ``(value, slope, below, at_or_below)``."""
        grid, self.grid = self.grid, None
        if grid is None:
            raise RuntimeError("take_sums needs a grid")
        before, self.inside = self.inside, None
        value = sums[0]
        sign = value if self.kind == "root" else -sums[1]  # the root: f > 0 before; the min: slope < 0 before
        below, at_or_below = sums[-2], sums[-1]
        if self.kind == "min":
            self.best = min(self.best, float(value.min()))
        after = np.flatnonzero(sign <= 0)
        if after.size == 0 or after[0] == 0:
            raise RuntimeError(f"scalar search ({self.kind}): the grid does not bracket the sign change ({sign[:3]} ... {sign[-3:]})")
        i = int(after[0])
        a, b = float(grid[i - 1]), float(grid[i])
        self.ends = (a, b, float(value[i - 1]), float(value[i]))
        inside = int(below[i]) - int(at_or_below[i - 1])
        self.inside = inside
        if inside <= 0 or not b > a or np.nextafter(a, np.inf) >= b:
            self.done = True
        elif inside <= LIST_LIMIT or (before is not None and inside >= before):
            # few enough to list, or a finer grid did not shrink them: tied breakpoints, which list as one value
            self.bracket = (a, b)
        else:
            self.grid = np.linspace(a, b, GRID)

    def take_breakpoints(self, points: np.ndarray | None) -> None:
        """The breakpoints strictly inside :attr:`bracket` (None: too many on some shard, narrow with a grid)."""
        if self.bracket is None:
            raise RuntimeError("take_breakpoints needs the bracket of take_sums")
        a, b = self.bracket
        self.bracket = None
        if points is not None and points.size == 0:  # the counts saw a breakpoint the listing puts on an end (rounding): linear inside
            self.done = True
            return
        self.grid = np.linspace(a, b, GRID) if points is None else np.concatenate([[a], points, [b]])

    def root(self) -> float:
        """The root: linear between the bracket's ends."""
        a, b, fa, fb = self.ends
        return b if fb == 0.0 else a + (b - a) * fa / (fa - fb)


#: points per grid of a scalar search
GRID = 256
#: breakpoints left in a bracket (over all shards) below which the hosts list them
LIST_LIMIT = 4096
#: rounds after which a scalar search gives up: each round divides the breakpoints inside by about GRID, or lists them
#: (tied ones as one value); four rounds at 5e6 rows
MAX_ROUNDS = 64


class RangeExchange:
    """The driver's side of evaluations on the workers over a dataset's shard hosts.

    Parameters
    ----------
    dataset : ShardedDataset
        With shard hosts (:meth:`ShardedDataset.has_hosts`).
    """

    def __init__(self, dataset: HostedDataset) -> None:
        self.ds = dataset
        self._token = uuid.uuid4().hex
        self._calls = 0
        self._key: str | None = None
        self._w: np.ndarray | None = None
        self._bounds = np.array([-np.inf, np.inf])
        self._scale = 0.0
        self.last: dict[str, float] = {}

    def _score(self, w: np.ndarray) -> Scored:
        """Score and sort on every host; every shard's sketch and class weights in shard order, and the bounds of
        :func:`range_count` ranges (a function of the rows only, never of the hosts)."""
        self._calls += 1
        key = f"{self._token}-{self._calls}"
        self._key = None
        hosts = self.ds.host_count()
        scored = self.ds.host_calls("range_scores", [(w, key, SKETCH_SIZE)] * hosts)
        shards = sorted((entry for per_host, _ in scored for entry in per_host), key=itemgetter(0))
        # math.fsum: correctly rounded, so the same whatever the order (a weight column's totals are fractional)
        wp = math.fsum(cw[0] for _, _, cw in shards)
        wn = math.fsum(cw[1] for _, _, cw in shards)
        sketches = [sk for _, sk, _ in shards]
        rows = math.fsum(float(sk[1].sum() + sk[3].sum()) for sk in sketches)
        return Scored(key, [sec for _, sec in scored], sketches, (wp, wn), choose_splitters(sketches, range_count(rows)))

    def _finish(self, key: str, w: np.ndarray, bounds: np.ndarray, class_weights: tuple[float, float]) -> None:
        wp, wn = class_weights
        self._key, self._w, self._bounds, self._scale = key, w, bounds, 1.0 / (wp * wn) if wp > 0 and wn > 0 else 0.0

    def _driver_bytes(self, d: int, scored: Scored, calls: int) -> float:
        """Bytes through the driver: ``w`` to every host per call, every shard's sketch and class weights, a d-vector per shard."""
        sketches = sum(sum(a.nbytes for a in sk) + 16 for sk in scored.sketches)
        return float(8 * d * len(scored.host_seconds) * calls + sketches + 8 * d * len(scored.sketches))

    def evaluate(self, w: np.ndarray, risk: object) -> RangeEvaluation:
        """The risk's value, exact value and ``X^T dR/ds`` at ``w`` (:class:`._dataset.HostsLost` if a host goes); ``risk``
        is one :func:`supports_ranges` accepts."""
        w = np.array(w, dtype=np.float64)  # a copy: train_auc may score these weights again
        if _is_dual(risk):
            return self._evaluate_dual(w, risk)
        return self._evaluate_ranges(w, cast("RangeRisk", risk))  # supports_ranges: a range kernel where there is no scalar dual

    def _evaluate_ranges(self, w: np.ndarray, risk: RangeRisk) -> RangeEvaluation:
        """Score, range kernels, gradient: three host calls."""
        t0 = time.perf_counter()
        hosts = self.ds.host_count()
        scored = self._score(w)
        key, bounds, (wp, wn) = scored.key, scored.bounds, scored.class_weights
        t1 = time.perf_counter()
        ranges = self.ds.host_calls("range_evaluate", [(key, bounds, first, stop, risk) for first, stop in host_blocks(bounds.size - 1, hosts)])
        t2 = time.perf_counter()
        per_range = [r for reply in ranges for r in reply["ranges"]]  # the hosts' blocks in host order: range order
        scale = risk.range_scale((wp, wn))
        value = scale * math.fsum(v for v, _, _ in per_range)
        exact = scale * math.fsum(e for _, e, _ in per_range)
        parts = self.ds.host_calls("range_gradient", [(key,)] * hosts)
        grad = scale * in_shard_order([entry for per_host, _ in parts for entry in per_host])
        t3 = time.perf_counter()
        self._finish(key, w, bounds, (wp, wn))
        self.last = {
            "seconds_score": t1 - t0, "seconds_exchange": t2 - t1, "seconds_gradient": t3 - t2,
            "seconds_merge": max(r["seconds_merge"] for r in ranges), "seconds_kernel": max(r["seconds_kernel"] for r in ranges),
            "seconds_fetch": max(r["seconds_fetch"] for r in ranges), "seconds_host_exchange": max(r["seconds_host"] for r in ranges),
            "seconds_host_score": max(scored.host_seconds), "seconds_host_gradient": max(sec for _, sec in parts),
            "bytes_moved": self._driver_bytes(w.size, scored, 3) + 8 * bounds.size * hosts + 24 * len(per_range),
            "bytes_exchanged": float(sum(r["bytes"] for r in ranges) + 8 * sum(r["rows"] for r in ranges) * (hosts - 1) / max(hosts, 1)),
            "range_rows_max": max(r["rows"] for r in ranges), "ranges": float(bounds.size - 1),
        }
        return RangeEvaluation(value, exact, grad, (wp, wn), scale * math.fsum(s for _, _, s in per_range))

    def _evaluate_dual(self, w: np.ndarray, risk: DualRisk) -> RangeEvaluation:
        """Score, a few rounds of scalar searches (the smoothed risk's root, the exact risk's minimum), gradient."""
        t0 = time.perf_counter()
        hosts = self.ds.host_count()
        scored = self._score(w)
        key, bounds, (wp, wn), sketches = scored.key, scored.bounds, scored.class_weights, scored.sketches
        k = risk.dual_scale((wp, wn))
        pos_keys = np.concatenate([sk[0] for sk in sketches])
        neg_scores = np.concatenate([sk[2] for sk in sketches]) - 1.0  # range keys back to scores
        searches = {name: _ScalarSearch(kind, risk.scalar_grid(name, pos_keys, neg_scores, k, GRID)) for name, kind in risk.SCALARS.items()}
        t1 = time.perf_counter()
        rounds, moved = 0, 0.0
        while not all(sr.done for sr in searches.values()):
            rounds += 1
            if rounds > MAX_ROUNDS:
                raise RuntimeError(f"{risk.name}: the scalar searches did not end in {MAX_ROUNDS} rounds")
            grids = {n: sr.grid for n, sr in searches.items() if not sr.done and sr.grid is not None}
            brackets = {n: sr.bracket for n, sr in searches.items() if not sr.done and sr.bracket is not None}
            replies = self.ds.host_calls("dual_round", [(key, risk, k, grids, brackets, LIST_LIMIT)] * hosts)
            moved += sum(8 * g.size * (hosts + 4 * len(sketches)) for g in grids.values())  # a grid out per host, four sums back per shard
            moved += sum(8 * r[n + " breakpoints"].size for r in replies for n in brackets if r[n + " breakpoints"] is not None)
            for n in grids:
                # every shard's sums added in one pairwise tree over the shard indices, whichever host sent them
                order = np.argsort(np.concatenate([r[n][0] for r in replies]), kind="stable")
                stacked = [np.concatenate([r[n][1][i] for r in replies])[order] for i in range(len(replies[0][n][1]))]
                searches[n].take_sums(tuple(pairwise(list(sums), np.add) for sums in stacked))
            for n in brackets:
                listed = [r[n + " breakpoints"] for r in replies]
                searches[n].take_breakpoints(None if any(x is None for x in listed) else np.unique(np.concatenate(listed)))
        theta = searches["dual"].root()
        t2 = time.perf_counter()
        parts = sorted((entry for reply in self.ds.host_calls("dual_gradient", [(key, risk, k, theta)] * hosts) for entry in reply), key=itemgetter(0))
        value = math.fsum(v for _, v, _, _ in parts)
        grad = pairwise([g for _, _, g, _ in parts], np.add)
        t3 = time.perf_counter()
        self._finish(key, w, bounds, (wp, wn))
        self.last = {
            "seconds_score": t1 - t0, "seconds_search": t2 - t1, "seconds_gradient": t3 - t2, "search_rounds": float(rounds),
            "seconds_host_score": max(scored.host_seconds),
            "bytes_moved": self._driver_bytes(w.size, scored, 2) + 16 * len(parts) + moved,
            "bytes_exchanged": 0.0,
        }
        return RangeEvaluation(value, risk.exact_from(searches["exact"].best), grad, (wp, wn), math.fsum(s for *_, s in parts))

    def train_auc(self) -> float:
        """Exact (weighted) training ROC-AUC of the last evaluation (one more exchange: each host gathers its range's rows)."""
        if self._key is None:
            raise RuntimeError("RangeExchange.train_auc needs a finished evaluate()")
        try:
            counts = self._range_counts()
        except StaleScores:  # another evaluation on this store since: score the same weights again
            assert self._w is not None  # set with _key
            scored = self._score(self._w)
            self._finish(scored.key, self._w, scored.bounds, scored.class_weights)
            counts = self._range_counts()
        return float(self._scale * math.fsum(counts))

    def _range_counts(self) -> list[float]:
        """Every range's count of pairs ranked right (:meth:`RangeHost.range_auc`), in range order."""
        blocks = host_blocks(self._bounds.size - 1, self.ds.host_count())
        per_host = self.ds.host_calls("range_auc", [(self._key, self._bounds, first, stop) for first, stop in blocks])
        return [c for counts in per_host for c in counts]
