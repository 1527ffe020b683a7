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
from dpipe.exceptions import DataWarning, ParameterError, StoreError
from dpipe.io import open_store, read_shard, verify_store
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


def _raw_x_chunk(store, shard: int) -> str:
    fn = os.path.join(store, "X", "c", str(shard), "0")
    assert os.path.getsize(fn) == 50 * 6 * 4, "the damage below needs an uncompressed chunk"  # dpipe.store-codec auto keeps dense data raw
    return fn


def zero_x_chunk(store):
    """Zeros of the same size: the chunk decodes, the labels are untouched."""
    fn = _raw_x_chunk(store, 2)
    with open(fn, "r+b") as f:
        f.write(bytes(os.path.getsize(fn)))
    return "shard 2"


def flip_x_byte(store):
    """One byte of one value (the low byte of a float32: finite, a little off)."""
    fn = _raw_x_chunk(store, 3)
    with open(fn, "r+b") as f:
        f.seek(4 * 37)
        b = f.read(1)
        f.seek(4 * 37)
        f.write(bytes([b[0] ^ 0xFF]))
    return "shard 3"


def zero_x_part(store):
    """A Parquet part rewritten with its own position metadata and labels, features all zero."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fn = os.path.join(store, "part-00001.parquet")
    t = pq.read_table(fn)
    x = t.column("X").combine_chunks()
    zeros = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(len(x.values), np.float32)), x.type.list_size)
    pq.write_table(t.set_column(t.column_names.index("X"), "X", zeros), fn)
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


#: (format, damage, only the re-hash sees it: --no-verify trains on it)
DAMAGE = [
    ("zarr", delete_x_chunk, False),
    ("zarr", swap_x_chunks, True),
    ("zarr", zero_x_chunk, True),
    ("zarr", flip_x_byte, True),
    ("parquet", zero_x_part, True),
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


@pytest.mark.parametrize("fmt, damage, hash_only", DAMAGE, ids=IDS)
def test_train_refuses_damaged_store(tmp_path, data, capsys, fmt, damage, hash_only):
    """By default: no flag, no setting."""
    store = _store(tmp_path, data, fmt)
    also = damage(store)
    out = tmp_path / "model.json"
    assert main(["train", store, "--objective", "auc-moment", "--out", str(out), "--engine", "local"]) == 1
    line = _one_error_line(capsys, store, also)
    assert line.startswith("dpipe train: error: ")
    if hash_only:
        assert "content hash of X differs" in line
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(store)]  # no temporary left either


@pytest.mark.parametrize("fmt, damage, hash_only", DAMAGE, ids=IDS)
def test_no_verify_skips_only_the_rehash(tmp_path, data, capsys, fmt, damage, hash_only):
    """--no-verify trains past what only a re-hash sees; the cheap checks still refuse the rest."""
    store = _store(tmp_path, data, fmt)
    also = damage(store)
    out = tmp_path / "model.json"
    code = main(["train", store, "--objective", "auc-moment", "--out", str(out), "--engine", "local", "--no-verify"])
    if hash_only:
        assert code == 0, capsys.readouterr().err
        assert _load(out)["format"] == "dpipe-linear-model"
    else:
        assert code == 1
        _one_error_line(capsys, store, also)
        assert not out.exists()


@pytest.mark.parametrize("fmt, damage, hash_only", DAMAGE, ids=IDS)
def test_verify_command_fails_on_damaged_store(tmp_path, data, capsys, fmt, damage, hash_only):
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
    """Same labels, other features: the cheap checks cannot see it; the re-hash (on by default) can."""
    store = _store(tmp_path, data)
    swap_x_chunks(store)
    st = open_store(store)
    assert st.verify and st.verify_mode == "auto"
    with pytest.raises(StoreError, match=r"shard 1 \(rows 50..100\): content hash of X differs"):
        st.read_shard(1)
    for setting in (False, "false", "no"):  # a config file, or an environment variable: DASK_DPIPE__VERIFY=false
        with dask.config.set({"dpipe.verify": setting}):
            st = open_store(store)
            assert not st.verify and st.verify_mode is False
            assert st.read_shard(1).n_rows == 50
    with dask.config.set({"dpipe.verify": True}):
        assert open_store(store).verify_mode is True
    assert not open_store(store, verify=False).verify
    with pytest.raises(StoreError, match="content hash of X"):
        read_shard(*open_store(store, verify=False).shard_args(2, verify=True))
    with pytest.raises(StoreError, match="content hash of X"):  # an open store switched back on
        open_store(store, verify=False).with_verify(True).read_shard(2)
    assert main(["train", store, "--objective", "auc-moment", "--out", str(tmp_path / "m.json"), "--engine", "local", "--no-verify"]) == 0


@pytest.mark.parametrize("value", ["sometimes", 2])
def test_a_bad_verify_setting_is_one_error(tmp_path, data, value):
    store = _store(tmp_path, data)
    with dask.config.set({"dpipe.verify": value}), pytest.raises(ParameterError, match=r"^The dpipe.verify setting must be true, false or auto\. Got"):
        open_store(store)
    with pytest.raises(ParameterError, match=r"^The 'verify' parameter of open_store must be True, False, 'auto' or None\. Got"):
        open_store(store, verify=value)


def test_verify_on_evaluate_and_predict(tmp_path, data, capsys):
    store = _store(tmp_path, data)
    model = tmp_path / "m.json"
    assert main(["train", store, "--objective", "auc-moment", "--out", str(model), "--engine", "local", "--verify"]) == 0
    swap_x_chunks(store)
    capsys.readouterr()
    for flag in ([], ["--verify"]):
        assert main(["evaluate", str(model), store, "--engine", "local", *flag]) == 1
        _one_error_line(capsys, store, "shard 1")
        out = tmp_path / "p.parquet"
        assert main(["predict", str(model), store, "--out", str(out), "--engine", "local", *flag]) == 1
        _one_error_line(capsys, store, "shard 1")
        assert not out.exists()
    assert main(["evaluate", str(model), store, "--engine", "local", "--no-verify"]) == 0
    assert "roc_auc" in capsys.readouterr().out


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
    (_set(["shards"], KeyError), "manifest field shards: missing (required by schema_version 3)"),
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
    assert m.schema_version == 3 and m.checksum_algorithm == "xxh3_128" and len(m.shards) == 4
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


def test_old_store_is_refused_only_when_verification_was_asked(tmp_path, data, capsys):
    """Verification on by default must not refuse every store written before checksums: only an explicit ask does."""
    import dpipe

    store = _store(tmp_path, data)
    _make_schema1(store)
    out = tmp_path / "m.json"
    for asked in (["--verify"], ["--no-verify"], []):  # default and --no-verify: read unverified, with the warning
        with warnings.catch_warnings():
            warnings.simplefilter("always", DataWarning)  # as outside pytest: the command prints it
            code = main(["train", store, "--objective", "auc-moment", "--out", str(out), "--engine", "local", "--overwrite", *asked])
        err = capsys.readouterr().err
        if asked == ["--verify"]:
            assert code == 1 and not out.exists()
            line = _one_error_line_of(err, store, "without checksums")
            assert line.endswith("(verification was asked for: --verify or dpipe.verify: true; --no-verify reads it unverified)")
        else:
            assert code == 0 and out.exists(), err
            assert "dpipe: warning: " + store + ": written by dpipe <= 0.1" in err
    with pytest.warns(DataWarning, match="without checksums"):
        st = open_store(store)
    assert st.verify_mode == "auto" and not st.verify  # nothing to re-hash against
    with pytest.raises(StoreError, match="verification was asked for"):
        st.with_verify(True)
    with dask.config.set({"dpipe.verify": True}), pytest.raises(StoreError, match="verification was asked for"):
        open_store(store)  # set explicitly in the config (a file, DASK_DPIPE__VERIFY=true): asked
    with pytest.raises(StoreError, match="verification was asked for"):
        dpipe.train(store, engine="local", verify=True)
    with pytest.warns(DataWarning, match="without checksums"):
        assert dpipe.train(store, engine="local", verify=False).coef.shape == (6,)


def _one_error_line_of(err: str, store: str, also: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert store in lines[0] and also in lines[0], lines[0]
    return lines[0]


def test_verify_record_refuses_a_damaged_old_store(tmp_path, data, capsys):
    store = _store(tmp_path, data)
    _make_schema1(store)
    os.remove(os.path.join(store, "X", "c", "3", "0"))
    assert main(["verify", "--record", store]) == 1
    _one_error_line(capsys, store, "shard 3")
    assert _load(os.path.join(store, "manifest.json"))["schema_version"] == 1
