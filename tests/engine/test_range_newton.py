"""Newton-CG on the workers' range route: the ranges' Hessian-vector products are the driver's.

Checked in this process (the pieces of every range against :meth:`Curvature.apply` on the merged
scores, and the squared hinge's range kernel against :meth:`SquaredPairwiseHinge.at`), then on a
real 2-worker LocalCluster: :class:`~dpipe.fit._newton.PairwiseNewtonObjective` on both routes at
the same points, with many forced ranges whose windows cross their bounds.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest

from dpipe._runs import merge_class_runs, scatter_runs
from dpipe.engine import RankPasses, ShardedDataset
from dpipe.engine._ranges import choose_splitters, range_count
from dpipe.fit._newton import PairwiseNewtonObjective
from dpipe.fit._smooth import SmoothedObjective
from dpipe.io import Shard
from dpipe.objectives import SmoothedAUCRisk, SquaredPairwiseHinge
from dpipe.reduce._ranges import PieceShape, assemble, cut, cut_direction, shard_direction, shard_weights, sketch, sort_shard, split_back
from dpipe.testing import classification_data, write_store

RISKS = {"huber": lambda: SmoothedAUCRisk(0.25), "squared": SquaredPairwiseHinge}
#: dyadic weights: with features in halves every score and margin is exact, so ties and margins of exactly 0 or t occur
W_TIED = np.array([0.5, -0.25, 1.0, 0.25, 0.5])


def _data(n: int = 3000, weighted: bool = False, seed: int = 4):
    """Unit-scale features rounded to halves (tied scores), integer weights in {0..3} (zeros included)."""
    X, y = classification_data(n, 5, seed=seed, scales=False)
    X = np.round(X * 2) / 2
    v = np.random.default_rng(seed).integers(0, 4, n).astype(np.float32) if weighted else None
    return X, y, v


def _shards(X, y, v, sizes=(800, 0, 1200, 1000)):
    out, start = [], 0
    for i, size in enumerate(sizes):
        sl = slice(start, start + size)
        out.append(Shard(X[sl], y[sl], None, None if v is None else v[sl], index=i))
        start += size
    return out


def _row_sums(shards, sorted_shards, per_shard):
    return sum(s.X.astype(np.float64)[ss.pos_rows].T @ mp + s.X.astype(np.float64)[ss.neg_rows].T @ mn
               for s, ss, (mp, mn) in zip(shards, sorted_shards, per_shard))


@pytest.mark.parametrize("name", list(RISKS))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ranges", [1, 7])
@pytest.mark.parametrize("tied", [False, True])
def test_the_ranges_apply_the_merged_curvature(name, weighted, ranges, tied):
    """Each range's RangeCurvature on its pieces' u (cut where the scores were cut), split back per shard, gives
    X^T M X d of Curvature.apply on every merged score; the squared hinge's range kernel gives at()'s value and gradient."""
    risk = RISKS[name]()
    X, y, v = _data(weighted=weighted)
    shards = _shards(X, y, v)
    rng = np.random.default_rng(ranges)
    w = W_TIED if tied else rng.standard_normal(5)
    d = rng.standard_normal(5)
    sss = [sort_shard(s, w) for s in shards]
    merged, pos, neg = merge_class_runs([s.pos for s in sss], [s.neg for s in sss], [s.pos_weight for s in sss] if weighted else None,
                                        [s.neg_weight for s in sss] if weighted else None)
    us = [s.X.astype(np.float64) @ d for s in shards]
    u_pos = np.concatenate([u[ss.pos_rows] for u, ss in zip(us, sss)])[pos[0]]
    u_neg = np.concatenate([u[ss.neg_rows] for u, ss in zip(us, sss)])[neg[0]]
    m_pos, m_neg = risk.curvature(merged).apply(u_pos, u_neg)
    want = _row_sums(shards, sss, zip(scatter_runs(m_pos, *pos), scatter_runs(m_neg, *neg)))
    at = risk.at(merged)
    want_grad = _row_sums(shards, sss, zip(scatter_runs(at.g_pos, *pos), scatter_runs(at.g_neg, *neg)))

    bounds = choose_splitters([sketch(ss, 16) for ss in sss], ranges)
    directions = [shard_direction(ss, u[ss.pos_rows], u[ss.neg_rows]) for u, ss in zip(us, sss)]
    products: dict[int, list] = {ss.index: [] for ss in sss}
    grads: dict[int, list] = {ss.index: [] for ss in sss}
    value = exact = 0.0
    crossing = 0
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        pieces = [cut(ss, lo, hi, risk.halo) for ss in sss]
        r, how = assemble(pieces)
        shapes = [PieceShape.of(p) for p in pieces]
        rc = risk.range_curvature(r)
        parts = [cut_direction(ss, u, lo, hi, risk.halo) for ss, u in zip(sss, directions)]
        assert [(p.up.size, p.un.size) for p in parts] == [(s.pos_size, s.neg_size) for s in shapes]
        mp, mn = rc.apply(np.concatenate([p.up for p in parts])[how.pos[0]], np.concatenate([p.un for p in parts])[how.neg[0]],
                          sum(p.below_pos for p in parts), sum(p.above_neg for p in parts))
        for shape, m in zip(shapes, split_back(how, shapes, mp, mn)):
            products[shape.shard].append(m)
        own = rc.pos_hi > r.own_neg_stop + 1  # an own positive's window reaching past the range's own negatives
        crossing += int(own.sum()) + int((rc.neg_lo < r.own_pos_start + 1).sum())
        ra = risk.at_range(r)
        value, exact = value + ra.value, exact + ra.exact
        for p, g in zip(pieces, split_back(how, pieces, ra.g_pos, ra.g_neg)):
            grads[p.shard].append(g)
    scale = risk.range_scale(merged.class_weights)
    got = scale * _row_sums(shards, sss, [shard_weights(ss, products[ss.index]) for ss in sss])
    assert np.linalg.norm(got - want) <= 1e-12 * np.linalg.norm(want)
    assert scale * value == pytest.approx(at.value, rel=1e-12) and scale * exact == pytest.approx(at.exact, rel=1e-12)
    got_grad = scale * _row_sums(shards, sss, [shard_weights(ss, grads[ss.index]) for ss in sss])
    assert np.linalg.norm(got_grad - want_grad) <= 1e-12 * np.linalg.norm(want_grad)
    if ranges > 1:
        assert crossing > 0  # some rows' windows of pairs reach into a neighbouring range (halos or totals)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("range-newton")
    out = {}
    for weighted in (False, True):
        X, y, v = _data(weighted=weighted)
        out[weighted] = write_store(root / f"w{int(weighted)}.zarr", X, y, [800, 0, 1200, 1000], weight=v)
    return out


def _objectives(ds, risk, jacobi=True):
    out = []
    for mode in ("driver", "workers"):
        with dask.config.set({"dpipe.rank-exchange": mode}):
            out.append(PairwiseNewtonObjective(RankPasses(ds), risk, 1e-3, jacobi=jacobi))
    return out


@pytest.mark.parametrize("name", list(RISKS))
@pytest.mark.parametrize("weighted", [False, True])
def test_workers_route_hessian_vector_products_match_the_driver_route(stores, client, monkeypatch, name, weighted):
    monkeypatch.setattr("dpipe.engine._ranges.RANGE_ROWS", 100)  # 36 ranges of about 80 rows: windows cross their bounds
    risk = RISKS[name]()
    with ShardedDataset(stores[weighted], client, cache="memory") as ds:
        driver, ranged = _objectives(ds, risk)
        assert (driver.exchange, ranged.exchange) == ("driver", "workers")
        for w in (W_TIED, np.random.default_rng(2).standard_normal(5)):  # tied scores, exact margins; then generic ones
            f0, g0 = driver.value_and_grad(w)
            f1, g1 = ranged.value_and_grad(w)
            assert f1 == pytest.approx(f0, rel=1e-12)
            assert ranged.last["J"] == pytest.approx(driver.last["J"], rel=1e-12)
            assert ranged.last["ranges"] == range_count(3000) == 36
            assert np.linalg.norm(g1 - g0) <= 1e-12 * np.linalg.norm(g0)
            np.testing.assert_allclose(ranged.preconditioner(), driver.preconditioner(), rtol=1e-12)
            for d in np.random.default_rng(3).standard_normal((3, 5)):
                h0, h1 = driver.hess_vec(d), ranged.hess_vec(d)
                assert np.linalg.norm(h1 - h0) <= 1e-12 * np.linalg.norm(h0)
                # through the driver: d to 2 hosts and a d-vector back per shard (4 shards), a few numbers per call
                assert 8 * 5 * (2 + 4) < ranged.cg_last["bytes_moved_cg"] <= 8 * 5 * (2 + 4) + 3 * 2 * 128
                assert ranged.cg_last["bytes_exchanged_cg"] > 0  # the rows of the other host's shards travelled between the workers
            assert ranged.train_auc() == pytest.approx(driver.train_auc(), rel=1e-12)
        # L-BFGS (auc with solver='lbfgs') takes the same range kernels through the first-order route
        first_order = []
        for mode in ("driver", "workers"):
            with dask.config.set({"dpipe.rank-exchange": mode}):
                first_order.append(SmoothedObjective(RankPasses(ds), risk))
        assert first_order[1].exchange == "workers"
        (f0, g0), (f1, g1) = (o.value_and_grad(W_TIED) for o in first_order)
        assert f1 == pytest.approx(f0, rel=1e-12) and np.linalg.norm(g1 - g0) <= 1e-12 * np.linalg.norm(g0)
        # a trial point scored in between (TRON's rejected step): the hosts score the expansion point again
        ranged.value(np.ones(5))
        driver.value(np.ones(5))
        d = np.arange(5.0)
        assert np.linalg.norm(ranged.hess_vec(d) - driver.hess_vec(d)) <= 1e-12 * np.linalg.norm(driver.hess_vec(d))
