"""Fixtures of the ingest tests: source files on disk and the no-leftovers check."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest


def _write(path: Path, data: str | bytes, compression: str | None = None) -> str:
    raw = data.encode() if isinstance(data, str) else data
    if compression == "gz":
        path = path.with_name(path.name + ".gz")
        raw = gzip.compress(raw)
    elif compression == "bz2":
        path = path.with_name(path.name + ".bz2")
        raw = bz2.compress(raw)
    elif compression is not None:
        raise ValueError(compression)
    path.write_bytes(raw)
    return str(path)


@pytest.fixture
def write_source(tmp_path):
    """``write_source(name, text, compression=None)`` writes a source file under tmp_path and returns its path."""

    def write(name: str, data: str | bytes, compression: str | None = None) -> str:
        return _write(tmp_path / name, data, compression)

    return write


@pytest.fixture
def assert_clean():
    """``assert_clean(dest)``: nothing at ``dest`` and no ``.tmp-`` sibling left behind."""

    def check(dest) -> None:
        dest = Path(dest)
        assert not dest.exists(), f"{dest} exists after a failed ingest"
        leftovers = [p.name for p in dest.parent.iterdir() if ".tmp-" in p.name]
        assert not leftovers, f"temporary directories left behind: {leftovers}"

    return check
