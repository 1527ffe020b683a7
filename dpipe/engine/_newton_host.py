"""The worker side of Newton-CG on the range route: a shard host's Hessian-vector products at one Newton iterate.

The driver's side is :class:`._range_newton.RangeNewton`. At an iterate ``w`` (fixed while CG
runs) a host has scored and sorted its shards (``range_scores``) and evaluated its block of
score ranges (:meth:`NewtonHost.newton_evaluate`: the range kernels of :mod:`._range_host`,
plus each range's :class:`~dpipe.objectives._range_curvature.RangeCurvature`, kept with the
range's assembly: how its merged rows come from its pieces). Then:

* :meth:`NewtonHost.newton_gradient` — ``X^T g`` per shard (and ``(X * X)^T c``, the Jacobi
  preconditioner's diagonal, from the curvature's diagonal), the rows' weights fetched from the
  range hosts, as ``range_gradient``;

and per CG step, three calls:

1. :meth:`NewtonHost.newton_direction` — ``u = X d`` of every own shard in its kept sorted order,
   with prefix sums of ``v u`` per class (:func:`~dpipe.reduce._ranges.shard_direction`);
2. :meth:`NewtonHost.newton_apply` — every range host fetches its ranges' ``u`` pieces from
   every host (:func:`~dpipe.reduce._ranges.cut_direction`: the rows and halos of the range's
   pieces, cut where the scores were, so no sort; and the sums of ``v u`` beyond them),
   merges them with the kept assembly and computes ``M u`` on its own rows
   (:meth:`RangeCurvature.apply`), split back per shard;
3. :meth:`NewtonHost.newton_product` — every shard host fetches its rows' ``M u`` from the range
   hosts and returns ``X^T (M u)`` per shard.

The driver receives one d-vector per shard and a few floats per host; between the workers
travel ``u`` of the rows whose range is on another host (8 bytes a row, halos included) and
``M u`` back (8 bytes a row). Each range merges its pieces in shard order and sums their
totals in shard order, so the products, like the evaluations, do not depend on the hosts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from ..reduce import weighted_row_sum
from ..reduce._ranges import (
    Assembly,
    DirectionPiece,
    PackedRanges,
    PieceShape,
    ShardDirection,
    cut_direction,
    pack_ranges,
    shard_direction,
    shard_weights,
    split_back,
)
from ..reduce._sorted import weighted_row_sums_and_squares
from ._range_host import RangeHost, StaleScores, unpacked_ranges

if TYPE_CHECKING:
    from ..objectives._range_curvature import RangeCurvature
    from ._protocols import CurvedRangeRisk

__all__ = ["NewtonHost"]


class _KeptRange(NamedTuple):
    """One of this host's ranges at the iterate: its pieces' shapes (shard order), how its rows merge, its curvature."""

    shapes: list[PieceShape]
    how: Assembly
    curvature: RangeCurvature


class _Curved(NamedTuple):
    """A host's ranges at one iterate (the scores of pass ``key``)."""

    key: str
    #: this host's ranges' bounds
    bounds: np.ndarray
    halo: float
    ranges: list[_KeptRange]
    #: per shard: the curvature's diagonal on its own rows of this host's ranges, in range order
    diag: dict[int, tuple[np.ndarray, np.ndarray]]


class _Step(NamedTuple):
    """One CG step's direction on this host's shards, or its ranges' products."""

    key: str
    step: int
    values: Any


def _concat(parts: dict[int, list[tuple[np.ndarray, np.ndarray]]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {shard: (np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps])) for shard, ps in parts.items()}


class NewtonHost(RangeHost):
    """The Newton-CG calls of a shard host (module docstring); :class:`._hosts.ShardHost` is one."""

    _curved: _Curved | None = None
    _direction: _Step | None = None
    _products: _Step | None = None

    def _drop_newton(self) -> None:
        self._curved = self._direction = self._products = None

    def range_scores(self, w: np.ndarray, key: str, sketch_size: int) -> tuple[list[tuple[int, tuple, tuple[float, float]]], float]:
        """:meth:`RangeHost.range_scores`; the previous iterate's curvature and products are dropped."""
        self._drop_newton()
        return super().range_scores(w, key, sketch_size)

    def range_forget(self) -> bool:
        """:meth:`RangeHost.range_forget`, the Newton state too."""
        self._drop_newton()
        return super().range_forget()

    def _at(self, key: str) -> _Curved:
        self._sorted(key)
        if self._curved is None or self._curved.key != key:
            raise StaleScores(f"shard host: no curvature of pass {key!r} here")
        return self._curved

    def newton_evaluate(self, key: str, bounds: np.ndarray, first: int, stop: int, risk: CurvedRangeRisk) -> dict[str, Any]:
        """:meth:`RangeHost.range_evaluate` on ranges ``first .. stop - 1`` that also keeps each range's curvature and assembly
        for the Hessian-vector products at this iterate (no rows of the other shards are kept: their shapes only)."""
        reply = self.range_evaluate(key, bounds, first, stop, risk, keep=True)
        t0 = time.perf_counter()
        assert self._kept is not None and self._kept[0] == key  # set by range_evaluate with keep
        _, mine, assembled = self._kept
        self._kept = None
        ranges: list[_KeptRange] = []
        diag: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for r, how, shapes in assembled:
            rc = risk.range_curvature(r)
            ranges.append(_KeptRange(shapes, how, rc))
            for p, c in zip(shapes, split_back(how, shapes, rc.diag_pos, rc.diag_neg)):
                diag.setdefault(p.shard, []).append(c)
        self._curved = _Curved(key, mine, float(risk.halo), ranges, _concat(diag))
        reply["seconds_curvature"] = time.perf_counter() - t0
        return reply

    def _results_of(self, key: str, shards: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        curved = self._at(key)
        empty = (np.zeros(0), np.zeros(0))
        return [(*self._results.get(i, empty), *curved.diag.get(i, empty)) for i in shards]

    async def newton_results(self, key: str, shards: Sequence[int]) -> list:
        """This host's ranges' gradient weights and curvature diagonal for the own rows of ``shards``, in range order."""
        return self._results_of(key, shards)

    def newton_gradient(self, key: str, squares: bool) -> tuple[list[tuple[int, np.ndarray]], float]:
        """``(index, X^T g)`` per own shard, or ``(index, [X^T g, (X * X)^T c])`` with ``squares`` (``c`` the curvature's
        diagonal, for the Jacobi preconditioner); the rows' values fetched from every range host. Not added here."""
        sorted_shards = self._sorted(key)
        mine = [ss.index for ss in sorted_shards]
        per_range = self._from_peers("newton_results", self._results_of, key, mine)
        t0 = time.perf_counter()
        out = []
        for j, (shard, ss) in enumerate(zip(self.shards, sorted_shards)):
            gp, gn = shard_weights(ss, [res[j][:2] for res in per_range])
            if squares:
                cp, cn = shard_weights(ss, [res[j][2:] for res in per_range])
                out.append((ss.index, weighted_row_sums_and_squares(shard, ss.pos_rows, ss.neg_rows, gp, gn, cp, cn)))
            else:
                out.append((ss.index, weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, gp, gn)))
        return out, time.perf_counter() - t0

    def newton_direction(self, key: str, step: int, d: np.ndarray) -> float:
        """CG step ``step``: ``u = X d`` of every own shard in its kept sorted order (kept for the range hosts' fetches); the seconds."""
        t0 = time.perf_counter()
        sorted_shards = self._sorted(key)
        self._products = None
        d = np.asarray(d, dtype=np.float64)
        directions = []
        for shard, ss in zip(self.shards, sorted_shards):
            u = shard.block.matvec(d) if shard.n_rows else np.zeros(0)
            directions.append(shard_direction(ss, u[ss.pos_rows], u[ss.neg_rows]))
        self._direction = _Step(key, int(step), directions)
        return time.perf_counter() - t0

    def _direction_pieces(self, key: str, step: int, bounds: np.ndarray, t: float) -> list[list[DirectionPiece]]:
        sorted_shards = self._sorted(key)
        if self._direction is None or (self._direction.key, self._direction.step) != (key, step):
            raise StaleScores(f"shard host: no direction of step {step} of pass {key!r} here")
        directions = cast(list[ShardDirection], self._direction.values)
        return [[cut_direction(ss, u, lo, hi, t) for ss, u in zip(sorted_shards, directions)] for lo, hi in zip(bounds[:-1], bounds[1:])]

    async def newton_pieces(self, key: str, step: int, bounds: np.ndarray, t: float) -> PackedRanges:
        """This host's direction pieces of each range ``[bounds[i], bounds[i + 1])`` (for their host): per range, per shard, packed."""
        return pack_ranges(self._direction_pieces(key, step, bounds, t))

    def newton_apply(self, key: str, step: int) -> dict[str, float]:
        """``M u`` on the own rows of this host's ranges, their ``u`` fetched from every host; kept per shard for :meth:`newton_product`."""
        t0 = time.perf_counter()
        curved = self._at(key)
        by_host = cast(list[list[list[DirectionPiece]]],  # newton_pieces packs DirectionPiece records
                       [unpacked_ranges(x) for x in self._from_peers("newton_pieces", self._direction_pieces, key, step, curved.bounds, curved.halo)])
        t1 = time.perf_counter()
        own = {ss.index for ss in self._sorted(key)}
        parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        moved = 0.0
        for sub, kept in enumerate(curved.ranges):
            pieces = sorted((p for host in by_host for p in host[sub]), key=lambda p: p.shard)  # shard order, as the scores merged
            if [(p.shard, p.up.size, p.un.size) for p in pieces] != [(s.shard, s.pos_size, s.neg_size) for s in kept.shapes]:
                raise RuntimeError(f"shard host: the direction pieces of range {sub} do not match its scores' pieces")
            u_pos = np.concatenate([p.up for p in pieces])[kept.how.pos[0]] if pieces else np.zeros(0)
            u_neg = np.concatenate([p.un for p in pieces])[kept.how.neg[0]] if pieces else np.zeros(0)
            below = float(sum(p.below_pos for p in pieces))  # shard order: the same sum on any placement
            above = float(sum(p.above_neg for p in pieces))
            m_pos, m_neg = kept.curvature.apply(u_pos, u_neg, below, above)
            for shape, m in zip(kept.shapes, split_back(kept.how, kept.shapes, m_pos, m_neg)):
                parts.setdefault(shape.shard, []).append(m)
            moved += float(sum(p.up.nbytes + p.un.nbytes for p in pieces if p.shard not in own))
        self._products = _Step(key, int(step), _concat(parts))
        return {"seconds_fetch": t1 - t0, "seconds_host": time.perf_counter() - t0, "bytes": moved}

    def _products_of(self, key: str, step: int, shards: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        self._sorted(key)
        if self._products is None or (self._products.key, self._products.step) != (key, step):
            raise StaleScores(f"shard host: no products of step {step} of pass {key!r} here")
        empty = (np.zeros(0), np.zeros(0))
        products = cast(dict[int, tuple[np.ndarray, np.ndarray]], self._products.values)
        return [products.get(i, empty) for i in shards]

    async def newton_products(self, key: str, step: int, shards: Sequence[int]) -> list:
        """This host's ranges' ``M u`` for the own rows of ``shards`` (for their host), in range order."""
        return self._products_of(key, step, shards)

    def newton_product(self, key: str, step: int) -> tuple[list[tuple[int, np.ndarray]], float]:
        """``(index, X^T (M u))`` of each own shard, its rows' ``M u`` fetched from every range host; and the seconds after the fetch.
        Not added here: the driver adds the shards' d-vectors in one pairwise tree over the shard indices."""
        sorted_shards = self._sorted(key)
        mine = [ss.index for ss in sorted_shards]
        per_range = self._from_peers("newton_products", self._products_of, key, step, mine)
        t0 = time.perf_counter()
        out = []
        for j, (shard, ss) in enumerate(zip(self.shards, sorted_shards)):
            mp, mn = shard_weights(ss, [products[j] for products in per_range])
            out.append((ss.index, weighted_row_sum(shard, ss.pos_rows, ss.neg_rows, mp, mn)))
        return out, time.perf_counter() - t0
