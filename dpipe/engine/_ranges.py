"""Range-partitioned evaluations: the workers merge and weigh the scores, the driver handles O(shards) numbers.

The driver-merged route (:class:`._passes.RankPasses`) brings every score to the driver,
merges them and runs the kernel there: O(n) serial work and bytes per evaluation,
whatever the number of workers. Here each of the H shard hosts (one per worker) owns one
range of the score axis instead:

1. ``range_scores`` — every host scores and sorts its shards (kept in its memory) and
   returns a sketch of each shard (:func:`dpipe.reduce.sketch`, 2 x :data:`SKETCH_SIZE`
   keys) and its class weights; the driver chooses H - 1 splitters that give every range
   as many rows (:func:`choose_splitters`);
2. ``range_evaluate`` — host ``r`` fetches range ``r``'s piece of every shard from every
   host, worker to worker (its rows, halos of width ``t`` and three totals:
   :func:`dpipe.reduce.cut`), merges them and runs the risk's range kernel
   (``risk.at_range``, pure); it keeps each piece's results and returns two floats;
3. ``range_gradient`` — every host fetches its shards' results from the range hosts and
   returns ``X^T g`` per shard; the driver adds the d-vectors in shard order.

The driver sends ``w`` three times and receives the sketches and one d-vector per shard:
bytes independent of n. Between the workers travel the pieces (the scores of the rows
whose range is on another host, with halos, 8 bytes a row, 16 with weights) and their
results (8 bytes a row). Three driver round trips instead of two, so on small data the
driver-merged route is faster: :func:`resolve_exchange` chooses by the store's rows.

The exact training AUC (for the progress lines) is one more exchange, run only when
asked (:meth:`RangeExchange.train_auc`): each host fetches the negatives of its own
positives' range.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._config import get_setting
from .._validation import check_choice
from ..exceptions import ParameterError
from ..reduce import weighted_row_sum
from ..reduce._ranges import SortedShard, assemble, cut, negatives_in, pairs_below, shard_weights, sketch, sort_shard, split_back

__all__ = ["RangeHost", "RangeExchange", "RangeEvaluation", "choose_splitters", "resolve_exchange", "supports_ranges", "EXCHANGE_MODES", "SKETCH_SIZE", "EXCHANGE_AUTO_ROWS"]

#: ``dpipe.rank-exchange``: where the smoothed objectives merge and weigh the scores
EXCHANGE_MODES = ("auto", "driver", "workers")
#: keys per class and shard in a splitter sketch
SKETCH_SIZE = 256
#: ``auto`` exchanges on the workers from this many rows (measured: bench/results/scaling.md)
EXCHANGE_AUTO_ROWS = 500_000


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
        """Every host's actor, in range order, and which one this is."""
        self._peers, self._me = list(peers), int(me)
        self._state: _State | None = None
        self._results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._own: tuple[np.ndarray, np.ndarray | None] = (np.zeros(0), None)
        self._bounds: np.ndarray = np.array([-np.inf, np.inf])
        return self._me

    def _sorted(self, key: str) -> list[SortedShard]:
        if self._state is None or self._state.key != key:
            raise RuntimeError(f"shard host: the scores of pass {key!r} are not here (replaced by {None if self._state is None else self._state.key!r})")
        return self._state.shards

    def _from_peers(self, method: str, local: Any, *args: Any) -> list:
        """``method(*args)`` of every host in range order; this host's by calling ``local`` directly."""
        calls = [None if i == self._me else getattr(p, method)(*args) for i, p in enumerate(self._peers)]
        return [local(*args) if c is None else c.result() for c in calls]

    def range_scores(self, w: np.ndarray, key: str, sketch_size: int) -> tuple[list[tuple], float]:
        """Score and sort every shard: per shard ``(sketch keys, their counts, (W+, W-))``, and the seconds it took."""
        t0 = time.perf_counter()
        self._state = None
        self._results = {}
        shards = [sort_shard(s, w) for s in self.shards]
        self._state = _State(key, shards)
        return [(*sketch(ss, sketch_size), ss.class_weights) for ss in shards], time.perf_counter() - t0

    def _pieces(self, key: str, lo: float, hi: float, t: float) -> list:
        return [cut(ss, lo, hi, t) for ss in self._sorted(key)]

    async def range_pieces(self, key: str, lo: float, hi: float, t: float) -> list:
        """This host's pieces of the range ``[lo, hi)`` (for the range's host)."""
        return self._pieces(key, lo, hi, t)

    def range_evaluate(self, key: str, bounds: np.ndarray, risk: Any) -> dict[str, float]:
        """Run ``risk`` on this host's range; keep each piece's results; return the range's sums and what it cost."""
        t0 = time.perf_counter()
        self._bounds = np.asarray(bounds, dtype=np.float64)
        lo, hi = float(self._bounds[self._me]), float(self._bounds[self._me + 1])
        pieces = [p for part in self._from_peers("range_pieces", self._pieces, key, lo, hi, float(risk.halo)) for p in part]
        t1 = time.perf_counter()
        r, how = assemble(pieces)
        t2 = time.perf_counter()
        value, exact, g_pos, g_neg = risk.at_range(r)  # the range's shares and its own rows' weights (RiskAt, Plane)
        t3 = time.perf_counter()
        self._results = {p.shard: g for p, g in zip(pieces, split_back(how, pieces, g_pos, g_neg))}
        self._own = (r.sp[r.own_pos_start:], None if r.vp is None else r.vp[r.own_pos_start:])
        mine = {ss.index for ss in self._sorted(key)}
        received = sum(p.sp.nbytes + p.sn.nbytes + (0 if p.vp is None else p.vp.nbytes + p.vn.nbytes) for p in pieces if p.shard not in mine)
        return {"value": float(value), "exact": float(exact), "weight_sum": float(g_pos.sum() + g_neg.sum()), "rows": float(r.sp.size - r.own_pos_start + r.own_neg_stop),
                "bytes": float(received), "seconds_fetch": t1 - t0, "seconds_merge": t2 - t1, "seconds_kernel": t3 - t2,
                "seconds_split": time.perf_counter() - t3}

    def _take_results(self, key: str, shards: Sequence[int]) -> list:
        self._sorted(key)
        return [self._results[i] for i in shards]

    async def range_results(self, key: str, shards: Sequence[int]) -> list:
        """This range's results for the own rows of ``shards`` (for their host)."""
        return self._take_results(key, shards)

    def range_gradient(self, key: str) -> tuple[list[np.ndarray], float]:
        """``X^T g`` of every shard of this host, with its rows' results fetched from every range; and the seconds after the fetch."""
        sorted_shards = self._sorted(key)
        mine = [ss.index for ss in sorted_shards]
        per_range = self._from_peers("range_results", self._take_results, key, mine)
        t0 = time.perf_counter()
        out = []
        for j, (shard, ss) in enumerate(zip(self.shards, sorted_shards)):
            gp, gn = shard_weights(ss, [results[j] for results in per_range])
            out.append(weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, gp, gn))
        return out, time.perf_counter() - t0

    def _negatives(self, key: str, lo: float, hi: float) -> list:
        return [negatives_in(ss, lo, hi) for ss in self._sorted(key)]

    async def range_negatives(self, key: str, lo: float, hi: float) -> list:
        """This host's negatives scoring in ``[lo, hi)``, and the weight below (for the range's host)."""
        return self._negatives(key, lo, hi)

    def range_auc(self, key: str) -> float:
        """The weight of the (positive, negative) pairs ranked right (ties half) whose positive is in this host's range."""
        lo, hi = float(self._bounds[self._me]), float(self._bounds[self._me + 1])
        parts = [p for part in self._from_peers("range_negatives", self._negatives, key, lo, hi) for p in part]
        return pairs_below(*self._own, parts)


def choose_splitters(sketches: Sequence[tuple[np.ndarray, np.ndarray]], ranges: int) -> np.ndarray:
    """``ranges - 1`` increasing splitters that cut the sketched keys into parts of equal count (with -inf and +inf: the bounds)."""
    keys = np.concatenate([k for k, _ in sketches]) if sketches else np.zeros(0)
    counts = np.concatenate([c for _, c in sketches]) if sketches else np.zeros(0)
    inner = np.zeros(0)
    if ranges > 1 and keys.size:
        order = np.argsort(keys, kind="stable")
        keys, cum = keys[order], np.cumsum(counts[order])
        targets = cum[-1] * np.arange(1, ranges) / ranges
        inner = keys[np.minimum(np.searchsorted(cum, targets, side="left"), keys.size - 1)]
    elif ranges > 1:
        inner = np.zeros(ranges - 1)
    return np.concatenate([[-np.inf], inner, [np.inf]])


def supports_ranges(risk: Any) -> bool:
    """Whether ``risk`` has a range kernel: ``at_range(RangeInput) -> (value share, exact share, own positives' weights,
    own negatives' weights)``, ``range_scale(class_weights)`` and ``halo``, and says so (``ranged``, default True)."""
    return callable(getattr(risk, "at_range", None)) and bool(getattr(risk, "ranged", True))


def resolve_exchange(dataset: Any, risk: Any, mode: str | None = None) -> str:
    """``"driver"`` or ``"workers"``: where a smoothed objective's evaluations merge and weigh the scores.

    ``dpipe.rank-exchange``: ``"workers"`` needs shard hosts (a dask cluster with the
    shards persisted) and a risk with a range kernel (auc-smooth); ``"auto"`` takes it
    when both are there and the store has at least :data:`EXCHANGE_AUTO_ROWS` rows.
    """
    mode = check_choice(get_setting("rank-exchange", mode), "rank-exchange", "the dpipe settings", EXCHANGE_MODES)
    if mode == "driver":
        return mode
    hosts = bool(getattr(dataset, "has_hosts", lambda: False)())
    ranged = supports_ranges(risk)
    if mode == "workers":
        if not ranged:
            raise ParameterError(f"dpipe.rank-exchange='workers': {getattr(risk, 'name', risk)} has no range kernel yet "
                                 "(auc-smooth and the rocarea oracle have); use 'auto' or 'driver'")
        if not hosts:
            raise ParameterError("dpipe.rank-exchange='workers' needs a dask cluster with the shards persisted (cache='memory'); "
                                 "this dataset runs in this process or streams its shards: use 'auto' or 'driver'")
        return mode
    rows = dataset.store.manifest.n_rows if getattr(dataset, "store", None) is not None else 0
    return "workers" if hosts and ranged and rows >= EXCHANGE_AUTO_ROWS else "driver"


class RangeEvaluation(NamedTuple):
    """A smoothed risk evaluated range by range."""

    value: float
    exact: float
    #: ``X^T dR/ds`` (d,)
    gradient: np.ndarray
    class_weights: tuple[float, float]
    #: the sum of every row's weight ``dR/ds_i`` (a constant feature's gradient)
    weight_sum: float


class RangeExchange:
    """The driver's side of range-partitioned evaluations over a dataset's shard hosts.

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
        self._scale = 1.0
        self.last: dict[str, float] = {}

    def evaluate(self, w: np.ndarray, risk: Any) -> RangeEvaluation:
        """The risk's value, exact value and ``X^T dR/ds`` at ``w`` (three host calls; :class:`._dataset.HostsLost` if a host goes)."""
        t0 = time.perf_counter()
        w = np.asarray(w, dtype=np.float64)
        self._calls += 1
        key = f"{self._token}-{self._calls}"
        self._key = None
        hosts = self.ds.host_count()
        scored = self.ds.host_calls("range_scores", [(w, key, SKETCH_SIZE)] * hosts)
        shards = [s for part, _ in scored for s in part]
        wp = float(sum(s[2][0] for s in shards))
        wn = float(sum(s[2][1] for s in shards))
        bounds = choose_splitters([(s[0], s[1]) for s in shards], hosts)
        t1 = time.perf_counter()
        ranges = self.ds.host_calls("range_evaluate", [(key, bounds, risk)] * hosts)
        t2 = time.perf_counter()
        scale = risk.range_scale((wp, wn))
        value = scale * sum(r["value"] for r in ranges)
        exact = scale * sum(r["exact"] for r in ranges)
        parts = self.ds.host_calls("range_gradient", [(key,)] * hosts)
        grad = scale * self.ds.sum_in_shard_order([p for p, _ in parts])
        t3 = time.perf_counter()
        self._key, self._scale = key, 1.0 / (wp * wn) if wp > 0 and wn > 0 else 0.0
        d, k = w.size, len(shards)
        self.last = {
            "seconds_score": t1 - t0, "seconds_exchange": t2 - t1, "seconds_gradient": t3 - t2,
            "seconds_merge": max(r["seconds_merge"] for r in ranges), "seconds_kernel": max(r["seconds_kernel"] for r in ranges),
            "seconds_fetch": max(r["seconds_fetch"] for r in ranges),
            "seconds_host_score": max(sec for _, sec in scored), "seconds_host_gradient": max(sec for _, sec in parts),
            "bytes_moved": float(3 * 8 * d * hosts + sum(s[0].nbytes + s[1].nbytes + 16 for s in shards) + 8 * d * k + 8 * bounds.size * hosts),
            "bytes_exchanged": float(sum(r["bytes"] for r in ranges) + 8 * sum(r["rows"] for r in ranges) * (hosts - 1) / max(hosts, 1)),
            "range_rows_max": max(r["rows"] for r in ranges),
        }
        return RangeEvaluation(value, exact, grad, (wp, wn), scale * sum(r["weight_sum"] for r in ranges))

    def train_auc(self) -> float:
        """Exact (weighted) training ROC-AUC of the last evaluation (one more exchange)."""
        if self._key is None:
            raise RuntimeError("RangeExchange.train_auc needs a finished evaluate()")
        counts = self.ds.host_calls("range_auc", [(self._key,)] * self.ds.host_count())
        return float(self._scale * sum(counts))
