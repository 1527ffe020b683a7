"""Wall time and peak memory of ``dpipe.io.ingest`` on a large CSV and on KDD Cup 99.

Usage::

    python bench/ingest_memory.py [--work-dir DIR] [--rows 5000000] [--data-dir ../shared/data]

1. Writes a synthetic CSV source of ``--rows`` rows into the work dir (header, 40
   numeric columns, 2 categorical columns of 8 and 50 values, a 0/1 label), in
   chunks, so the generator itself stays small. It is reused when it exists.
2. Ingests it, and ``kddcup.data_10_percent.gz`` from ``--data-dir`` (attack vs
   normal), each in a fresh Python process, and reports that child's peak
   resident set size: ``VmHWM`` from ``/proc/self/status`` read by the child at the
   end (threads included), cross-checked with the ``ru_maxrss`` that ``os.wait4``
   returns for it. (On Linux ``ru_maxrss`` of an exec'd child also counts the
   parent's RSS at fork time, so the parent stays small: the CSV is written by a
   separate process too.)
3. Prints a table (and writes it as JSON with ``--json``); exits with status 1 if
   a peak exceeds ``--limit-mib`` (default 1024).

The stores are deleted after each run unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time, warnings
t0 = time.perf_counter()
import dpipe.io
import_s = time.perf_counter() - t0
import_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
src, dest, kw = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t = time.perf_counter()
c = time.process_time()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    m = dpipe.io.ingest(src, dest, overwrite=True, **kw)
def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({
    "hwm_kib": hwm(),
    "wall_s": time.perf_counter() - t,
    "cpu_s": time.process_time() - c,
    "import_s": import_s,
    "import_rss_kib": import_rss,
    "rows": m.n_rows,
    "features": m.n_features,
    "shards": m.n_shards,
    "positives": m.n_positive,
    "source_bytes": m.source["bytes"],
    "warnings": [str(w.message) for w in caught],
}))
"""


def make_csv(path: Path, rows: int, seed: int = 0, chunk: int = 250_000) -> None:
    """Write the synthetic source: header, x0..x39 (3 decimals), c0 (8 values), c1 (50 values), label 0/1."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = np.random.default_rng(seed)
    d = 40
    w = rng.standard_normal(d) / np.sqrt(d)
    scales = np.logspace(-1, 3, d)
    c0_vocab = np.array([f"k{i}" for i in range(8)])
    c1_vocab = np.array([f"svc_{i:02d}" for i in range(50)])
    names = [f"x{j}" for j in range(d)] + ["c0", "c1", "label"]
    schema = pa.schema([(n, pa.float64()) for n in names[:d]] + [("c0", pa.string()), ("c1", pa.string()), ("label", pa.int8())])
    tmp = path.with_name(path.name + ".part")
    with pcsv.CSVWriter(str(tmp), schema) as writer:
        done = 0
        while done < rows:
            n = min(chunk, rows - done)
            Z = rng.standard_normal((n, d))
            c0 = rng.integers(0, 8, n)
            c1 = np.minimum(rng.zipf(1.5, n) - 1, 49)
            score = Z @ w + 0.3 * (c0 == 3) - 0.2 * (c1 == 0) + 0.5 * rng.standard_normal(n)
            y = (score > 0.8).astype(np.int8)
            X = np.round(Z * scales, 3)
            cols = [pa.array(X[:, j]) for j in range(d)] + [pa.array(c0_vocab[c0]), pa.array(c1_vocab[c1]), pa.array(y)]
            writer.write_table(pa.Table.from_arrays(cols, schema=schema))
            done += n
    tmp.rename(path)
    path.with_name(path.name + ".json").write_text(json.dumps({"rows": rows, "seed": seed}))


def run_child(src: str, dest: str, kw: dict) -> dict:
    """Ingest in a fresh interpreter; return its report plus its peak RSS from ``os.wait4``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, src, dest, json.dumps(kw)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    t = time.perf_counter()
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"ingest of {src} failed (exit {proc.returncode}):\n{err.decode(errors='replace')}")
    report = json.loads(out.decode().strip().splitlines()[-1])
    report["peak_rss_mib"] = report.pop("hwm_kib") / 1024  # Linux: KiB
    report["wait4_maxrss_mib"] = usage.ru_maxrss / 1024
    report["import_rss_mib"] = report.pop("import_rss_kib") / 1024
    report["process_s"] = elapsed
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "dpipe-ingest-bench")
    p.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--format", choices=("zarr", "parquet"), default="zarr", help="store format")
    p.add_argument("--limit-mib", type=float, default=1024.0)
    p.add_argument("--keep", action="store_true", help="keep the stores")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--skip-synthetic", action="store_true")
    p.add_argument("--skip-kdd", action="store_true")
    p.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.generate:
        make_csv(a.generate, a.rows)
        return 0
    a.work_dir.mkdir(parents=True, exist_ok=True)

    jobs = []
    if not a.skip_synthetic:
        src = a.work_dir / f"synthetic-{a.rows}.csv"
        meta = src.with_name(src.name + ".json")
        if not (src.exists() and meta.exists() and json.loads(meta.read_text()).get("rows") == a.rows):
            t = time.perf_counter()
            print(f"writing {a.rows:,} rows to {src} ...", flush=True)
            subprocess.run([sys.executable, __file__, "--generate", str(src), "--rows", str(a.rows)], check=True)
            print(f"  {src.stat().st_size / 2**20:,.0f} MiB in {time.perf_counter() - t:.1f} s", flush=True)
        jobs.append((f"synthetic CSV {a.rows:,} x (40 num + 2 cat)", str(src), {}))
    if not a.skip_kdd:
        kdd = a.data_dir / "kddcup.data_10_percent.gz"
        if kdd.exists():
            jobs.append(("kddcup.data_10_percent.gz (attack vs normal)", str(kdd), {"negative": "normal."}))
        else:
            print(f"skipping KDD Cup 99: {kdd} not found", flush=True)

    results = []
    failed = False
    for name, src, kw in jobs:
        dest = a.work_dir / ("store-" + Path(src).name.split(".")[0] + "." + a.format)
        kw = dict(kw, format=a.format)
        print(f"ingesting {name} ...", flush=True)
        r = run_child(src, str(dest), kw)
        r.update(name=name, source=src, options=kw)
        ok = r["peak_rss_mib"] < a.limit_mib
        failed |= not ok
        r["under_limit"] = ok
        results.append(r)
        print(
            f"  {r['rows']:,} rows, {r['features']} features, {r['shards']} shards: {r['wall_s']:.1f} s wall "
            f"({r['rows'] / r['wall_s']:,.0f} rows/s, {r['cpu_s']:.1f} s CPU), peak RSS {r['peak_rss_mib']:.0f} MiB "
            f"(after imports {r['import_rss_mib']:.0f} MiB; wait4 ru_maxrss {r['wait4_maxrss_mib']:.0f} MiB) {'OK' if ok else 'OVER LIMIT'}",
            flush=True,
        )
        if not a.keep:
            shutil.rmtree(dest, ignore_errors=True)

    print()
    print(f"{'source':48s} {'rows':>10s} {'MiB in':>8s} {'wall s':>7s} {'rows/s':>10s} {'peak MiB':>9s}")
    for r in results:
        print(f"{r['name']:48s} {r['rows']:>10,d} {r['source_bytes'] / 2**20:>8.0f} {r['wall_s']:>7.1f} {r['rows'] / r['wall_s']:>10,.0f} {r['peak_rss_mib']:>9.0f}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    if failed:
        print(f"peak RSS above {a.limit_mib:.0f} MiB", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
