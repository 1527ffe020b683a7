"""The feature block is a type: a toy layout, registered here only, is fitted through the protocol alone.

``CountingBlock`` holds its rows in a type of its own (:class:`Counted`, which no other layout holds) and answers every
method of :class:`~dpipe.reduce._block.FeatureBlock` by counting the call and asking a :class:`DenseBlock` of the same
rows. Fits on shards of that layout are bitwise the fits on dense shards, and every product they make went through the
toy's methods: no consumer looked at the layout. The last test lists the modules that still name a layout themselves.
"""

from __future__ import annotations

import collections
import pathlib
import re
from typing import Any, ClassVar

import numpy as np
import pytest

from dpipe.engine import LocalDataset
from dpipe.fit import fit_dataset, resolve
from dpipe.io import Shard
from dpipe.reduce._block import LAYOUTS, CSRBlock, DenseBlock, FeatureBlock, Layout, as_block, block_of_input
from dpipe.reduce._moments import column_moments_of_shard, shard_moments


class Counted:
    """The toy layout's native array: dense rows behind a type of their own."""

    def __init__(self, X: np.ndarray) -> None:
        self.rows = X

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.rows.shape)


_METHODS = ("take_rows", "slice_rows", "dense_rows", "first_nonfinite", "value_at", "matvec", "matvec_pair", "rmatvec", "rmatvec_squares",
            "rows_product", "column_sums")


class CountingBlock:
    """A toy layout: every method counted, then answered by a dense block of the same rows."""

    layout: ClassVar[str] = "counted"
    sparse: ClassVar[bool] = False
    calls: ClassVar[collections.Counter[str]] = collections.Counter()

    def __init__(self, X: Counted) -> None:
        self.X = X
        self._dense = DenseBlock(X.rows)

    @classmethod
    def holds(cls, X: Any) -> bool:
        return isinstance(X, Counted)

    @classmethod
    def of(cls, X: Any) -> CountingBlock:
        return cls(X if isinstance(X, Counted) else Counted(DenseBlock.of(X).array))

    @classmethod
    def feature_bytes(cls, n_rows: int, n_features: int, nnz: int) -> int:
        return 4 * n_rows * n_features

    @classmethod
    def empty(cls, n_features: int) -> CountingBlock:
        return cls(Counted(np.zeros((0, n_features), np.float32)))

    @classmethod
    def concat(cls, blocks: list[FeatureBlock]) -> CountingBlock:
        return cls(Counted(np.concatenate([b.array.rows for b in blocks])))

    array = property(lambda self: self.X)
    shape = property(lambda self: self._dense.shape)
    dtype = property(lambda self: self._dense.dtype)
    nbytes = property(lambda self: self._dense.nbytes)
    nnz = property(lambda self: self._dense.nnz)

    def __getattr__(self, name: str) -> Any:
        if name not in _METHODS:
            raise AttributeError(name)
        method = getattr(self._dense, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            CountingBlock.calls[name] += 1
            out = method(*args, **kwargs)
            return CountingBlock(Counted(out.array)) if isinstance(out, DenseBlock) else out

        return counted


@pytest.fixture
def counted_layout():
    CountingBlock.calls.clear()
    with LAYOUTS.registered(Layout("counted", CountingBlock)):
        yield CountingBlock.calls


def _shards(layout: str, n: int = 1500, d: int = 9, seed: int = 0) -> list[Shard]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:, 3] = np.where(rng.random(n) < 0.8, 0.0, X[:, 3])
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + rng.standard_normal(n) > 0, 1, -1).astype(np.int8)
    weight = rng.uniform(0.5, 2.0, n)
    wrap = {"dense": lambda a: a, "counted": Counted, "csr": lambda a: CSRBlock.of(a).array}[layout]
    return [Shard(X=wrap(X[a : a + 500]), y=y[a : a + 500], weight=weight[a : a + 500], index=i) for i, a in enumerate(range(0, n, 500))]


def _fit(layout: str, objective: str) -> np.ndarray:
    ds = LocalDataset(_shards(layout))
    try:
        outcome = fit_dataset(ds, resolve(objective, {}, "train"))
    finally:
        ds.close()
    return np.asarray(outcome.result.x, dtype=np.float64)


@pytest.mark.parametrize("objective", ["auc", "auc-smooth", "error", "auc-moment"])
def test_a_toy_layout_fits_bitwise_as_dense_through_the_protocol_alone(counted_layout, objective):
    dense = _fit("dense", objective)
    assert not counted_layout  # the dense fit made no call on a toy block
    toy = _fit("counted", objective)
    np.testing.assert_array_equal(toy, dense)
    assert counted_layout, "the fit on the toy layout never called its block"
    products = {"matvec", "matvec_pair", "rmatvec", "rmatvec_squares", "rows_product"}
    if objective == "auc-moment":
        assert counted_layout["dense_rows"] > 0  # the class moments gather rows through the block
    else:
        assert sum(counted_layout[m] for m in products) > 0


def test_the_toy_layout_gives_the_dense_moments_and_products(counted_layout):
    dense, toy = _shards("dense"), _shards("counted")
    for a, b in zip(dense, toy):
        assert isinstance(b.block, CountingBlock) and as_block(b.X).layout == "counted" and b.n_rows == a.n_rows and b.nbytes == a.nbytes
        ma, mb = shard_moments(a.X, a.y, a.weight), shard_moments(b.X, b.y, b.weight)
        for f in ("count", "weight", "mean", "m2"):
            np.testing.assert_array_equal(getattr(ma, f), getattr(mb, f))
        ca, cb = column_moments_of_shard(a), column_moments_of_shard(b)
        np.testing.assert_array_equal(ca.mean, cb.mean)
        np.testing.assert_array_equal(ca.m2, cb.m2)
        w = np.linspace(-1, 1, a.block.shape[1])
        np.testing.assert_array_equal(a.block.matvec(w), b.block.matvec(w))
        np.testing.assert_array_equal(a.block.rmatvec(a.y.astype(float)), b.block.rmatvec(b.y.astype(float)))
    assert counted_layout["column_sums"] == len(toy) and counted_layout["dense_rows"] >= len(toy)


def test_the_registry_recognizes_native_arrays_and_converts_inputs(counted_layout):
    X = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert type(as_block(X)) is DenseBlock and type(as_block(Counted(X))) is CountingBlock
    assert type(as_block(CSRBlock.of(X).array)) is CSRBlock and as_block(as_block(X)).layout == "dense"
    assert block_of_input(X).dtype == np.float32 and type(block_of_input(CSRBlock.of(X).array.tocoo())) is CSRBlock
    np.testing.assert_array_equal(LAYOUTS["counted"].block.of(X).array.rows, X.astype(np.float32))
    with pytest.raises(TypeError, match="not a feature block of any store layout"):
        as_block([[1.0]])
    assert list(LAYOUTS) == ["dense", "csr", "counted"]


def test_the_toy_layout_is_registered_for_the_test_only():
    assert list(LAYOUTS) == ["dense", "csr"]


#: the modules that still name a layout themselves (``is_csr``, ``"csr"``, a CSR array's ``indptr``), each for a reason:
#: the block module; the store formats' readers and writers (the manifest's ``shard_nnz``, the digests); ingest's
#: choice of a layout and its parsers' CSR pieces; the transforms, which keep a CSR block's zeros; and the user-facing inputs
#: (a scipy.sparse matrix given to the model, the estimator or the CLI's summary). Every pass, fit, solver and rate goes
#: through the block.
LAYOUT_AWARE = {
    "reduce/_block.py",
    "io/_writer.py", "io/_zarr_store.py", "io/_parquet_store.py", "io/_checksum.py", "io/_manifest.py",
    "io/_ingest_write.py", "io/_ingest_jobs.py", "io/_svmlight.py", "io/_tabular.py",
    "_transform.py", "io/_fit_transform.py", "io/_stored_transform.py",
    "_estimator.py", "model/_linear.py", "cli/main.py",
}

_NAMES_A_LAYOUT = re.compile(r"\bis_csr\b|[\"']csr[\"']|\.indptr\b|\bcsr_block\b|\bCSRBlock\b")


def test_only_the_block_module_and_the_formats_name_a_layout():
    root = pathlib.Path(__file__).resolve().parents[2] / "dpipe"
    naming = set()
    for path in root.rglob("*.py"):
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())  # comments may name a layout
        code = re.sub(r'"""[\s\S]*?"""', "", code)  # and so may docstrings
        if _NAMES_A_LAYOUT.search(code):
            naming.add(path.relative_to(root).as_posix())
    assert naming <= LAYOUT_AWARE, f"modules that test the layout themselves: {sorted(naming - LAYOUT_AWARE)}; call the block's methods"
    assert not any(p.startswith(("engine/", "fit/", "solvers/", "rates/", "objectives/", "metrics/")) for p in naming)
