"""Newton-CG on the workers' range route: the driver's side (the hosts' is :mod:`._newton_host`).

The driver-merged route (:class:`._passes.RankPasses`) brings every score to the driver for an
evaluation and, per CG step, every row's ``X d`` (8 bytes a row) and sends every row's ``M X d``
back (8 bytes a row), with O(n) prefix sums on the driver in between. Here, as for the
first-order objectives (:mod:`._ranges`), the hosts do it among themselves:

* an evaluation at a trial point ``w`` (:meth:`RangeNewton.value`) is ``range_scores`` and
  ``newton_evaluate`` (the range kernels, and each range's curvature kept by its host): the
  value without the gradient, which TRON needs only where it accepts the step;
* the gradient there (:meth:`RangeNewton.gradient`): ``newton_gradient``, one d-vector per shard
  (two with the Jacobi preconditioner's diagonal);
* a Hessian-vector product (:meth:`RangeNewton.hess_product`), per CG step:
  ``newton_direction`` (``d`` to every host), ``newton_apply`` (the range hosts fetch their
  ranges' ``u = X d`` from the hosts and apply the curvature), ``newton_product`` (the shard hosts
  fetch their rows' ``M u`` and return ``X^T M u`` per shard).

Bytes through the driver per CG step: ``d`` to every host (8 d each), one d-vector per shard
back (8 d each), and a few numbers per host and call (:data:`CALL_BYTES`): nothing that grows
with the rows (``last_cg["bytes_moved"]``). The driver adds the shards' d-vectors in one
pairwise tree over the shard indices, so, as every result of the range route, the products do
not depend on the number of hosts or on where the shards are.

A host holds one iterate's scores at a time: after a trial point was scored, the next CG step at
the expansion point scores it again (as the driver's route does), and a stale host
(:class:`._range_host.StaleScores`) is answered the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from ._range_host import StaleScores
from ._ranges import RangeExchange, Scored, host_blocks, in_shard_order

if TYPE_CHECKING:
    from ._protocols import CurvedRangeRisk

__all__ = ["RangeNewton", "RangeValue", "CALL_BYTES"]

#: bytes through the driver per host and call besides the d-vectors: the pass key, the step number, a few floats back
CALL_BYTES = 128

_T = TypeVar("_T")


class RangeValue(NamedTuple):
    """A curved risk evaluated range by range (its gradient comes apart: :meth:`RangeNewton.gradient`)."""

    value: float
    exact: float
    class_weights: tuple[float, float]


class RangeNewton(RangeExchange):
    """The driver's side of Newton-CG's evaluations and Hessian-vector products on the workers (module docstring).

    Parameters
    ----------
    dataset : HostedDataset
        With shard hosts.
    risk : CurvedRangeRisk
        A risk with a range kernel and a range curvature (auc's surrogates).

    Attributes
    ----------
    last : dict
        The last evaluation's timings and bytes (``bytes_moved``: through the driver).
    last_cg : dict
        The last Hessian-vector product's timings and bytes (``bytes_moved``: through the driver; ``bytes_exchanged``:
        between the workers).
    """

    def __init__(self, dataset: Any, risk: CurvedRangeRisk) -> None:
        super().__init__(dataset)
        self.risk = risk
        self._curved: str | None = None  # the pass whose curvature the hosts keep
        self._risk_scale = 0.0
        self._steps = 0
        self.last_cg: dict[str, float] = {}

    def _sketch_bytes(self, scored: Scored) -> float:
        return float(sum(sum(a.nbytes for a in sk) + 16 for sk in scored.sketches))

    def value(self, w: np.ndarray) -> RangeValue:
        """The risk's value and exact value at ``w``: two host calls; the hosts keep the scores and each range's curvature."""
        t0 = time.perf_counter()
        w = np.array(w, dtype=np.float64)
        hosts = self.ds.host_count()
        scored = self._score(w)
        key, bounds, class_weights = scored.key, scored.bounds, scored.class_weights
        t1 = time.perf_counter()
        replies = self.ds.host_calls("newton_evaluate", [(key, bounds, first, stop, self.risk) for first, stop in host_blocks(bounds.size - 1, hosts)])
        t2 = time.perf_counter()
        per_range = [r for reply in replies for r in reply["ranges"]]  # the hosts' blocks in host order: range order
        scale = self.risk.range_scale(class_weights)
        self._finish(key, w, bounds, class_weights)
        self._curved, self._risk_scale = key, scale
        self.last = {
            "seconds_score": t1 - t0, "seconds_exchange": t2 - t1,
            "seconds_kernel": max(r["seconds_kernel"] for r in replies), "seconds_curvature": max(r["seconds_curvature"] for r in replies),
            "seconds_host_score": max(scored.host_seconds),
            "bytes_moved": 8.0 * w.size * hosts + self._sketch_bytes(scored) + 8 * bounds.size * hosts + 24 * len(per_range),
            "bytes_exchanged": float(sum(r["bytes"] for r in replies)), "ranges": float(bounds.size - 1),
        }
        return RangeValue(scale * math.fsum(v for v, _, _ in per_range), scale * math.fsum(e for _, e, _ in per_range), class_weights)

    def _at(self, w: np.ndarray, call: Callable[[str], _T]) -> _T:
        """``call(key)`` with the hosts holding ``w``'s scores and curvature: scored again first if they do not (or turn out stale)."""
        for attempt in range(2):
            if self._curved is None or self._key != self._curved or self._w is None or not np.array_equal(self._w, w):
                self.value(w)
            assert self._curved is not None  # set by value()
            try:
                return call(self._curved)
            except StaleScores:
                self._curved = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def gradient(self, w: np.ndarray, squares: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """``X^T dR/ds`` at ``w`` (the last :meth:`value` point, scored again if the hosts moved on), and with ``squares`` the
        Jacobi diagonal ``(X * X)^T c`` of the curvature ``c``: one host call, one or two d-vectors per shard."""
        w = np.asarray(w, dtype=np.float64)

        def run(key: str) -> tuple[np.ndarray, np.ndarray | None]:
            t0 = time.perf_counter()
            parts = self.ds.host_calls("newton_gradient", [(key, bool(squares))] * self.ds.host_count())
            both = self._risk_scale * in_shard_order([entry for per_host, _ in parts for entry in per_host])
            self.last["seconds_gradient"] = time.perf_counter() - t0
            self.last["seconds_host_gradient"] = max(sec for _, sec in parts)
            shards = sum(len(per_host) for per_host, _ in parts)
            self.last["bytes_moved"] = self.last.get("bytes_moved", 0.0) + 8.0 * w.size * shards * (2 if squares else 1) + CALL_BYTES * len(parts)
            return (both[0], both[1]) if squares else (both, None)

        return self._at(w, run)

    def hess_product(self, w: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``X^T M X d`` at ``w`` (the Hessian of the risk in ``w``; no ridge): three host calls (module docstring)."""
        w, d = np.asarray(w, dtype=np.float64), np.asarray(d, dtype=np.float64)

        def run(key: str) -> np.ndarray:
            t0 = time.perf_counter()
            self._steps += 1
            step, hosts = self._steps, self.ds.host_count()
            direction = self.ds.host_calls("newton_direction", [(key, step, d)] * hosts)
            t1 = time.perf_counter()
            applied = self.ds.host_calls("newton_apply", [(key, step)] * hosts)
            t2 = time.perf_counter()
            parts = self.ds.host_calls("newton_product", [(key, step)] * hosts)
            entries = [entry for per_host, _ in parts for entry in per_host]
            product = self._risk_scale * in_shard_order(entries)
            t3 = time.perf_counter()
            self.last_cg = {
                "seconds_direction": t1 - t0, "seconds_apply": t2 - t1, "seconds_product": t3 - t2,
                "seconds_host_direction": max(direction), "seconds_host_apply": max(r["seconds_host"] for r in applied),
                "seconds_host_product": max(sec for _, sec in parts),
                "bytes_moved": 8.0 * d.size * (hosts + len(entries)) + 3 * CALL_BYTES * hosts,
                "bytes_exchanged": 2.0 * sum(r["bytes"] for r in applied),  # u to the range hosts, M u back
            }
            return product

        return self._at(w, run)
