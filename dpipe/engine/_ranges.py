"""Evaluations on the workers: the hosts merge and weigh the scores, the driver handles O(hosts) numbers.

The driver-merged route (:class:`._passes.RankPasses`) brings every score to the driver,
merges them and runs the kernel there: O(n) serial work and bytes per evaluation,
whatever the number of workers. Here the shard hosts (one per worker, holding that
worker's persisted shards) do it among themselves. A risk with a *range kernel*
(auc-smooth, the ROCArea oracle) takes three host calls per evaluation:

1. ``range_scores`` — every host scores and sorts its shards (kept in its memory until
   the next evaluation) and returns one sketch of them (:func:`dpipe.reduce._ranges.sketch`,
   :func:`~dpipe.reduce._ranges.merge_sketches`: at most 2 x 257 keys) and its class weights;
   the driver cuts the score axis into ranges of equal rows, a few per host (ranges of
   about :data:`RANGE_ROWS` rows, so that their arrays come from the allocator's heap and
   stay in cache: :func:`choose_splitters`);
2. ``range_evaluate`` — every host fetches its ranges' pieces from every host, worker to
   worker (the rows, halos of width ``t`` and three totals: :func:`dpipe.reduce._ranges.cut`,
   answered by the peers' ``async`` methods on their event loops), merges each range
   and runs the risk's range kernel (``risk.at_range``, pure); it keeps each piece's
   results and returns a few floats;
3. ``range_gradient`` — every host fetches its shards' results from the range hosts and
   returns ``X^T g`` over its shards; the driver adds one d-vector per host.

A risk with a *scalar dual* (prbep-smooth: every row's weight depends on the scores
through one number) exchanges no rows: after ``range_scores`` a few ``dual_round`` calls
evaluate per-shard sums on grids that narrow around the root (:class:`_ScalarSearch`),
and ``dual_gradient`` weighs each shard's rows locally.

The driver sends ``w`` and receives per host a sketch and a d-vector: bytes that do not
grow with the rows or the shards. Between the workers travel the rows whose range is on
another host (8 bytes a row, 16 with weights) and their weights back (8 bytes a row).
One more round trip than the driver-merged route, so on small data that route is
faster: :func:`resolve_exchange` chooses by the store's rows.

The exact training AUC (for the progress lines) is one more exchange, run only when
asked (:meth:`RangeExchange.train_auc`): each host gathers the negatives scoring in its
ranges (and, after a dual evaluation, the positives too) and counts the pairs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._config import get_setting
from .._runs import merge_runs
from .._validation import check_choice
from ..exceptions import ParameterError
from ..objectives._prbep_dual import DualScale, SortedClass
from ..objectives._rank_kernels import sorted_auc
from ..reduce import weighted_row_sum
from ..reduce._ranges import SortedShard, assemble, class_slices, cut, merge_sketches, shard_weights, sketch, sort_shard, split_back
from ._tree import pairwise
from ._waits import pass_timeout

__all__ = ["RangeHost", "RangeExchange", "StaleScores", "pairs_below", "RANGE_ROWS", "MAX_ROUNDS", "exchange_may_run", "RangeEvaluation", "GRID", "LIST_LIMIT", "choose_splitters", "resolve_exchange", "supports_ranges", "EXCHANGE_MODES", "SKETCH_SIZE", "EXCHANGE_AUTO_ROWS"]

#: ``dpipe.rank-exchange``: where the smoothed objectives merge and weigh the scores
EXCHANGE_MODES = ("auto", "driver", "workers")
#: keys per class and shard in a splitter sketch
SKETCH_SIZE = 256
#: ``auto`` exchanges on the workers from this many rows (measured: bench/results/scaling.md)
EXCHANGE_AUTO_ROWS = 500_000
#: rows per range: a host with more cuts its share into this many (arrays of about 4 MB: from the allocator's heap, in cache)
RANGE_ROWS = 500_000


class StaleScores(RuntimeError):
    """A host no longer holds the scores of a pass (another evaluation on the same store replaced them)."""


class _State(NamedTuple):
    key: str
    shards: list[SortedShard]


class RangeHost:
    """The range-partitioned passes of a shard host (mixed into :class:`._dataset.ShardHost`).

    The host keeps, between the three calls of one evaluation, its shards' sorted
    scores and the results of its own range; the next evaluation replaces them. The
    ``async`` methods answer other hosts on the worker's event loop, so a host waiting
    for its peers in its own thread never blocks them.
    """

    shards: list

    def range_peers(self, peers: Sequence[Any], me: int) -> int:
        """Every host's actor, in range order, and which one this is (no handle to itself is kept)."""
        self._peers, self._me = [None if i == int(me) else p for i, p in enumerate(peers)], int(me)
        self._state: _State | None = None
        self._results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._own_pos: tuple[str, np.ndarray, np.ndarray | None] | None = None  # (pass key, its range's positives sorted, their weights)
        return self._me

    def range_forget(self) -> bool:
        """Drop the peers' handles and the pass state. A handle unpickled on a worker holds a future of its actor's key
        there, which would keep the peers (and their shards) alive after the driver releases them."""
        self._peers = [None] * len(getattr(self, "_peers", []))
        self._state = None
        self._results = {}
        self._own_pos = None
        return True

    def _sorted(self, key: str) -> list[SortedShard]:
        if self._state is None or self._state.key != key:
            raise StaleScores(f"shard host: the scores of pass {key!r} are not here (replaced by {None if self._state is None else self._state.key!r})")
        return self._state.shards

    def _from_peers(self, method: str, local: Any, *args: Any) -> list:
        """``method(*args)`` of every host in range order; this host's by calling ``local`` directly.

        Each wait is bounded by ``dpipe.timeout``: a peer whose worker died would otherwise hold
        this worker's one actor thread, and every actor on it, for good.
        """
        if any(p is None for i, p in enumerate(self._peers) if i != self._me):
            raise ConnectionError("shard host: its peers were dropped (the dataset was closed or a host was lost)")
        calls = [None if i == self._me else getattr(p, method)(*args) for i, p in enumerate(self._peers)]
        bound = pass_timeout()
        return [local(*args) if c is None else c.result(timeout=bound) for c in calls]

    def range_scores(self, w: np.ndarray, key: str, sketch_size: int) -> tuple[tuple, tuple[float, float], float]:
        """Score and sort every shard: one sketch of them all (:func:`~dpipe.reduce._ranges.merge_sketches`), ``(W+, W-)`` and the seconds it took."""
        t0 = time.perf_counter()
        self._state = None
        self._results = {}
        self._own_pos = None
        shards = [sort_shard(s, w) for s in self.shards]
        self._state = _State(key, shards)
        weights = [ss.class_weights for ss in shards]
        sketched = merge_sketches([sketch(ss, sketch_size) for ss in shards], sketch_size)
        return sketched, (float(sum(p for p, _ in weights)), float(sum(n for _, n in weights))), time.perf_counter() - t0

    def _pieces(self, key: str, bounds: np.ndarray, t: float) -> list[list]:
        return [[cut(ss, lo, hi, t) for ss in self._sorted(key)] for lo, hi in zip(bounds[:-1], bounds[1:])]

    async def range_pieces(self, key: str, bounds: np.ndarray, t: float) -> list[list]:
        """This host's pieces of each of the ranges ``[bounds[i], bounds[i + 1])`` (for their host): per range, per shard."""
        return self._pieces(key, bounds, t)

    def range_evaluate(self, key: str, bounds: np.ndarray, risk: Any) -> dict[str, float]:
        """Run ``risk`` on this host's ranges; keep each piece's results; return the ranges' sums and what they cost.

        ``bounds`` holds every host's ranges, ``per_host`` consecutive ones each (sub-ranges
        small enough that a range's arrays come from the allocator's heap and stay in cache).
        """
        t0 = time.perf_counter()
        per_host = (len(bounds) - 1) // len(self._peers)
        mine = np.asarray(bounds[self._me * per_host: (self._me + 1) * per_host + 1], dtype=np.float64)
        by_host = self._from_peers("range_pieces", self._pieces, key, mine, float(risk.halo))
        t1 = time.perf_counter()
        own = {ss.index for ss in self._sorted(key)}
        parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        own_pos: list[tuple[np.ndarray, np.ndarray | None]] = []
        sums = dict.fromkeys(("value", "exact", "weight_sum", "rows", "bytes", "seconds_merge", "seconds_kernel"), 0.0)
        for sub in range(per_host):
            pieces = [p for host in by_host for p in host[sub]]
            ta = time.perf_counter()
            r, how = assemble(pieces)
            tb = time.perf_counter()
            value, exact, g_pos, g_neg = risk.at_range(r)  # the range's shares and its own rows' weights (RiskAt, Plane)
            tc = time.perf_counter()
            own_pos.append((r.sp[r.own_pos_start:], None if r.vp is None else r.vp[r.own_pos_start:]))
            for p, g in zip(pieces, split_back(how, pieces, g_pos, g_neg)):
                parts.setdefault(p.shard, []).append(g)
            sums["value"] += float(value)
            sums["exact"] += float(exact)
            sums["weight_sum"] += float(g_pos.sum() + g_neg.sum())
            sums["rows"] += float(g_pos.size + g_neg.size)
            sums["bytes"] += float(sum(p.sp.nbytes + p.sn.nbytes + (0 if p.vp is None else p.vp.nbytes + p.vn.nbytes) for p in pieces if p.shard not in own))
            sums["seconds_merge"] += tb - ta
            sums["seconds_kernel"] += tc - tb
        self._results = {shard: (np.concatenate([g[0] for g in gs]), np.concatenate([g[1] for g in gs])) for shard, gs in parts.items()}
        self._own_pos = (key, np.concatenate([p for p, _ in own_pos]), None if own_pos[0][1] is None else np.concatenate([v for _, v in own_pos]))
        return {**sums, "seconds_fetch": t1 - t0, "seconds_host": time.perf_counter() - t0}

    def _take_results(self, key: str, shards: Sequence[int]) -> list:
        self._sorted(key)
        return [self._results[i] for i in shards]

    async def range_results(self, key: str, shards: Sequence[int]) -> list:
        """This range's results for the own rows of ``shards`` (for their host)."""
        return self._take_results(key, shards)

    def range_gradient(self, key: str) -> tuple[np.ndarray, float]:
        """``X^T g`` over this host's shards (added in shard order), their rows' results fetched from every range; and the seconds after the fetch.

        A host adds its own shards and the driver the hosts, so the sum depends on where the
        shards were placed (float64 rounding), unlike the driver-merged route's sums in shard order.
        """
        sorted_shards = self._sorted(key)
        mine = [ss.index for ss in sorted_shards]
        per_range = self._from_peers("range_results", self._take_results, key, mine)
        t0 = time.perf_counter()
        out = []
        for j, (shard, ss) in enumerate(zip(self.shards, sorted_shards)):
            gp, gn = shard_weights(ss, [results[j] for results in per_range])
            out.append(weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, gp, gn))
        return pairwise(out, np.add), time.perf_counter() - t0

    def _slices(self, key: str, lo: float, hi: float) -> list:
        return [class_slices(ss, lo, hi) for ss in self._sorted(key)]

    async def range_slices(self, key: str, lo: float, hi: float) -> list:
        """This host's rows scoring in ``[lo, hi)``, and the negatives' weight below (for the range's host)."""
        return self._slices(key, lo, hi)

    def _negatives(self, key: str, lo: float, hi: float) -> list:
        return [(np.zeros(0), None if ss.neg_weight is None else np.zeros(0), *class_slices(ss, lo, hi)[2:]) for ss in self._sorted(key)]

    async def range_negatives(self, key: str, lo: float, hi: float) -> list:
        """This host's negatives scoring in ``[lo, hi)`` and their weight below (:func:`~dpipe.reduce._ranges.class_slices` without the positives)."""
        return self._negatives(key, lo, hi)

    def range_auc(self, key: str, bounds: np.ndarray) -> float:
        """The weight of the (positive, negative) pairs ranked right (ties half) whose positive scores in this host's range.

        After a range evaluation of the same pass its positives are here already (merged):
        only the negatives travel.
        """
        per_host = (len(bounds) - 1) // len(self._peers)
        lo, hi = float(bounds[self._me * per_host]), float(bounds[(self._me + 1) * per_host])
        if self._own_pos is not None and self._own_pos[0] == key:
            parts = [p for part in self._from_peers("range_negatives", self._negatives, key, lo, hi) for p in part]
            return pairs_below(parts, own=self._own_pos[1:])
        return pairs_below([p for part in self._from_peers("range_slices", self._slices, key, lo, hi) for p in part])

    # -- PRBEP: one scalar found from sums over every shard (dpipe.objectives._prbep_dual) -----------------------

    def _classes(self, key: str) -> list[tuple[SortedClass, SortedClass]]:
        return [(SortedClass(ss.pos, ss.pos_cum_weight, ss.pos_cum_sum), SortedClass(ss.neg, ss.neg_cum_weight, ss.neg_cum_sum))
                for ss in self._sorted(key)]

    def dual_round(self, key: str, risk: Any, k: DualScale, grids: dict[str, np.ndarray], brackets: dict[str, tuple[float, float]],
                   limit: int) -> dict[str, Any]:
        """This host's sums of the risk's scalar functions at the grids, and the breakpoints strictly inside the brackets.

        ``grids`` / ``brackets`` map a function (``"dual"``, ``"exact"``) to points / an
        interval; a listing is None when some shard has more than ``limit`` breakpoints there.
        """
        classes = self._classes(key)
        out: dict[str, Any] = {}
        for name, grid in grids.items():
            parts = [risk.scalar_sums(name, pos, neg, k, grid) for pos, neg in classes]
            out[name] = tuple(np.sum([p[i] for p in parts], axis=0) for i in range(len(parts[0]))) if parts else None
        for name, (a, b) in brackets.items():
            found = [risk.scalar_breakpoints(name, pos, neg, k, a, b, limit) for pos, neg in classes]
            out[name + " breakpoints"] = None if any(f is None for f in found) else np.unique(np.concatenate(found or [np.zeros(0)]))
        return out

    def dual_gradient(self, key: str, risk: Any, k: DualScale, theta: float) -> tuple[float, np.ndarray, float]:
        """The risk's share of this host's rows at the scalar ``theta``, ``X^T g`` over its shards and the sum of ``g``
        (no other host involved)."""
        out, value, weight_sum = [], 0.0, 0.0
        for shard, ss, (pos, neg) in zip(self.shards, self._sorted(key), self._classes(key)):
            g_pos, g_neg, share = risk.dual_weights(pos, neg, ss.pos_weight, ss.neg_weight, k, theta)
            value += share
            weight_sum += float(g_pos.sum() + g_neg.sum())
            out.append(weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, g_pos, g_neg))
        return value, pairwise(out, np.add), weight_sum


def pairs_below(parts: Sequence[tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None, float]],
                own: tuple[np.ndarray, np.ndarray | None] | None = None) -> float:
    """``sum_i v_i (W-(s_j < s_i) + W-(s_j = s_i) / 2)`` over the positives of one range, from every shard's
    :func:`~dpipe.reduce._ranges.class_slices` (or the range's positives already merged, ``own``): both classes
    sorted, one sweep (:func:`~dpipe.objectives._rank_kernels.sorted_auc`)."""
    if not parts:
        return 0.0
    vp = vn = None
    if parts[0][3] is None:  # values only: NumPy's vectorized sort, no permutation to carry
        sn = np.sort(np.concatenate([p[2] for p in parts]))
        sp = own[0] if own is not None else np.sort(np.concatenate([p[0] for p in parts]))
    else:
        sn, on, _ = merge_runs([p[2] for p in parts])
        vn = np.concatenate([p[3] for p in parts])[on]
        if own is not None:
            sp, vp = own
        else:
            sp, op, _ = merge_runs([p[0] for p in parts])
            vp = np.concatenate([p[1] for p in parts])[op]
    wp = float(sp.size if vp is None else vp.sum())
    wn = float(sn.size if vn is None else vn.sum())
    inside = sorted_auc(sp, sn, vp, vn) * wp * wn if wp > 0 and wn > 0 else 0.0
    return inside + wp * float(sum(p[4] for p in parts))


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


def supports_ranges(risk: Any) -> bool:
    """Whether the workers can evaluate ``risk`` without the driver merging the scores.

    Either a range kernel (``at_range(RangeInput) -> (value share, exact share, own
    positives' weights, own negatives' weights)``, ``range_scale(class_weights)``,
    ``halo``, and ``ranged`` not False) or a scalar dual (``scalar_sums``,
    ``scalar_breakpoints``, ``dual_weights``: :class:`~dpipe.objectives.SmoothedPRBEPRisk`).
    """
    if callable(getattr(risk, "scalar_sums", None)):
        return True
    return callable(getattr(risk, "at_range", None)) and bool(getattr(risk, "ranged", True))


def exchange_may_run(n_rows: int) -> bool:
    """Whether a fit on persisted shards of a store of ``n_rows`` rows may evaluate on the workers (for the memory model)."""
    mode = check_choice(get_setting("rank-exchange"), "rank-exchange", "the dpipe settings", EXCHANGE_MODES)
    return mode == "workers" or (mode == "auto" and n_rows >= EXCHANGE_AUTO_ROWS)


def resolve_exchange(dataset: Any, risk: Any, mode: str | None = None) -> str:
    """``"driver"`` or ``"workers"``: where an evaluation of ``risk`` merges and weighs the scores.

    ``dpipe.rank-exchange``: ``"workers"`` needs shard hosts (a dask cluster with the
    shards persisted) and a risk the workers can evaluate (:func:`supports_ranges`:
    auc-smooth, prbep-smooth, the ROCArea oracle); ``"auto"`` takes it when both are
    there and the store has at least :data:`EXCHANGE_AUTO_ROWS` rows.

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
                                 "(auc-smooth, prbep-smooth and the rocarea oracle have); use 'auto' or 'driver'")
        if not hosts:
            raise ParameterError("dpipe.rank-exchange='workers' needs a dask cluster with the shards persisted (cache='memory'); "
                                 "this dataset runs in this process or streams its shards: use 'auto' or 'driver'")
        return mode
    rows = dataset.store.manifest.n_rows if getattr(dataset, "store", None) is not None else 0
    return "workers" if hosts and ranged and exchange_may_run(rows) else "driver"


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

    def __init__(self, dataset: Any) -> None:
        self.ds = dataset
        self._token = uuid.uuid4().hex
        self._calls = 0
        self._key: str | None = None
        self._w: np.ndarray | None = None
        self._bounds = np.array([-np.inf, np.inf])
        self._scale = 0.0
        self.last: dict[str, float] = {}

    def _score(self, w: np.ndarray) -> tuple[str, list, tuple[float, float], np.ndarray]:
        """Score and sort on every host; the class weights and the bounds of ``hosts x q`` ranges of at most about :data:`RANGE_ROWS` rows."""
        self._calls += 1
        key = f"{self._token}-{self._calls}"
        self._key = None
        hosts = self.ds.host_count()
        scored = self.ds.host_calls("range_scores", [(w, key, SKETCH_SIZE)] * hosts)
        wp = float(sum(cw[0] for _, cw, _ in scored))
        wn = float(sum(cw[1] for _, cw, _ in scored))
        sketches = [sk for sk, _, _ in scored]
        rows = sum(float(sk[1].sum() + sk[3].sum()) for sk in sketches)
        per_host = max(1, int(np.ceil(rows / (hosts * RANGE_ROWS))))
        return key, scored, (wp, wn), choose_splitters(sketches, hosts * per_host)

    def _finish(self, key: str, w: np.ndarray, bounds: np.ndarray, class_weights: tuple[float, float]) -> None:
        wp, wn = class_weights
        self._key, self._w, self._bounds, self._scale = key, w, bounds, 1.0 / (wp * wn) if wp > 0 and wn > 0 else 0.0

    def _driver_bytes(self, d: int, scored: list, calls: int) -> float:
        """Bytes through the driver: ``w`` to every host per call, each host's sketch and class weights, a d-vector per host."""
        sketches = sum(sum(a.nbytes for a in sk) + 16 for sk, _, _ in scored)
        return float(8 * d * len(scored) * calls + sketches + 8 * d * len(scored))

    def evaluate(self, w: np.ndarray, risk: Any) -> RangeEvaluation:
        """The risk's value, exact value and ``X^T dR/ds`` at ``w`` (:class:`._dataset.HostsLost` if a host goes)."""
        w = np.array(w, dtype=np.float64)  # a copy: train_auc may score these weights again
        if callable(getattr(risk, "scalar_sums", None)):
            return self._evaluate_dual(w, risk)
        return self._evaluate_ranges(w, risk)

    def _evaluate_ranges(self, w: np.ndarray, risk: Any) -> RangeEvaluation:
        """Score, range kernels, gradient: three host calls."""
        t0 = time.perf_counter()
        hosts = self.ds.host_count()
        key, scored, (wp, wn), bounds = self._score(w)
        t1 = time.perf_counter()
        ranges = self.ds.host_calls("range_evaluate", [(key, bounds, risk)] * hosts)
        t2 = time.perf_counter()
        scale = risk.range_scale((wp, wn))
        value = scale * sum(r["value"] for r in ranges)
        exact = scale * sum(r["exact"] for r in ranges)
        parts = self.ds.host_calls("range_gradient", [(key,)] * hosts)
        grad = scale * pairwise([g for g, _ in parts], np.add)
        t3 = time.perf_counter()
        self._finish(key, w, bounds, (wp, wn))
        self.last = {
            "seconds_score": t1 - t0, "seconds_exchange": t2 - t1, "seconds_gradient": t3 - t2,
            "seconds_merge": max(r["seconds_merge"] for r in ranges), "seconds_kernel": max(r["seconds_kernel"] for r in ranges),
            "seconds_fetch": max(r["seconds_fetch"] for r in ranges), "seconds_host_exchange": max(r["seconds_host"] for r in ranges),
            "seconds_host_score": max(sec for _, _, sec in scored), "seconds_host_gradient": max(sec for _, sec in parts),
            "bytes_moved": self._driver_bytes(w.size, scored, 3) + 8 * bounds.size * hosts,
            "bytes_exchanged": float(sum(r["bytes"] for r in ranges) + 8 * sum(r["rows"] for r in ranges) * (hosts - 1) / max(hosts, 1)),
            "range_rows_max": max(r["rows"] for r in ranges), "ranges": float(bounds.size - 1),
        }
        return RangeEvaluation(value, exact, grad, (wp, wn), scale * sum(r["weight_sum"] for r in ranges))

    def _evaluate_dual(self, w: np.ndarray, risk: Any) -> RangeEvaluation:
        """Score, a few rounds of scalar searches (the smoothed risk's root, the exact risk's minimum), gradient."""
        t0 = time.perf_counter()
        hosts = self.ds.host_count()
        key, scored, (wp, wn), bounds = self._score(w)
        k = risk.dual_scale((wp, wn))
        sketches = [sk for sk, _, _ in scored]
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
            moved += hosts * sum(8 * g.size * 5 for g in grids.values())  # a grid out, four sums back
            moved += sum(8 * r[n + " breakpoints"].size for r in replies for n in brackets if r[n + " breakpoints"] is not None)
            for n in grids:
                parts = [r[n] for r in replies if r[n] is not None]
                searches[n].take_sums(tuple(np.sum([p[i] for p in parts], axis=0) for i in range(len(parts[0]))))
            for n in brackets:
                listed = [r[n + " breakpoints"] for r in replies]
                searches[n].take_breakpoints(None if any(x is None for x in listed) else np.unique(np.concatenate(listed)))
        theta = searches["dual"].root()
        t2 = time.perf_counter()
        parts = self.ds.host_calls("dual_gradient", [(key, risk, k, theta)] * hosts)
        value = float(sum(v for v, _, _ in parts))
        grad = pairwise([g for _, g, _ in parts], np.add)
        t3 = time.perf_counter()
        self._finish(key, w, bounds, (wp, wn))
        self.last = {
            "seconds_score": t1 - t0, "seconds_search": t2 - t1, "seconds_gradient": t3 - t2, "search_rounds": float(rounds),
            "seconds_host_score": max(sec for _, _, sec in scored),
            "bytes_moved": self._driver_bytes(w.size, scored, 2) + moved,
            "bytes_exchanged": 0.0,
        }
        return RangeEvaluation(value, risk.exact_from(searches["exact"].best), grad, (wp, wn), float(sum(s for _, _, s in parts)))

    def train_auc(self) -> float:
        """Exact (weighted) training ROC-AUC of the last evaluation (one more exchange: each host gathers its range's rows)."""
        if self._key is None:
            raise RuntimeError("RangeExchange.train_auc needs a finished evaluate()")
        try:
            counts = self.ds.host_calls("range_auc", [(self._key, self._bounds)] * self.ds.host_count())
        except StaleScores:  # another evaluation on this store since: score the same weights again
            key, _, class_weights, bounds = self._score(self._w)
            self._finish(key, self._w, bounds, class_weights)
            counts = self.ds.host_calls("range_auc", [(self._key, self._bounds)] * self.ds.host_count())
        return float(self._scale * sum(counts))
