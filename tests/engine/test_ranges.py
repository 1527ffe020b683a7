"""Range-partitioned evaluations: the workers' route gives the driver-merged route's risk, gradient and AUC.

Checked three ways: the worker-side pieces (sort, cut, assemble, split back) in this
process against the merged kernel; the whole route on real 1- and 2-worker
LocalClusters against the driver-merged route (weighted, tied, empty shards, all
scores equal); and whole fits. Plus the fast stable sort both routes use.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest

from dpipe._runs import stable_argsort
from dpipe.engine import LocalDataset, RankPasses, ShardedDataset
from dpipe.engine._range_host import pairs_below
from dpipe.engine._ranges import EXCHANGE_AUTO_ROWS, RANGE_MULTIPLE, SKETCH_SIZE, choose_splitters, host_blocks, range_count, resolve_exchange
from dpipe.exceptions import ParameterError
from dpipe.fit._smooth import SmoothedObjective
from dpipe.io import Shard
from dpipe.objectives import SmoothedAUCRisk, SmoothedPRBEPRisk
from dpipe.objectives._auc_ranges import auc_gamma_range
from dpipe.objectives._rank_kernels import auc_gamma
from dpipe.reduce._ranges import Piece, assemble, class_slices, cut, pack_ranges, shard_weights, sketch, sort_shard, split_back, unpack_ranges
from dpipe.testing import classification_data, write_store
from dpipe.testing._references import merge_sketches, sorted_auc_reference


@pytest.mark.parametrize("x", [
    np.random.default_rng(0).standard_normal(100_000),
    np.round(np.random.default_rng(1).standard_normal(50_000), 2),  # many ties
    np.concatenate([np.sort(c) for c in np.array_split(np.random.default_rng(2).standard_normal(60_000), 13)]),  # sorted runs
    np.array([0.0, -0.0, 1.0, -0.0, np.inf, -np.inf, 0.0, -1e-300, 1e-300, 5e-324, -5e-324]),
    1.0 + 1e-13 * np.random.default_rng(3).standard_normal(20_000),  # equal in the key's kept bits: the value order decides
    np.repeat(np.random.default_rng(4).standard_normal(300), 200),
    np.repeat(np.random.default_rng(5).standard_normal(5000), 3) * (1 + 1e-14 * np.random.default_rng(6).standard_normal(15_000)),  # many near-tie runs
    np.zeros(0), np.ones(1),
])
def test_stable_argsort_is_numpys_stable_argsort(x):
    np.testing.assert_array_equal(stable_argsort(x), np.argsort(x, kind="stable"))


def _shards(n=4000, d=5, seed=0, weighted=False, sizes=(1000, 0, 1700, 1300)):
    X, y = classification_data(n, d, seed=seed)
    X[:300] = X[300:600]  # tied scores
    rng = np.random.default_rng(seed)
    weight = rng.integers(0, 4, n).astype(np.float32) if weighted else None
    out, start = [], 0
    for i, size in enumerate(sizes):
        sl = slice(start, start + size)
        out.append(Shard(X[sl], y[sl], None, None if weight is None else weight[sl], index=i))
        start += size
    return out, X, y, weight


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ranges", [1, 2, 5])
def test_the_pieces_of_every_range_give_the_merged_kernels_weights(weighted, ranges):
    shards, X, y, weight = _shards(weighted=weighted)
    w = np.random.default_rng(7).standard_normal(X.shape[1])
    t = 0.05
    sorted_shards = [sort_shard(s, w) for s in shards]
    bounds = choose_splitters([sketch(ss, 64) for ss in sorted_shards], ranges)
    results: dict[int, list] = {ss.index: [] for ss in sorted_shards}
    value = hinge = 0.0
    for r in range(ranges):
        pieces = [cut(ss, bounds[r], bounds[r + 1], t) for ss in sorted_shards]
        r_in, how = assemble(pieces)
        out = auc_gamma_range(r_in, t)
        value, hinge = value + out.value, hinge + out.hinge
        for p, g in zip(pieces, split_back(how, pieces, out.gamma_pos, out.gamma_neg)):
            results[p.shard].append(g)
    # the reference: every score merged, one kernel
    s = X.astype(np.float64) @ w
    sp_all, sn_all = s[y > 0], s[y < 0]
    vp_all = None if weight is None else weight[y > 0].astype(float)
    vn_all = None if weight is None else weight[y < 0].astype(float)
    op, on = np.argsort(sp_all, kind="stable"), np.argsort(sn_all, kind="stable")
    ref = auc_gamma(sp_all[op], sn_all[on], t, None if vp_all is None else vp_all[op], None if vn_all is None else vn_all[on])
    assert value == pytest.approx(ref[2], rel=1e-10)
    assert hinge == pytest.approx(ref[3], rel=1e-10)
    # each row's weight, mapped back through its shard's sorted order
    got_p, got_n = np.empty(y.size), np.empty(y.size)
    start = 0
    for sh, ss in zip(shards, sorted_shards):
        gp, gn = shard_weights(ss, results[ss.index])
        got_p[start + ss.pos_rows] = gp
        got_n[start + ss.neg_rows] = gn
        start += sh.n_rows
    want = np.empty(y.size)
    want[np.flatnonzero(y > 0)[op]] = ref[0]
    want[np.flatnonzero(y < 0)[on]] = ref[1]
    np.testing.assert_allclose(np.where(y > 0, got_p, got_n), want, rtol=1e-8, atol=1e-9)  # prefix sums over other subsets: float64 order


def test_splitters_balance_the_rows_of_the_ranges():
    shards, X, y, _ = _shards(n=40_000, sizes=(10_000, 15_000, 15_000))
    w = np.random.default_rng(3).standard_normal(X.shape[1])
    sorted_shards = [sort_shard(s, w) for s in shards]
    bounds = choose_splitters([merge_sketches([sketch(ss, 256) for ss in sorted_shards[:2]], 256), sketch(sorted_shards[2], 256)], 4)
    assert np.all(np.diff(bounds) >= 0) and bounds[0] == -np.inf and bounds[-1] == np.inf
    own = [sum(c.sp.size - c.own_pos_start + c.own_neg_stop for c in (cut(ss, bounds[r], bounds[r + 1], 0.0) for ss in sorted_shards)) for r in range(4)]
    assert sum(own) == y.size
    assert max(own) < 1.05 * y.size / 4  # within the sketches' resolution (256 keys per class, two shards' sketches merged into one)


def test_merged_sketches_keep_the_counts_and_the_extremes():
    shards, X, y, _ = _shards(n=30_000, sizes=(10_000, 12_000, 8_000))
    w = np.random.default_rng(5).standard_normal(X.shape[1])
    sorted_shards = [sort_shard(s, w) for s in shards]
    merged = merge_sketches([sketch(ss, 100) for ss in sorted_shards], 100)
    for keys, counts, cls, shift in ((merged[0], merged[1], "pos", 0.0), (merged[2], merged[3], "neg", 1.0)):
        every = np.concatenate([getattr(ss, cls) for ss in sorted_shards]) + shift
        assert keys.size <= 101 and np.all(np.diff(keys) >= 0)
        assert counts.sum() == every.size
        assert keys[0] == every.min() and keys[-1] == every.max()
        # each kept key stands for about as many rows as lie between it and the next one
        below = np.searchsorted(np.sort(every), keys, side="left")
        assert np.abs(np.cumsum(counts) - np.append(below[1:], every.size)).max() <= 3 * every.size / 100


@pytest.mark.parametrize("weighted", [False, True])
def test_packed_pieces_and_slices_come_back_exactly(weighted):
    """A peer's pieces (and AUC slices) travel packed in a few arrays: the same records, value for value, empty ones too."""
    shards, X, _, _ = _shards(weighted=weighted)
    sorted_shards = [sort_shard(s, np.random.default_rng(5).standard_normal(X.shape[1])) for s in shards]
    bounds = choose_splitters([sketch(ss, 64) for ss in sorted_shards], 4)
    pieces = [[cut(ss, lo, hi, 0.05) for ss in sorted_shards] for lo, hi in zip(bounds[:-1], bounds[1:])]
    slices = [[(ss.index, *class_slices(ss, lo, hi)) for ss in sorted_shards] for lo, hi in zip(bounds[:-1], bounds[1:])]
    for per_range in (pieces, slices, [[], []]):
        back = unpack_ranges(pack_ranges(per_range))
        assert len(back) == len(per_range)
        for got_range, want_range in zip(back, per_range):
            assert len(got_range) == len(want_range)
            for got, want in zip(got_range, want_range):
                assert type(got) is type(want) and len(got) == len(want)
                for a, b in zip(got, want):
                    if isinstance(b, np.ndarray):
                        assert a.dtype == b.dtype and np.array_equal(a, b)
                    else:
                        assert a == b and type(a) is type(b) or (a is None and b is None)
    assert isinstance(unpack_ranges(pack_ranges(pieces))[0][0], Piece)


def test_the_ranges_count_the_auc_pairs():
    shards, X, y, weight = _shards(weighted=True)
    w = np.random.default_rng(2).standard_normal(X.shape[1])
    sorted_shards = [sort_shard(s, w) for s in shards]
    bounds = choose_splitters([sketch(ss, 32) for ss in sorted_shards], 3)
    total = 0.0
    for r in range(3):
        total += pairs_below([class_slices(ss, bounds[r], bounds[r + 1]) for ss in sorted_shards])
    s = X.astype(np.float64) @ w
    wp, wn = weight[y > 0].astype(float), weight[y < 0].astype(float)
    assert total / (wp.sum() * wn.sum()) == pytest.approx(sorted_auc_reference(np.sort(s[y > 0]), np.sort(s[y < 0]),
                                                                            wp[np.argsort(s[y > 0], kind="stable")],
                                                                            wn[np.argsort(s[y < 0], kind="stable")]), rel=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("merged_positives", [False, True])
def test_a_ranges_pair_count_is_the_brute_force_count_with_ties(weighted, merged_positives):
    """pairs_below counts each shard's negatives against the range's positives without merging them: the O(n^2) count of
    the pairs ranked right (ties half), plus the positives' weight times the negatives' weight below the range."""
    rng = np.random.default_rng(7)
    runs = []
    for n in (0, 40, 3, 120):  # an empty shard, a short one
        sp, sn = np.sort(rng.integers(0, 12, n) / 4.0), np.sort(rng.integers(0, 12, 2 * n) / 4.0)  # many ties
        vp = rng.random(sp.size) + 0.1 if weighted else None
        vn = rng.random(sn.size) + 0.1 if weighted else None
        runs.append((sp, vp, sn, vn, float(rng.random() * 5)))
    all_p = np.concatenate([r[0] for r in runs])
    all_vp = np.concatenate([r[1] for r in runs]) if weighted else np.ones(all_p.size)
    all_n = np.concatenate([r[2] for r in runs])
    all_vn = np.concatenate([r[3] for r in runs]) if weighted else np.ones(all_n.size)
    right = (all_p[:, None] > all_n[None, :]) + 0.5 * (all_p[:, None] == all_n[None, :])
    want = float(all_vp @ right @ all_vn) + all_vp.sum() * sum(r[4] for r in runs)
    own = None
    if merged_positives:
        order = np.argsort(all_p, kind="stable")
        own = (all_p[order], all_vp[order] if weighted else None)
    got = pairs_below(runs, own=own)
    if weighted:
        assert got == pytest.approx(want, rel=1e-12)
    else:
        assert got == want  # whole and half pairs: exact


def _objectives(ds, t, mode_a="driver", mode_b="workers"):
    out = []
    for mode in (mode_a, mode_b):
        with dask.config.set({"dpipe.rank-exchange": mode}):
            out.append(SmoothedObjective(RankPasses(ds), SmoothedAUCRisk(t)))
    return out


@pytest.mark.parametrize("range_rows", [500_000, 200])  # RANGE_MULTIPLE ranges; three times as many (about 200 rows each)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_workers_route_matches_the_driver_route_on_a_cluster(tmp_path, client, one_worker_client, weighted, workers, range_rows, monkeypatch):
    monkeypatch.setattr("dpipe.engine._ranges.RANGE_ROWS", range_rows)
    X, y = classification_data(6000, 6, seed=4)
    X[:200] = X[200:400]
    weight = np.random.default_rng(1).integers(0, 4, y.size).astype(np.float32) if weighted else None
    path = write_store(tmp_path / "s.zarr", X, y, [1500, 0, 2500, 2000], weight=weight)
    c = client if workers == 2 else one_worker_client
    with ShardedDataset(path, c, cache="memory") as ds:
        driver, ranged = _objectives(ds, 0.05)
        assert (driver.exchange, ranged.exchange) == ("driver", "workers")
        for w in (np.random.default_rng(9).standard_normal(6), np.zeros(6), 1e-3 * np.ones(6)):  # zeros: every score equal
            f0, g0 = driver.value_and_grad(w)
            f1, g1 = ranged.value_and_grad(w)
            assert f1 == pytest.approx(f0, rel=1e-10)
            assert ranged.last["J"] == pytest.approx(driver.last["J"], rel=1e-10)
            np.testing.assert_allclose(g1, g0, rtol=1e-9, atol=1e-12 * np.abs(g0).max())
            assert ranged.train_auc() == pytest.approx(driver.train_auc(), rel=1e-12)
            assert ranged.last["ranges"] == range_count(6000) == RANGE_MULTIPLE * int(np.ceil(6000 / (RANGE_MULTIPLE * range_rows)))
        # through the driver: w out three times and the bounds of the ranges per host; per shard one sketch (at most
        # 2 x (SKETCH_SIZE + 1) keys and counts), its class weights and a d-vector back; 3 floats per range: nothing grows with the rows
        ranges = ranged.last["ranges"]
        bound = workers * (3 * 8 * 6 + 8 * (ranges + 1)) + 4 * (2 * (SKETCH_SIZE + 1) * 16 + 16 + 8 * 6) + 24 * ranges
        assert 0 < ranged.last["bytes_moved"] <= bound


def test_every_host_count_gets_balanced_blocks_of_the_same_ranges():
    assert range_count(1) == range_count(500_000 * RANGE_MULTIPLE) == RANGE_MULTIPLE
    assert range_count(500_000 * RANGE_MULTIPLE + 1) == 2 * RANGE_MULTIPLE
    for hosts in (1, 2, 3, 5, 12, 13):
        blocks = host_blocks(RANGE_MULTIPLE, hosts)
        assert blocks[0][0] == 0 and blocks[-1][1] == RANGE_MULTIPLE and all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        sizes = [stop - first for first, stop in blocks]
        assert max(sizes) - min(sizes) <= 1  # 13 hosts: one without a range


def test_fits_through_either_route_agree(tmp_path, client):
    import dpipe

    X, y = classification_data(8000, 6, seed=11)
    path = write_store(tmp_path / "s.zarr", X, y, [2000] * 4)
    fits = {}
    for mode in ("driver", "workers"):
        with dask.config.set({"dpipe.rank-exchange": mode}):
            fits[mode] = dpipe.train(path, objective="auc-smooth", engine="dask", client=client, cache="memory")
    a, b = fits["driver"], fits["workers"]
    # the same objective to rounding, so the same path until L-BFGS's stopping rule: the same minimum to its tolerance
    assert b.fit["fun"] == pytest.approx(a.fit["fun"], rel=1e-6)
    assert float(b.coef @ a.coef) / (np.linalg.norm(a.coef) * np.linalg.norm(b.coef)) > 1 - 1e-6
    assert b.metrics["train"]["roc_auc"] == pytest.approx(a.metrics["train"]["roc_auc"], abs=1e-4)


def test_the_exchange_setting_is_checked(tmp_path, client):
    X, y = classification_data(500, 4)
    path = write_store(tmp_path / "s.zarr", X, y, [250, 250])
    with LocalDataset(path) as local:
        assert resolve_exchange(local, SmoothedAUCRisk(0.1)) == "driver"  # auto: small data, the driver merges
        assert resolve_exchange(local, SmoothedAUCRisk(0.1), "workers") == "workers"  # the hosts in this process
    with LocalDataset(path, cache="stream") as local_streamed:
        with pytest.raises(ParameterError, match="rank-exchange='workers' needs the shards held in memory"):
            resolve_exchange(local_streamed, SmoothedAUCRisk(0.1), "workers")
    with ShardedDataset(path, client, cache="memory") as ds:
        assert ds.store.manifest.n_rows < EXCHANGE_AUTO_ROWS
        assert resolve_exchange(ds, SmoothedAUCRisk(0.1)) == "driver"  # auto: small data, the driver merges
        assert resolve_exchange(ds, SmoothedAUCRisk(0.1), "workers") == "workers"
        with pytest.raises(ParameterError, match="'rank-exchange' parameter|rank-exchange"):
            resolve_exchange(ds, SmoothedAUCRisk(0.1), "everywhere")
    with ShardedDataset(path, client, cache="stream") as streamed:
        with pytest.raises(ParameterError, match="held in memory"):
            resolve_exchange(streamed, SmoothedAUCRisk(0.1), "workers")


@pytest.mark.parametrize("weighted", [False, True])
def test_the_rocarea_oracle_range_by_range_is_the_merged_oracle(tmp_path, client, weighted):
    from dpipe.fit._structural import StructuralRisk
    from dpipe.objectives import StructuralLoss

    X, y = classification_data(5000, 5, seed=6)
    X[:100] = X[100:200]
    weight = np.random.default_rng(2).integers(0, 3, y.size).astype(np.float32) if weighted else None
    path = write_store(tmp_path / "s.zarr", X, y, [2000, 1000, 2000], weight=weight)
    with ShardedDataset(path, client, cache="memory") as ds:
        risks = {}
        for mode in ("driver", "workers"):
            with dask.config.set({"dpipe.rank-exchange": mode}):
                risks[mode] = StructuralRisk(RankPasses(ds), StructuralLoss("rocarea"), bias=1.0)
        assert risks["workers"]._ranges is not None and risks["driver"]._ranges is None
        for v in (np.r_[np.random.default_rng(4).standard_normal(5), 0.3], np.zeros(6)):
            r0, l0, a0 = risks["driver"].plane(v)
            r1, l1, a1 = risks["workers"].plane(v)
            assert r1 == pytest.approx(r0, rel=1e-10) and l1 == pytest.approx(l0, rel=1e-10)
            np.testing.assert_allclose(a1, a0, rtol=1e-9, atol=1e-12)
        with dask.config.set({"dpipe.rank-exchange": "workers"}), pytest.raises(ParameterError, match="no range kernel"):
            StructuralRisk(RankPasses(ds), StructuralLoss("f1"))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_prbep_smooth_through_its_scalars_matches_the_driver_route(tmp_path, client, one_worker_client, weighted, workers):
    X, y = classification_data(6000, 6, seed=8)
    X[:300] = X[300:600]
    weight = np.random.default_rng(3).integers(0, 4, y.size).astype(np.float32) if weighted else None
    path = write_store(tmp_path / "s.zarr", X, y, [1500, 0, 2500, 2000], weight=weight)
    c = client if workers == 2 else one_worker_client
    total = float(weight.sum()) if weighted else float(y.size)
    with ShardedDataset(path, c, cache="memory") as ds:
        for mu in (2e-3 / total, 0.5 / total, 5.0 / total):  # from the default (few rows in each ramp) to wide ramps
            objs = []
            for mode in ("driver", "workers"):
                with dask.config.set({"dpipe.rank-exchange": mode}):
                    objs.append(SmoothedObjective(RankPasses(ds), SmoothedPRBEPRisk(mu)))
            driver, ranged = objs
            assert ranged.exchange == "workers"
            for w in (np.random.default_rng(9).standard_normal(6), np.zeros(6), 0.1 * np.ones(6)):
                f0, g0 = driver.value_and_grad(w)
                f1, g1 = ranged.value_and_grad(w)
                assert f1 == pytest.approx(f0, rel=1e-9, abs=1e-12)
                assert ranged.last["J"] == pytest.approx(driver.last["J"], rel=1e-9, abs=1e-12)
                np.testing.assert_allclose(g1, g0, rtol=1e-7, atol=1e-9 * max(1.0, np.abs(g0).max()))
                assert ranged.train_auc() == pytest.approx(driver.train_auc(), rel=1e-12)
                assert ranged.last["search_rounds"] <= 8


def test_an_objective_whose_scores_were_replaced_scores_again_for_its_auc(tmp_path, client):
    """Two objectives on one store share its hosts, which keep one evaluation's scores: the first's AUC is still its own."""
    X, y = classification_data(4000, 5, seed=12)
    path = write_store(tmp_path / "s.zarr", X, y, [2000, 2000])
    w1, w2 = np.random.default_rng(1).standard_normal(5), np.random.default_rng(2).standard_normal(5)
    with ShardedDataset(path, client, cache="memory") as ds:
        with dask.config.set({"dpipe.rank-exchange": "workers"}):
            a, b = SmoothedObjective(RankPasses(ds), SmoothedAUCRisk(0.05)), SmoothedObjective(RankPasses(ds), SmoothedPRBEPRisk(1e-3))
        with dask.config.set({"dpipe.rank-exchange": "driver"}):
            ref = SmoothedObjective(RankPasses(ds), SmoothedAUCRisk(0.05))
        a.value_and_grad(w1)
        b.value_and_grad(w2)  # replaces the hosts' scores
        ref.value_and_grad(w1)
        assert a.train_auc() == pytest.approx(ref.train_auc(), rel=1e-12)


def test_prbep_smooth_with_thousands_of_tied_breakpoints(tmp_path, client):
    """5,000 negatives with all-zero features score 0 at every w: their breakpoints tie at one value; the scalar
    searches list them as one instead of narrowing a grid forever."""
    X, y = classification_data(12_000, 5, seed=13)
    X[np.flatnonzero(y < 0)[:5000]] = 0.0
    path = write_store(tmp_path / "s.zarr", X, y, [4000, 4000, 4000])
    with ShardedDataset(path, client, cache="memory") as ds:
        objs = []
        for mode in ("driver", "workers"):
            with dask.config.set({"dpipe.rank-exchange": mode}):
                objs.append(SmoothedObjective(RankPasses(ds), SmoothedPRBEPRisk(1e-6)))
        for w in (np.random.default_rng(3).standard_normal(5), np.zeros(5)):
            f0, g0 = objs[0].value_and_grad(w)
            f1, g1 = objs[1].value_and_grad(w)
            assert f1 == pytest.approx(f0, rel=1e-9, abs=1e-12)
            assert objs[1].last["J"] == pytest.approx(objs[0].last["J"], rel=1e-9, abs=1e-12)
            np.testing.assert_allclose(g1, g0, rtol=1e-7, atol=1e-9 * max(1.0, np.abs(g0).max()))
            assert objs[1].last["search_rounds"] <= 8
