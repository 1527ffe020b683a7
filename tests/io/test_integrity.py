"""Stores that cannot silently lie: a validated manifest, per-shard checksums, checks on read.

Every damage class is made on real Zarr / Parquet files and run through the ``dpipe``
command: a non-zero exit, one line on stderr naming the store (and the shard), no
traceback, nothing written at ``--out``.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings

import dask.config
import numpy as np
import pytest

from dpipe.cli.main import main
from dpipe.exceptions import DataWarning, StoreError
from dpipe.io import open_store, read_shard, record_checksums, verify_store
from dpipe.io._checksum import array_digest
from dpipe.testing import classification_data, write_store

SIZES = [50, 50, 50, 50]


@pytest.fixture(scope="module")
def data():
    X, y = classification_data(200, 6, seed=3)
    return X, y


def _store(tmp_path, data, fmt: str = "zarr", name: str = "s") -> str:
    X, y = data
    return write_store(tmp_path / f"{name}.{fmt}", X, y, SIZES, format=fmt)


def _edit_manifest(store: str, fn, *, attrs: bool = True, file: bool = True) -> None:
    """Apply ``fn(dict) -> object`` to manifest.json and (consistently) to the Zarr attributes' copy."""
    if file:
        p = os.path.join(store, "manifest.json")
        with open(p) as f:
            d = json.load(f)
        with open(p, "w") as f:
            json.dump(fn(d), f)
    zj = os.path.join(store, "zarr.json")
    if attrs and os.path.exists(zj):
        with open(zj) as f:
            meta = json.load(f)
        meta["attributes"]["dpipe_manifest"] = fn(meta["attributes"]["dpipe_manifest"])
        with open(zj, "w") as f:
            json.dump(meta, f)


def _load(path) -> object:
    with open(path) as f:
        return json.load(f)


def _swap(a: str, b: str) -> None:
    tmp = a + ".swap"
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)


# -- damage classes: each returns (store, the text the error must name besides the store) ----------
def delete_x_chunk(store):
    os.remove(os.path.join(store, "X", "c", "2", "0"))
    return "shard 2"


def swap_x_chunks(store):
    _swap(os.path.join(store, "X", "c", "1", "0"), os.path.join(store, "X", "c", "2", "0"))
    return "shard 1"


def drop_middle_shard(store):
    def edit(d):
        for key in ("shard_bounds", "class_counts", "shards"):
            del d[key][2]
        return d
    _edit_manifest(store, edit)
    return "shard_bounds[2]"


def drop_last_shard(store):
    def edit(d):
        for key in ("shard_bounds", "class_counts", "shards"):
            d[key].pop()
        d["n_rows"] = 150
        return d
    _edit_manifest(store, edit)
    return "part-00003.parquet is not in the manifest" if store.endswith(".parquet") else "manifest says (150, 6)"


def swap_class_counts(store):
    def edit(d):
        d["class_counts"][1].reverse()
        d["shards"][1]["class_counts"].reverse()
        return d
    _edit_manifest(store, edit)
    return "shard 1"


def swap_class_counts_top_only(store):
    def edit(d):
        d["class_counts"][1].reverse()
        return d
    _edit_manifest(store, edit)
    return "shards[1].class_counts"


def overlapping_bounds(store):
    def edit(d):
        d["shard_bounds"][1] = [40, 100]
        return d
    _edit_manifest(store, edit)
    return "shard_bounds[1]"


def manifest_is_list(store):
    _edit_manifest(store, lambda d: [d])
    return "JSON list"


def manifest_null_list(store):
    def edit(d):
        d["feature_names"] = None
        return d
    _edit_manifest(store, edit)
    return "feature_names"


def attrs_differ(store):
    def edit(d):
        d["source"] = {"path": "elsewhere"}
        return d
    _edit_manifest(store, edit, attrs=False)
    return "zarr.json"


def swap_parts(store):
    _swap(os.path.join(store, "part-00001.parquet"), os.path.join(store, "part-00002.parquet"))
    return "shard 1"


def copy_part(store):
    shutil.copyfile(os.path.join(store, "part-00001.parquet"), os.path.join(store, "part-00002.parquet"))
    return "shard 2"


#: (format, damage, needs --verify)
DAMAGE = [
    ("zarr", delete_x_chunk, False),
    ("zarr", swap_x_chunks, True),
    ("zarr", drop_middle_shard, False),
    ("parquet", drop_middle_shard, False),
    ("parquet", drop_last_shard, False),
    ("zarr", drop_last_shard, False),
    ("zarr", swap_class_counts, False),
    ("parquet", swap_class_counts, False),
    ("zarr", swap_class_counts_top_only, False),
    ("zarr", overlapping_bounds, False),
    ("zarr", manifest_is_list, False),
    ("zarr", manifest_null_list, False),
    ("parquet", manifest_null_list, False),
    ("zarr", attrs_differ, False),
    ("parquet", swap_parts, False),
    ("parquet", copy_part, False),
]
IDS = [f"{fmt}-{fn.__name__}" for fmt, fn, _ in DAMAGE]


def _one_error_line(capsys, store: str, also: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert store in lines[0] and also in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("fmt, damage, needs_verify", DAMAGE, ids=IDS)
def test_train_refuses_damaged_store(tmp_path, data, capsys, fmt, damage, needs_verify):
    store = _store(tmp_path, data, fmt)
    also = damage(store)
    out = tmp_path / "model.json"
    argv = ["train", store, "--objective", "auc-moment", "--out", str(out), "--engine", "local"] + (["--verify"] if needs_verify else [])
    assert main(argv) == 1
    line = _one_error_line(capsys, store, also)
    assert line.startswith("dpipe train: error: ")
    assert not out.exists()


@pytest.mark.parametrize("fmt, damage, needs_verify", DAMAGE, ids=IDS)
def test_verify_command_fails_on_damaged_store(tmp_path, data, capsys, fmt, damage, needs_verify):
    store = _store(tmp_path, data, fmt)
    also = damage(store)
    assert main(["verify", store]) == 1
    _one_error_line(capsys, store, also)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_verify_command_passes_on_undamaged_store(tmp_path, data, capsys, fmt):
    store = _store(tmp_path, data, fmt)
    assert main(["verify", store]) == 0
    cap = capsys.readouterr()
    assert "ok, 4 shards, 200 rows" in cap.out and cap.err == ""
    assert verify_store(store).n_rows == 200


def test_swapped_chunks_are_only_visible_to_hashing(tmp_path, data, capsys):
    """Same labels, other features: the cheap checks cannot see it; --verify and dpipe.verify can."""
    store = _store(tmp_path, data)
    swap_x_chunks(store)
    assert main(["train", store, "--objective", "auc-moment", "--out", str(tmp_path / "m.json"), "--engine", "local"]) == 0
    capsys.readouterr()
    with dask.config.set({"dpipe.verify": True}):
        st = open_store(store)
        assert st.verify
        with pytest.raises(StoreError, match=r"shard 1 \(rows 50..100\): content hash of X differs"):
            st.read_shard(1)
    assert not open_store(store).verify
    with pytest.raises(StoreError, match="content hash of X"):
        read_shard(*open_store(store, verify=True).shard_args(2))


def test_verify_on_evaluate_and_predict(tmp_path, data, capsys):
    store = _store(tmp_path, data)
    model = tmp_path / "m.json"
    assert main(["train", store, "--objective", "auc-moment", "--out", str(model), "--engine", "local", "--verify"]) == 0
    swap_x_chunks(store)
    capsys.readouterr()
    assert main(["evaluate", str(model), store, "--engine", "local", "--verify"]) == 1
    _one_error_line(capsys, store, "shard 1")
    out = tmp_path / "p.parquet"
    assert main(["predict", str(model), store, "--out", str(out), "--engine", "local", "--verify"]) == 1
    _one_error_line(capsys, store, "shard 1")
    assert not out.exists()


# -- the manifest schema ------------------------------------------------------------------------------
def _set(path, value):
    def edit(d):
        obj = d
        for k in path[:-1]:
            obj = obj[k]
        if value is KeyError:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
        return d
    return edit


@pytest.mark.parametrize("edit, field", [
    (_set(["n_rows"], "200"), "manifest field n_rows: Expected `int`, got `str`"),
    (_set(["n_rows"], True), "manifest field n_rows"),
    (_set(["feature_names"], KeyError), "manifest field feature_names: missing"),
    (_set(["shard_bounds", 2], None), "manifest field shard_bounds[2]: Expected `array`, got `null`"),
    (_set(["shard_bounds", 2], [100, 150, 7]), "manifest field shard_bounds[2]: expected [start, stop]"),
    (_set(["class_counts", 0], [1, 2]), "manifest field class_counts[0]: expected [n_negative, n_positive] adding up to the shard's 50 rows"),
    (_set(["class_counts"], [[25, 25]] * 3), "manifest field class_counts: 3 entries for 4 shards"),
    (_set(["shards", 3], KeyError), "manifest field shards: 3 entries for 4 shards"),
    (_set(["shards", 0, "digests", "X"], "00"), "manifest field shards[0].digests.X"),
    (_set(["shards", 0, "rows"], 49), "manifest field shards[0].rows"),
    (_set(["shards"], KeyError), "manifest field shards: missing (required by schema_version 2)"),
    (_set(["format"], "hdf5"), "manifest field format"),
    (_set(["schema_version"], 9), "manifest field schema_version: unsupported value 9"),
    (_set(["feature_names"], ["a"]), "manifest field feature_names: 1 names for n_features = 6"),
])
def test_malformed_manifest_is_one_store_error(tmp_path, data, edit, field):
    store = _store(tmp_path, data, "parquet")
    _edit_manifest(store, edit)
    with pytest.raises(StoreError) as info:
        open_store(store)
    msg = str(info.value)
    assert msg.startswith(store + ": ") and field in msg and "\n" not in msg


def test_manifest_not_json(tmp_path, data):
    store = _store(tmp_path, data)
    with open(os.path.join(store, "manifest.json"), "w") as f:
        f.write("{nope")
    with pytest.raises(StoreError, match="manifest is not valid JSON"):
        open_store(store)


def test_checksums_are_recorded_and_bound_to_position(tmp_path, data):
    X, y = data
    m = open_store(_store(tmp_path, data)).manifest
    assert m.schema_version == 2 and m.checksum_algorithm == "xxh3_128" and len(m.shards) == 4
    assert m.shards[1].digests["X"] == array_digest("X", X[50:100], 1, 50, 100)
    assert m.shards[1].digests["X"] != array_digest("X", X[50:100], 2, 100, 150)  # the same values elsewhere do not match
    zm = open_store(_store(tmp_path, data, "parquet")).manifest
    assert [s.digests for s in zm.shards] == [s.digests for s in m.shards]  # decoded values: codec / format independent


def test_zero_chunks_have_files(tmp_path):
    """The writer writes all-zero chunks too, so a missing chunk file is always damage."""
    store = write_store(tmp_path / "z.zarr", np.zeros((20, 3), np.float32), np.array([1, -1] * 10, np.int8), [10, 10])
    assert sorted(os.listdir(os.path.join(store, "X", "c"))) == ["0", "1"]
    assert verify_store(store).n_rows == 20


# -- stores written before checksums ------------------------------------------------------------------
def _make_schema1(store: str) -> None:
    def edit(d):
        d.pop("shards")
        d.pop("checksum_algorithm")
        d["schema_version"] = 1
        return d
    _edit_manifest(store, edit)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_old_store_warns_and_verify_record_adds_checksums(tmp_path, data, capsys, fmt):
    store = _store(tmp_path, data, fmt)
    _make_schema1(store)
    with pytest.warns(DataWarning, match=r"written by dpipe <= 0.1 without checksums; re-ingest it, or run `dpipe verify --record"):
        st = open_store(store)
    assert st.manifest.schema_version == 1 and not st.manifest.has_checksums
    digest_v1 = st.manifest.digest()
    out = tmp_path / "m.json"
    with warnings.catch_warnings():
        warnings.simplefilter("always", DataWarning)
        assert main(["train", store, "--objective", "auc-moment", "--out", str(out), "--engine", "local"]) == 0
    assert "dpipe: warning: " + store + ": written by dpipe <= 0.1" in capsys.readouterr().err
    assert _load(out)["training"]["manifest_sha256"] == digest_v1  # old digests unchanged
    # verify cannot verify what was never recorded
    assert main(["verify", store]) == 1
    _one_error_line(capsys, store, "without checksums")
    assert main(["verify", "--record", store]) == 0
    assert "checksums recorded" in capsys.readouterr().out
    assert [f for f in os.listdir(store) if ".tmp-" in f] == []
    assert main(["verify", store]) == 0
    assert "ok, 4 shards" in capsys.readouterr().out
    recorded, fresh = open_store(store).manifest.to_dict(), open_store(_store(tmp_path, data, fmt, name="fresh")).manifest.to_dict()
    recorded.pop("created"), fresh.pop("created")
    assert recorded == fresh  # the same checksums as a store written with them
    assert main(["verify", "--record", store]) == 1  # already recorded
    assert "already has checksums" in capsys.readouterr().err


def test_verify_record_refuses_a_damaged_old_store(tmp_path, data, capsys):
    store = _store(tmp_path, data)
    _make_schema1(store)
    os.remove(os.path.join(store, "X", "c", "3", "0"))
    assert main(["verify", "--record", store]) == 1
    _one_error_line(capsys, store, "shard 3")
    assert _load(os.path.join(store, "manifest.json"))["schema_version"] == 1
