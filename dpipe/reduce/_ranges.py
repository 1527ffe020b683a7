"""A shard's side of a range-partitioned score pass (worker side, pure functions).

The driver-merged score pass (:mod:`._sorted`) sends every shard's sorted scores to the
driver. The range-partitioned pass keeps them where they are computed:

1. :func:`sort_shard` sorts a shard's scores per class, as :func:`~._sorted.score_shard`,
   with the prefix sums that the cut needs, and :func:`sketch` samples them so that the
   driver can choose splitters ``a_1 < ... < a_{R-1}`` that give every range as many
   rows (the positives by their score, the negatives by their score plus 1, the margin:
   range ``r`` owns the positives in ``[a_r, a_{r+1})`` and the negatives in
   ``[a_r - 1, a_{r+1} - 1)``, :mod:`dpipe.objectives._auc_ranges`);
2. :func:`cut` gives the :class:`Piece` of one range that this shard holds: its rows in
   the range, the halos of width ``t`` and the totals of the rows beyond;
3. :func:`assemble` merges the pieces of every shard into the range's
   :class:`~dpipe.objectives._auc_ranges.RangeInput`, and :func:`split_back` cuts the
   range's per-row results into each piece's own rows, in the piece's order;
4. :func:`shard_weights` concatenates a shard's pieces of results, range by range, into
   one weight per row in the shard's sorted order, ready for
   :func:`~._sorted.weighted_row_sum`;
5. for Newton's Hessian-vector products at a fixed ``w`` (:mod:`dpipe.engine._newton_host`),
   :func:`shard_direction` and :func:`cut_direction` give each range the ``u = X d`` of the
   rows of its pieces (:func:`cut_positions`: the same cuts, no sort) and the weighted sums
   of ``u`` beyond them.

All of it is O(rows) after the sort, and exact: the ranges' results are those of the
merged kernel up to float64 summation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, cast

import numpy as np

from .._runs import RangeInput, merge_class_runs, scatter_runs
from ._finite import check_weights
from ._sorted import score_shard

__all__ = ["SortedShard", "Piece", "PieceShape", "Assembly", "DirectionPiece", "ShardDirection", "shard_direction", "cut_direction", "cut_positions",
           "sort_shard", "sketch", "cut", "assemble", "split_back", "shard_weights", "class_slices",
           "PackedRanges", "pack_ranges", "unpack_ranges"]


class SortedShard(NamedTuple):
    """One shard's scores sorted per class, kept by its host between the passes of an evaluation."""

    index: int  # type: ignore[assignment]  # the shard's number: a field that shadows tuple.index(), which nothing calls on it
    pos: np.ndarray
    neg: np.ndarray
    pos_rows: np.ndarray
    neg_rows: np.ndarray
    #: sample weights in the order of ``pos`` / ``neg`` (float64), or None
    pos_weight: np.ndarray | None
    neg_weight: np.ndarray | None
    #: prefix sums (length + 1) of the weights of the positives / negatives (None without weights: the counts)
    pos_cum_weight: np.ndarray | None
    neg_cum_weight: np.ndarray | None
    #: prefix sums (length + 1) of the positives' / negatives' weighted scores
    pos_cum_sum: np.ndarray
    neg_cum_sum: np.ndarray
    #: prefix sums (length + 1) of the negatives' weighted squared scores
    neg_cum_square: np.ndarray

    def pos_weight_below(self, i: int) -> float:
        """Weight of ``pos[:i]``."""
        return float(i) if self.pos_cum_weight is None else float(self.pos_cum_weight[i])

    def neg_weight_below(self, j: int) -> float:
        """Weight of ``neg[:j]``."""
        return float(j) if self.neg_cum_weight is None else float(self.neg_cum_weight[j])

    @property
    def class_weights(self) -> tuple[float, float]:
        """``(W+, W-)`` of this shard."""
        return self.pos_weight_below(self.pos.size), self.neg_weight_below(self.neg.size)


class Piece(NamedTuple):
    """What one shard holds of one range (see :class:`~dpipe.objectives._auc_ranges.RangeInput`)."""

    shard: int
    #: positives in ``[lo - t, hi)`` (halo first), negatives in ``[lo - 1, hi - 1 + t)`` (halo last)
    sp: np.ndarray
    sn: np.ndarray
    own_pos_start: int
    own_neg_stop: int
    vp: np.ndarray | None
    vn: np.ndarray | None
    below_pos_weight: float
    above_neg_weight: float
    above_neg_sum: float
    below_pos_sum: float
    above_neg_square: float


class PieceShape(NamedTuple):
    """What a range host keeps of a :class:`Piece` between the Hessian-vector products of one Newton iterate (no rows)."""

    shard: int
    #: the piece's rows (halo included) per class
    pos_size: int
    neg_size: int
    own_pos_start: int
    own_neg_stop: int

    @classmethod
    def of(cls, p: Piece) -> PieceShape:
        """The shape of ``p``."""
        return cls(p.shard, int(p.sp.size), int(p.sn.size), p.own_pos_start, p.own_neg_stop)


class DirectionPiece(NamedTuple):
    """One shard's part of one range of a Newton direction ``u = X d`` (:func:`cut_direction`): the rows of the range's
    :class:`Piece`, in its order, and the weighted sums of ``u`` beyond them."""

    shard: int
    up: np.ndarray
    un: np.ndarray
    #: ``sum v_i u_i`` over the positives below the piece's, ``sum v_j u_j`` over the negatives above its
    below_pos: float
    above_neg: float


def _prefix(values: np.ndarray) -> np.ndarray:
    out = np.empty(values.size + 1)
    out[0] = 0.0
    np.cumsum(values, out=out[1:])
    return out


def sort_shard(shard, w: np.ndarray) -> SortedShard:
    """Scores ``X w`` of one shard sorted per class (:func:`~._sorted.score_shard`), with weights and prefix sums."""
    sc = score_shard(shard, w)
    small = np.int32 if shard.n_rows < 2**31 else np.int64
    vp = vn = None
    if shard.weight is not None:
        check_weights(shard)
        vp, vn = shard.weight[sc.pos_rows].astype(np.float64), shard.weight[sc.neg_rows].astype(np.float64)
    cum_p = None if vp is None else _prefix(vp)
    cum_n = None if vn is None else _prefix(vn)
    sum_p = _prefix(sc.pos if vp is None else vp * sc.pos)
    sum_n = _prefix(sc.neg if vn is None else vn * sc.neg)
    square_n = _prefix(sc.neg * sc.neg if vn is None else vn * sc.neg * sc.neg)
    return SortedShard(shard.index, sc.pos, sc.neg, sc.pos_rows.astype(small), sc.neg_rows.astype(small), vp, vn, cum_p, cum_n, sum_p, sum_n,
                       square_n)


def sketch(ss: SortedShard, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Evenly spaced ranks of each class's scores (the first and last included), each with the rows it stands for.

    Returns ``(positive keys, their counts, negative keys, their counts)``: at most
    ``size + 1`` keys per class, the counts of a class adding up to its rows. The keys
    of the negatives are their scores plus 1 (their range key, :func:`cut`).
    """
    out = []
    for s, shift in ((ss.pos, 0.0), (ss.neg, 1.0)):
        if s.size == 0:
            out += [np.zeros(0), np.zeros(0)]
            continue
        k = min(s.size, size)
        at = np.unique(np.append((np.arange(k) * s.size) // k, s.size - 1))
        out += [s[at] + shift, np.diff(np.append(at, s.size)).astype(np.float64)]
    return out[0], out[1], out[2], out[3]


def cut(ss: SortedShard, lo: float, hi: float, t: float) -> Piece:
    """This shard's :class:`Piece` of one range.

    Parameters
    ----------
    ss : SortedShard
        The shard's sorted scores.
    lo, hi : float
        The range: positives scoring in ``[lo, hi)``, negatives in ``[lo - 1, hi - 1)``.
    t : float
        Halo width: the positives in ``[lo - t, lo)`` and the negatives in ``[hi - 1, hi - 1 + t)`` come too.

    Returns
    -------
    Piece
        The rows, the halos, and the totals beyond them (positives' weight below ``lo - t``;
        negatives' weight and weighted score sum at or above ``hi - 1 + t``).
    """
    p0, p_own, p1, n0, n_own, n1 = cut_positions(ss, lo, hi, t)
    return Piece(
        ss.index, ss.pos[p0:p1], ss.neg[n0:n1], int(p_own - p0), int(n_own - n0),
        None if ss.pos_weight is None else ss.pos_weight[p0:p1], None if ss.neg_weight is None else ss.neg_weight[n0:n1],
        below_pos_weight=ss.pos_weight_below(p0),
        above_neg_weight=ss.neg_weight_below(ss.neg.size) - ss.neg_weight_below(n1),
        above_neg_sum=float(ss.neg_cum_sum[-1] - ss.neg_cum_sum[n1]),
        below_pos_sum=float(ss.pos_cum_sum[p0]),
        above_neg_square=float(ss.neg_cum_square[-1] - ss.neg_cum_square[n1]),
    )


def cut_positions(ss: SortedShard, lo: float, hi: float, t: float) -> tuple[int, int, int, int, int, int]:
    """Where :func:`cut` cuts: ``(p0, p_own, p1, n0, n_own, n1)``, the piece being ``pos[p0:p1]`` and ``neg[n0:n1]``."""
    p0, p_own, p1 = np.searchsorted(ss.pos, [lo - t, lo, hi], side="left")
    n0, n_own, n1 = np.searchsorted(ss.neg, [lo - 1.0, hi - 1.0, hi - 1.0 + t], side="left")
    return int(p0), int(p_own), int(p1), int(n0), int(n_own), int(n1)


class ShardDirection(NamedTuple):
    """A shard's ``u = X d`` in its kept sorted order, with the sums :func:`cut_direction` reads."""

    pos: np.ndarray
    neg: np.ndarray
    #: ``sum v_i u_i`` over ``pos[:k]`` (length + 1) and ``sum v_j u_j`` over ``neg[k:]`` (length + 1)
    pos_below: np.ndarray
    neg_above: np.ndarray


def shard_direction(ss: SortedShard, u_pos: np.ndarray, u_neg: np.ndarray) -> ShardDirection:
    """:class:`ShardDirection` of ``u`` aligned with ``ss.pos`` / ``ss.neg``."""
    wp = u_pos if ss.pos_weight is None else ss.pos_weight * u_pos
    wn = u_neg if ss.neg_weight is None else ss.neg_weight * u_neg
    above = np.zeros(u_neg.size + 1)
    if u_neg.size:
        np.cumsum(wn[::-1], out=above[-2::-1])
    return ShardDirection(u_pos, u_neg, _prefix(wp), above)


def cut_direction(ss: SortedShard, u: ShardDirection, lo: float, hi: float, t: float) -> DirectionPiece:
    """This shard's :class:`DirectionPiece` of one range: the rows of :func:`cut`'s piece (same positions, no new sort)."""
    p0, _, p1, n0, _, n1 = cut_positions(ss, lo, hi, t)
    return DirectionPiece(ss.index, u.pos[p0:p1], u.neg[n0:n1], float(u.pos_below[p0]), float(u.neg_above[n1]))


class Assembly(NamedTuple):
    """How a range's merged rows map back to its pieces (:func:`split_back`)."""

    pos: tuple[np.ndarray, list[int]]
    neg: tuple[np.ndarray, list[int]]
    own_pos_start: int
    own_neg_stop: int


def assemble(pieces: Sequence[Piece]) -> tuple[RangeInput, Assembly]:
    """Merge the pieces of one range: ``(RangeInput, Assembly)``.

    The halo positives (below ``lo``) sort before every own positive and the halo
    negatives (at or above ``hi - 1``) after every own negative, so one merge per class
    keeps each part together.
    """
    weighted = bool(pieces) and pieces[0].vp is not None
    vp, vn = cast(list[np.ndarray], [p.vp for p in pieces]), cast(list[np.ndarray], [p.vn for p in pieces])  # weighted: every piece has weights
    merged, pos, neg = merge_class_runs([p.sp for p in pieces], [p.sn for p in pieces], vp if weighted else None, vn if weighted else None)
    p_own = sum(p.own_pos_start for p in pieces)
    n_own = sum(p.own_neg_stop for p in pieces)
    r = RangeInput(
        merged.pos, merged.neg, p_own, n_own,
        below_pos_weight=float(sum(p.below_pos_weight for p in pieces)),
        above_neg_weight=float(sum(p.above_neg_weight for p in pieces)),
        above_neg_sum=float(sum(p.above_neg_sum for p in pieces)),
        vp=merged.pos_weight, vn=merged.neg_weight,
        below_pos_sum=float(sum(p.below_pos_sum for p in pieces)),
        above_neg_square=float(sum(p.above_neg_square for p in pieces)),
    )
    return r, Assembly(pos, neg, p_own, n_own)


def split_back(a: Assembly, pieces: Sequence[Piece | PieceShape], g_pos: np.ndarray, g_neg: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The range's results on its own rows (merged order) cut into each piece's own rows, in the piece's order."""
    full_p = np.zeros(a.own_pos_start + g_pos.size)
    full_p[a.own_pos_start:] = g_pos
    full_n = np.zeros(sum(a.neg[1]))
    full_n[: a.own_neg_stop] = g_neg
    per_p = scatter_runs(full_p, *a.pos)
    per_n = scatter_runs(full_n, *a.neg)
    return [(gp[p.own_pos_start:], gn[: p.own_neg_stop]) for p, gp, gn in zip(pieces, per_p, per_n)]


def shard_weights(ss: SortedShard, parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """A shard's per-row results from its pieces of every range, in range order: one per row of ``ss.pos`` / ``ss.neg``."""
    gp = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    gn = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    if gp.size != ss.pos.size or gn.size != ss.neg.size:
        raise RuntimeError(f"shard {ss.index}: the ranges returned {gp.size} / {gn.size} weights for {ss.pos.size} / {ss.neg.size} rows")
    return gp, gn


def class_slices(ss: SortedShard, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None, float]:
    """Both classes' rows scoring in ``[lo, hi)`` (scores and weights) and the weight of the negatives below ``lo``: a range's part of the AUC."""
    p0, p1 = np.searchsorted(ss.pos, [lo, hi], side="left")
    n0, n1 = np.searchsorted(ss.neg, [lo, hi], side="left")
    return (ss.pos[p0:p1], None if ss.pos_weight is None else ss.pos_weight[p0:p1],
            ss.neg[n0:n1], None if ss.neg_weight is None else ss.neg_weight[n0:n1], ss.neg_weight_below(n0))


class PackedRanges(NamedTuple):
    """Records of several ranges (per range, per shard: :class:`Piece` or :func:`class_slices` tuples) in a few flat arrays.

    A host answering a peer sends one message of a few buffers instead of several arrays
    per shard and range: with the ranges a function of the rows (12 or more, whatever the
    number of hosts), pickling every piece apart cost about 1 ms per range on 10 shards.
    Packing copies the values exactly; :func:`unpack_ranges` gives them back as views.
    """

    #: the records' type (a NamedTuple such as :class:`Piece`, or ``tuple``)
    record: type
    #: per field: ``"a"`` an array, ``"n"`` None, ``"i"`` an int, ``"f"`` a float
    kinds: str
    #: records per range
    counts: np.ndarray
    #: (records, array fields): each record's array lengths
    lengths: np.ndarray
    #: (records, int and float fields), as float64 (the ints are offsets and shard numbers, exact below 2**53)
    scalars: np.ndarray
    #: per array field, every record's array concatenated
    arrays: tuple[np.ndarray, ...]


def _kind(x: object) -> str:
    if x is None:
        return "n"
    if isinstance(x, np.ndarray):
        return "a"
    return "i" if isinstance(x, (int, np.integer)) else "f"


def pack_ranges(per_range: Sequence[Sequence[tuple]]) -> PackedRanges:
    """Pack ``per_range[r][k]``, records of one layout (the same fields are arrays, None or numbers in each), for one message."""
    records = [r for rng in per_range for r in rng]
    counts = np.array([len(rng) for rng in per_range], dtype=np.int64)
    if not records:
        return PackedRanges(tuple, "", counts, np.zeros((0, 0), np.int64), np.zeros((0, 0)), ())
    kinds = "".join(_kind(x) for x in records[0])
    if any("".join(_kind(x) for x in r) != kinds for r in records):
        raise ValueError(f"pack_ranges: records of different layouts ({kinds!r} and others)")
    arrays_at = [i for i, k in enumerate(kinds) if k == "a"]
    scalars_at = [i for i, k in enumerate(kinds) if k in "if"]
    lengths = np.array([[r[i].size for i in arrays_at] for r in records], dtype=np.int64).reshape(len(records), len(arrays_at))
    scalars = np.array([[r[i] for i in scalars_at] for r in records], dtype=np.float64).reshape(len(records), len(scalars_at))
    arrays = tuple(np.concatenate([r[i] for r in records]) for i in arrays_at)
    return PackedRanges(type(records[0]), kinds, counts, lengths, scalars, arrays)


def unpack_ranges(packed: PackedRanges) -> list[list[tuple]]:
    """The records :func:`pack_ranges` packed, per range (their arrays views of the packed ones)."""
    offsets = [np.concatenate([[0], np.cumsum(packed.lengths[:, j])]) for j in range(packed.lengths.shape[1])]
    out: list[list[tuple]] = []
    k = 0
    for count in packed.counts:
        rng = []
        for _ in range(int(count)):
            fields: list[object] = []
            a = s = 0
            for kind in packed.kinds:
                if kind == "a":
                    fields.append(packed.arrays[a][offsets[a][k]: offsets[a][k + 1]])
                    a += 1
                elif kind == "n":
                    fields.append(None)
                else:
                    value = packed.scalars[k, s]
                    fields.append(int(value) if kind == "i" else float(value))
                    s += 1
            rng.append(tuple(fields) if packed.record is tuple else packed.record(*fields))
            k += 1
        out.append(rng)
    return out
