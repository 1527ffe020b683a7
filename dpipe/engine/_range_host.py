"""The worker side of the range route (:mod:`._ranges`): a shard host's range-partitioned passes.

Between the three calls of one evaluation (``range_scores``, ``range_evaluate``,
``range_gradient``; or the scalar dual's ``dual_round`` / ``dual_gradient``) a host keeps its
shards' sorted scores and its own ranges' results; its ``async`` methods answer the other
hosts' fetches on the worker's event loop. The driver's side, which cuts the score axis and
adds the hosts' replies in a fixed order, is :class:`._ranges.RangeExchange`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from .._runs import RangeInput, merge_runs
from ..objectives._prbep_dual import DualScale, SortedClass
from ..objectives._rank_kernels import pairs_right
from ..reduce import weighted_row_sum
from ..reduce._ranges import Assembly, PackedRanges, Piece, PieceShape, SortedShard, assemble, class_slices, cut, pack_ranges, shard_weights, sketch, sort_shard, split_back, unpack_ranges
from ._waits import pass_timeout

if TYPE_CHECKING:
    from ._protocols import DualRisk, RangeRisk

__all__ = ["RangeHost", "StaleScores", "pairs_below", "unpacked_ranges"]


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
        self._kept: tuple[str, np.ndarray, list[tuple[RangeInput, Assembly, list[PieceShape]]]] | None = None
        self._own_pos: tuple[str, list[tuple[np.ndarray, np.ndarray | None]]] | None = None  # (pass key, per range its positives sorted and their weights)
        return self._me

    def range_forget(self) -> bool:
        """Drop the peers' handles and the pass state. A handle unpickled on a worker holds a future of its actor's key
        there, which would keep the peers (and their shards) alive after the driver releases them."""
        self._peers = [None] * len(getattr(self, "_peers", []))
        self._state = None
        self._results = {}
        self._kept = None
        self._own_pos = None
        return True

    def _sorted(self, key: str) -> list[SortedShard]:
        if self._state is None or self._state.key != key:
            raise StaleScores(f"shard host: the scores of pass {key!r} are not here (replaced by {None if self._state is None else self._state.key!r})")
        return self._state.shards

    def _from_peers(self, method: str, local: Any, *args: Any) -> list:
        """``method(*args)`` of every host in host order (their range blocks' order); this host's by calling ``local`` directly.

        A peer in this process (the local engine's hosts, :class:`._local.LocalDataset`) is asked the same way as this
        host: its synchronous method of ``local``'s name, no copy.

        Each wait is bounded by ``dpipe.timeout``: a peer whose worker died would otherwise hold
        this worker's one actor thread, and every actor on it, for good.
        """
        if any(p is None for i, p in enumerate(self._peers) if i != self._me):
            raise ConnectionError("shard host: its peers were dropped (the dataset was closed or a host was lost)")
        calls = [None if i == self._me or isinstance(p, RangeHost) else getattr(p, method)(*args) for i, p in enumerate(self._peers)]
        bound = pass_timeout()
        return [c.result(timeout=bound) if c is not None else local(*args) if i == self._me else getattr(self._peers[i], local.__name__)(*args)
                for i, c in enumerate(calls)]

    def range_scores(self, w: np.ndarray, key: str, sketch_size: int) -> tuple[list[tuple[int, tuple, tuple[float, float]]], float]:
        """Score and sort every shard: per shard ``(index, sketch, (W+, W-))`` (:func:`~dpipe.reduce._ranges.sketch`), and the seconds it took.

        One entry per shard, not merged here: the driver orders them by shard index, so that
        the splitters and the class weights do not depend on which host holds which shard.
        """
        t0 = time.perf_counter()
        self._state = None
        self._results = {}
        self._kept = None
        self._own_pos = None
        shards = [sort_shard(s, w) for s in self.shards]
        self._state = _State(key, shards)
        return [(ss.index, sketch(ss, sketch_size), ss.class_weights) for ss in shards], time.perf_counter() - t0

    def _pieces(self, key: str, bounds: np.ndarray, t: float) -> list[list]:
        return [[cut(ss, lo, hi, t) for ss in self._sorted(key)] for lo, hi in zip(bounds[:-1], bounds[1:])]

    async def range_pieces(self, key: str, bounds: np.ndarray, t: float) -> PackedRanges:
        """This host's pieces of each of the ranges ``[bounds[i], bounds[i + 1])`` (for their host): per range, per shard, packed."""
        return pack_ranges(self._pieces(key, bounds, t))

    def range_evaluate(self, key: str, bounds: np.ndarray, first: int, stop: int, risk: RangeRisk, keep: bool = False) -> dict[str, Any]:
        """Run ``risk`` on this host's ranges ``first .. stop - 1``; keep each piece's results; return each range's sums and what they cost.

        ``bounds`` holds every range (:func:`range_count` of them, a function of the rows
        only; sub-ranges small enough that a range's arrays come from the allocator's heap
        and stay in cache); this host runs the consecutive block ``[first, stop)``. A range's
        pieces are merged in shard order, whichever host sent them, and its sums go back
        to the driver per range: a range's results depend on the data and the bounds only.
        With ``keep`` each range's merged input, its assembly and its pieces' shapes stay in
        ``_kept`` (for :class:`._newton_host.NewtonHost`, which takes them).
        """
        t0 = time.perf_counter()
        mine = np.asarray(bounds[first: stop + 1], dtype=np.float64)
        by_host = cast(list[list[list[Piece]]],  # range_pieces packs Piece records
                       [unpacked_ranges(x) for x in self._from_peers("range_pieces", self._pieces, key, mine, float(risk.halo))])
        t1 = time.perf_counter()
        own = {ss.index for ss in self._sorted(key)}
        parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        own_pos: list[tuple[np.ndarray, np.ndarray | None]] = []
        per_range: list[tuple[float, float, float]] = []
        kept: list[tuple[RangeInput, Assembly, list[PieceShape]]] = []
        sums = dict.fromkeys(("rows", "bytes", "seconds_merge", "seconds_kernel"), 0.0)
        for sub in range(stop - first):
            pieces = sorted((p for host in by_host for p in host[sub]), key=lambda p: p.shard)  # shard order: ties merge alike on any placement
            ta = time.perf_counter()
            r, how = assemble(pieces)
            tb = time.perf_counter()
            value, exact, g_pos, g_neg = risk.at_range(r)  # the range's shares and its own rows' weights (RiskAt, Plane)
            tc = time.perf_counter()
            own_pos.append((r.sp[r.own_pos_start:], None if r.vp is None else r.vp[r.own_pos_start:]))
            if keep:
                kept.append((r, how, [PieceShape.of(p) for p in pieces]))
            for p, g in zip(pieces, split_back(how, pieces, g_pos, g_neg)):
                parts.setdefault(p.shard, []).append(g)
            per_range.append((float(value), float(exact), float(g_pos.sum() + g_neg.sum())))
            sums["rows"] += float(g_pos.size + g_neg.size)
            sums["bytes"] += float(sum(p.sp.nbytes + p.sn.nbytes + (0 if p.vp is None or p.vn is None else p.vp.nbytes + p.vn.nbytes) for p in pieces if p.shard not in own))
            sums["seconds_merge"] += tb - ta
            sums["seconds_kernel"] += tc - tb
        self._results = {shard: (np.concatenate([g[0] for g in gs]), np.concatenate([g[1] for g in gs])) for shard, gs in parts.items()}
        self._own_pos = (key, own_pos)
        self._kept = (key, mine, kept) if keep else None
        return {**sums, "ranges": per_range, "seconds_fetch": t1 - t0, "seconds_host": time.perf_counter() - t0}

    def _take_results(self, key: str, shards: Sequence[int]) -> list:
        self._sorted(key)
        empty = (np.zeros(0), np.zeros(0))  # a host with no range (more hosts than ranges) holds no results
        return [self._results.get(i, empty) for i in shards]

    async def range_results(self, key: str, shards: Sequence[int]) -> list:
        """This host's ranges' results for the own rows of ``shards`` (for their host), in range order."""
        return self._take_results(key, shards)

    def range_gradient(self, key: str) -> tuple[list[tuple[int, np.ndarray]], float]:
        """``(index, X^T g)`` of each of this host's shards, their rows' results fetched from every range; and the seconds after the fetch.

        Not added here: the driver adds every shard's d-vector in one pairwise tree over the
        shard indices (:func:`._tree.pairwise`), so the sum does not depend on which host
        holds which shard, nor on how many hosts there are.
        """
        sorted_shards = self._sorted(key)
        mine = [ss.index for ss in sorted_shards]
        per_range = self._from_peers("range_results", self._take_results, key, mine)
        t0 = time.perf_counter()
        out = []
        for j, (shard, ss) in enumerate(zip(self.shards, sorted_shards)):
            gp, gn = shard_weights(ss, [results[j] for results in per_range])
            out.append((ss.index, weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, gp, gn)))
        return out, time.perf_counter() - t0

    def _slices(self, key: str, bounds: np.ndarray) -> list[list[tuple]]:
        return [[(ss.index, *class_slices(ss, lo, hi)) for ss in self._sorted(key)] for lo, hi in zip(bounds[:-1], bounds[1:])]

    async def range_slices(self, key: str, bounds: np.ndarray) -> PackedRanges:
        """This host's rows scoring in each range ``[bounds[i], bounds[i + 1])``, and the negatives' weight below (for the ranges' host):
        per range, per shard ``(index, *class_slices)``, packed."""
        return pack_ranges(self._slices(key, bounds))

    def _negatives(self, key: str, bounds: np.ndarray) -> list[list[tuple]]:
        return [[(ss.index, np.zeros(0), None if ss.neg_weight is None else np.zeros(0), *class_slices(ss, lo, hi)[2:]) for ss in self._sorted(key)]
                for lo, hi in zip(bounds[:-1], bounds[1:])]

    async def range_negatives(self, key: str, bounds: np.ndarray) -> PackedRanges:
        """This host's negatives scoring in each range and their weight below (:func:`~dpipe.reduce._ranges.class_slices` without the positives), packed."""
        return pack_ranges(self._negatives(key, bounds))

    def range_auc(self, key: str, bounds: np.ndarray, first: int, stop: int) -> list[float]:
        """Per range ``first .. stop - 1`` (this host's): the weight of the (positive, negative) pairs ranked right (ties half) whose positive scores in it.

        After a range evaluation of the same pass its positives are here already (merged):
        only the negatives travel. Every range's slices are taken in shard order and its
        count goes back on its own, so the counts do not depend on the hosts.
        """
        mine = np.asarray(bounds[first: stop + 1], dtype=np.float64)
        own = self._own_pos[1] if self._own_pos is not None and self._own_pos[0] == key else None
        by_host = [unpacked_ranges(x) for x in self._from_peers("range_slices" if own is None else "range_negatives",
                                                          self._slices if own is None else self._negatives, key, mine)]
        counts = []
        for sub in range(stop - first):
            parts = [x[1:] for x in sorted((x for host in by_host for x in host[sub]), key=itemgetter(0))]
            counts.append(pairs_below(parts, own=None if own is None else own[sub]))
        return counts

    # -- PRBEP: one scalar found from sums over every shard (dpipe.objectives._prbep_dual) -----------------------

    def _classes(self, key: str) -> list[tuple[SortedClass, SortedClass]]:
        return [(SortedClass(ss.pos, ss.pos_cum_weight, ss.pos_cum_sum), SortedClass(ss.neg, ss.neg_cum_weight, ss.neg_cum_sum))
                for ss in self._sorted(key)]

    def dual_round(self, key: str, risk: DualRisk, k: DualScale, grids: dict[str, np.ndarray], brackets: dict[str, tuple[float, float]],
                   limit: int) -> dict[str, Any]:
        """Every shard's sums of the risk's scalar functions at the grids, and the breakpoints strictly inside the brackets.

        ``grids`` / ``brackets`` map a function (``"dual"``, ``"exact"``) to points / an
        interval; a listing is None when some shard has more than ``limit`` breakpoints there.
        The sums are not added here (the driver adds every shard's in shard order): per
        function, the shards' indices and each sum stacked, shape (shards, grid points).
        """
        classes = self._classes(key)
        indices = np.array([ss.index for ss in self._sorted(key)], dtype=np.int64)
        out: dict[str, Any] = {}
        for name, grid in grids.items():
            parts = [risk.scalar_sums(name, pos, neg, k, grid) for pos, neg in classes]
            out[name] = (indices, tuple(np.stack([p[i] for p in parts]) for i in range(len(parts[0]))))
        for name, (a, b) in brackets.items():
            found = [risk.scalar_breakpoints(name, pos, neg, k, a, b, limit) for pos, neg in classes]
            listed = [f for f in found if f is not None]
            out[name + " breakpoints"] = None if len(listed) < len(found) else np.unique(np.concatenate(listed or [np.zeros(0)]))
        return out

    def dual_gradient(self, key: str, risk: DualRisk, k: DualScale, theta: float) -> list[tuple[int, float, np.ndarray, float]]:
        """Per shard ``(index, the risk's share of its rows at the scalar theta, X^T g, the sum of g)`` (no other host involved;
        the driver adds the shards in shard order)."""
        out = []
        for shard, ss, (pos, neg) in zip(self.shards, self._sorted(key), self._classes(key)):
            g_pos, g_neg, share = risk.dual_weights(pos, neg, ss.pos_weight, ss.neg_weight, k, theta)
            out.append((ss.index, float(share), weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, g_pos, g_neg), float(g_pos.sum() + g_neg.sum())))
        return out


def unpacked_ranges(reply: PackedRanges | list[list[tuple]]) -> list[list[tuple]]:
    """A peer's packed reply unpacked (this host's own answer comes unpacked)."""
    return unpack_ranges(reply) if isinstance(reply, PackedRanges) else reply


def pairs_below(parts: Sequence[tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None, float]],
                own: tuple[np.ndarray, np.ndarray | None] | None = None) -> float:
    """``sum_i v_i (W-(s_j < s_i) + W-(s_j = s_i) / 2)`` over the positives of one range, from every shard's
    :func:`~dpipe.reduce._ranges.class_slices` (or the range's positives already merged, ``own``).

    The positives are merged once; each shard's negatives, a sorted run already, are counted against them in one
    sweep each (:func:`~dpipe.objectives._rank_kernels.pairs_right`, no allocation), so the negatives are never merged:
    O(shards x positives + negatives), against a sort of every negative of the range. Unweighted, the counts are
    exact in any order; weighted, the runs are added in shard order, whichever host sent them.
    """
    if not parts:
        return 0.0
    weighted = parts[0][3] is not None
    vp: np.ndarray | None = None
    if own is not None:
        sp, vp = own
    elif weighted:
        sp, op, _ = merge_runs([p[0] for p in parts])
        vp = np.concatenate([cast(np.ndarray, p[1]) for p in parts])[op]
    else:  # values only: NumPy's vectorized sort, no permutation to carry
        sp = np.sort(np.concatenate([p[0] for p in parts]))
    wp = float(sp.size if vp is None else vp.sum())
    inside = 0.0
    for p in parts:  # shard order
        if p[2].size:
            inside += pairs_right(sp, p[2], vp, p[3]) if weighted else pairs_right(sp, p[2])
    return inside + wp * float(sum(p[4] for p in parts))
