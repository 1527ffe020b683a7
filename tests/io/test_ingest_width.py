"""Ingest memory is bounded by the rows, not by the width an index declares (issue 41, item 1).

A 60-byte svmlight file whose largest index is 2^31 - 1 used to take 24 GB (a Python list of d feature names); the
names are a :class:`dpipe._wide.NamePattern` on every ingest path, and such a width is refused unless ``n_features``
declares it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from dpipe._wide import NamePattern
from dpipe.cli import main
from dpipe.exceptions import InputError
from dpipe.io import ingest, open_store

WIDE = "+1 1:1.5 2147483647:2.5\n-1 3:1.0\n+1 5:0.5 7:1.0\n-1 2:2.1255\n"  # 60 bytes: 4 rows, 6 non-zeros, largest index 2^31 - 1
MB = 2**20


def test_a_header_wide_file_is_refused_naming_its_index_and_line(tmp_path):
    src = tmp_path / "wide.svm"
    src.write_text(WIDE)
    with pytest.raises(InputError) as exc:
        ingest(str(src), str(tmp_path / "wide.zarr"))
    msg = str(exc.value)
    assert "wide.svm, line 1" in msg and "feature index 2147483647" in msg and "6 non-zero" in msg
    assert "'n_features' parameter as 2147483647" in msg and "\n" not in msg
    assert not (tmp_path / "wide.zarr").exists()


def test_the_cli_names_the_flag_that_declares_the_width(tmp_path, capsys):
    src = tmp_path / "wide.svm"
    src.write_text(WIDE)
    assert main(["ingest", str(src), str(tmp_path / "wide.zarr")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give --n-features as 2147483647" in err[0]


def test_a_width_at_the_limit_or_declared_is_ingested_as_a_pattern(tmp_path):
    src = tmp_path / "w24.svm"
    src.write_text("+1 1:1 16777216:2\n-1 3:1\n")  # 2^24 features: not refused
    m = ingest(str(src), str(tmp_path / "w24.zarr"))
    assert m.n_features == 2**24 and isinstance(m.feature_names, NamePattern)
    src.write_text("+1 1:1 16777217:2\n-1 3:1\n")  # one more, with 3 non-zeros: refused unless declared
    with pytest.raises(InputError, match="feature index 16777217"):
        ingest(str(src), str(tmp_path / "w24b.zarr"))
    m = ingest(str(src), str(tmp_path / "w24b.zarr"), n_features=2**24 + 1)
    assert m.n_features == 2**24 + 1 and open_store(str(tmp_path / "w24b.zarr")).manifest.feature_names[-1] == "f16777217"


@pytest.mark.parametrize("index", [str(2**63 + 5), str(2**64 + 5), "0" * 30 + "2147483648"])
def test_an_index_beyond_int64_is_reported_with_its_exact_token(tmp_path, index):
    src = tmp_path / "big.svm"
    src.write_text(f"+1 1:1.5 {index}:2.5\n-1 3:1\n")
    with pytest.raises(InputError) as exc:
        ingest(str(src), str(tmp_path / "big.zarr"), n_features=2**31 - 1)
    assert f"'{index}:2.5'" in str(exc.value) and "line 1" in str(exc.value)


_MEASURE = textwrap.dedent("""
    import json, re, resource, sys, tracemalloc
    from dpipe.io import ingest
    small, wide, out = sys.argv[1:4]
    ingest(small, out + "/small.zarr")  # imports and numba kernels first: what follows is the wide file's own cost
    status = open("/proc/self/status").read()
    vm = int(re.search(r"VmSize:\\s+(\\d+)", status).group(1)) * 1024
    # a guard for the host, not the measure: a regression fails here with MemoryError instead of taking 24 GB
    resource.setrlimit(resource.RLIMIT_AS, (vm + 2**31, resource.getrlimit(resource.RLIMIT_AS)[1]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    m = ingest(wide, out + "/wide.zarr", n_features=2**31 - 1)
    peak = tracemalloc.get_traced_memory()[1]
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"traced_peak": peak, "rss_before": before, "rss_after": after, "n_features": m.n_features,
                      "pattern": type(m.feature_names).__name__}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status for the address-space guard")
def test_ingesting_a_declared_2_31_wide_file_takes_memory_of_its_rows_not_its_width(tmp_path):
    """The 60-byte file with n_features=2^31-1 in a fresh process: Python's allocations during the ingest (tracemalloc,
    NumPy's included) and the growth of the peak RSS stay under 300 MB (they were about 100 bytes a declared feature)."""
    small, wide = tmp_path / "small.svm", tmp_path / "wide.svm"
    small.write_text("+1 1:1 2:2\n-1 3:1\n")
    wide.write_text(WIDE)
    assert os.path.getsize(wide) == 60
    run = subprocess.run([sys.executable, "-c", _MEASURE, str(small), str(wide), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["n_features"] == 2**31 - 1 and got["pattern"] == "NamePattern"
    assert got["traced_peak"] < 300 * MB, f"traced peak {got['traced_peak'] / MB:.0f} MB"
    assert got["rss_after"] - got["rss_before"] < 300 * MB, f"peak RSS grew by {(got['rss_after'] - got['rss_before']) / MB:.0f} MB"
    st = open_store(str(tmp_path / "wide.zarr"))
    assert st.manifest.n_features == 2**31 - 1 and st.manifest.feature_names.index("f2147483647") == 2**31 - 2


# A fresh interpreter whose only child is the ingest: its RUSAGE_CHILDREN peak is the ingest's own whole-process peak
# (the test process's own children, earlier clusters included, do not count).
_WHOLE_PROCESS = textwrap.dedent("""
    import json, resource, subprocess, sys
    run = subprocess.run([sys.executable, "-m", "dpipe", "ingest", *sys.argv[1:]], capture_output=True, text=True)
    print(json.dumps({"rc": run.returncode, "stderr": run.stderr[-2000:],
                      "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in kilobytes on Linux")
def test_dpipe_ingest_of_the_60_byte_file_peaks_under_300_mb_as_a_whole_process(tmp_path):
    """``dpipe ingest wide.svm wide.zarr --n-features 2147483647``, imports included, with numba's cache empty (the
    first run compiles the parsing kernels, the larger peak): under 300 MB. It was 348-370 MB, 280 MB of it imports an
    svmlight ingest does not use (pyarrow and pandas, through the tabular sources' module-level imports)."""
    wide = tmp_path / "wide.svm"
    wide.write_text("+1 2147483647:2.5\n-1 1:1\n+1 3:2\n-1 5:1\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    run = subprocess.run([sys.executable, "-c", _WHOLE_PROCESS, str(wide), str(tmp_path / "wide.zarr"), "--n-features", "2147483647"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0, got["stderr"]
    assert open_store(str(tmp_path / "wide.zarr")).manifest.n_features == 2**31 - 1
    assert got["peak"] < 300 * MB, f"dpipe ingest peaked at {got['peak'] / MB:.0f} MB"


_MODULES = textwrap.dedent("""
    import json, sys
    from dpipe.cli import main
    assert main(["ingest", *sys.argv[1:]]) == 0
    print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"pyarrow", "pandas", "sklearn", "distributed"})))
""")


def test_an_svmlight_ingest_imports_neither_pyarrow_nor_pandas(tmp_path):
    """What keeps the peak down: the tabular sources' modules (pyarrow, which loads pandas) are imported by the tabular
    job only."""
    src = tmp_path / "a.svm"
    src.write_text("+1 1:1 2:2\n-1 3:1\n")
    run = subprocess.run([sys.executable, "-c", _MODULES, str(src), str(tmp_path / "a.zarr")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
