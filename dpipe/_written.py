"""What dpipe wrote: the format markers of its files and stores, and the one rule that follows from them.

Nothing dpipe did not write is ever replaced: ``overwrite`` replaces only a dpipe
store (its ``manifest.json`` parses as a dpipe manifest, :func:`is_dpipe_store`, and it
holds no file that is not part of a store, :func:`check_store_replaceable`), a
dpipe model (``"format": "dpipe-linear-model"``), a dpipe metrics file
(``"format": "dpipe-metrics"``, from ``evaluate --out``), a dpipe prediction file (Parquet
schema metadata ``dpipe.format = dpipe-predictions``), a dpipe plot (a PNG with the text
chunk ``dpipe.format = dpipe-plot``) or a demo report (``"format": "dpipe-demo-report"``):
:func:`check_replaceable`. Where an output may go is :mod:`dpipe._output`'s; one writer per
destination, :mod:`dpipe._locks`'.
"""

from __future__ import annotations

import contextlib
import json
import os
import re

import msgspec

from ._formats import MODEL_FORMAT, STORE_MANIFEST_NAME, STORE_SCHEMA_VERSIONS
from .exceptions import OutputExistsError

__all__ = ["is_dpipe_store", "is_dpipe_file", "store_contents", "check_store_replaceable", "check_replaceable", "PREDICTIONS_FORMAT_KEY",
           "PREDICTIONS_FORMAT", "METRICS_FORMAT", "METRICS_FORMAT_VERSION", "PLOT_FORMAT", "REPORT_FORMAT"]

#: Parquet schema-metadata key and value that mark a prediction file written by dpipe.
PREDICTIONS_FORMAT_KEY = "dpipe.format"
PREDICTIONS_FORMAT = "dpipe-predictions"
#: ``"format"`` of a metrics file written by ``dpipe evaluate --out FILE`` (the document ``evaluate --json`` prints).
METRICS_FORMAT = "dpipe-metrics"
#: ``"format_version"`` of that document: raised only when a field changes meaning or goes away
METRICS_FORMAT_VERSION = 1
#: the PNG text chunk ``dpipe.format`` of a plot written by :mod:`dpipe.plotting`
PLOT_FORMAT = "dpipe-plot"
#: ``"format"`` of the report ``dpipe demo`` writes
REPORT_FORMAT = "dpipe-demo-report"
#: the ``"format"`` marker of each JSON file dpipe writes
_JSON_FORMATS = {"model": MODEL_FORMAT, "metrics": METRICS_FORMAT, "report": REPORT_FORMAT}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def is_dpipe_store(path: str) -> bool:
    """Whether ``path`` is a directory whose ``manifest.json`` is a dpipe manifest: a JSON object with a
    ``schema_version`` dpipe reads and the shards' layout (``n_rows``, ``shard_bounds``). Its marker, not its
    validity: a dpipe store whose manifest was damaged is still dpipe's to replace (``dpipe verify`` judges it)."""
    manifest = os.path.join(path, STORE_MANIFEST_NAME)
    if not os.path.isdir(path) or not os.path.isfile(manifest):
        return False
    try:
        with open(manifest, "rb") as f:
            doc = json.loads(f.read())
    except (ValueError, OSError):  # not JSON, unreadable
        return False
    return isinstance(doc, dict) and doc.get("schema_version") in STORE_SCHEMA_VERSIONS and {"n_rows", "shard_bounds"} <= doc.keys()


#: the paths, relative to a store and "/"-separated, that dpipe writes in one: its manifest, a Zarr group's metadata and
#: chunks (v3 ``c/0/0``; v2 ``.zarray``, ``0.0`` for schema-1 stores), the CSR arrays under ``X``, the Parquet parts
_STORE_ARRAY = r"(?:X|y|group|weight)(?:/(?:indptr|indices|data))?"
_STORE_FILE = re.compile(rf"manifest\.json|zarr\.json|\.zgroup|\.zattrs|\.zmetadata|part-\d+\.parquet"
                         rf"|{_STORE_ARRAY}/(?:zarr\.json|\.zarray|\.zattrs|\.zgroup|c(?:/\d+)+|\d+(?:\.\d+)*)")
_STORE_DIR = re.compile(rf"{_STORE_ARRAY}(?:/c(?:/\d+)*)?")


def store_contents(path: str) -> tuple[int, int, list[str]]:
    """What replacing the dpipe store at ``path`` would remove: ``(files, bytes, foreign)``, where ``foreign`` lists
    (relative, sorted) the files, links and folders inside it that are not part of a dpipe store (a user's file)."""
    files, size, foreign = 0, 0, []
    for top, dirs, names in os.walk(path):
        rel_top = os.path.relpath(top, path).replace(os.sep, "/")
        prefix = "" if rel_top == "." else rel_top + "/"
        for d in list(dirs):
            if os.path.islink(os.path.join(top, d)) or not _STORE_DIR.fullmatch(prefix + d):
                foreign.append(prefix + d + ("" if os.path.islink(os.path.join(top, d)) else "/"))
                dirs.remove(d)  # not walked: what is in it is foreign too
        for name in names:
            fn = os.path.join(top, name)
            if os.path.islink(fn) or not _STORE_FILE.fullmatch(prefix + name):
                foreign.append(prefix + name)
                continue
            files += 1
            with contextlib.suppress(OSError):
                size += os.lstat(fn).st_size
    return files, size, sorted(foreign)


def check_store_replaceable(path: str) -> tuple[int, int]:
    """Refuse (:class:`~dpipe.exceptions.OutputExistsError`, one line naming ``path`` and the files) to replace a dpipe
    store that holds files that are not its own; return its ``(files, bytes)`` otherwise (:func:`store_contents`)."""
    files, size, foreign = store_contents(path)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputExistsError(f"{path}: the dpipe store holds {len(foreign)} file(s) that are not part of it ({shown}); refusing to replace it, "
                                "even with overwrite=True (move them out first)")
    return files, size


class _FormatMarker(msgspec.Struct):
    """The one field :func:`is_dpipe_file` reads of a JSON object (the others are skipped, not built)."""

    format: object = None


def is_dpipe_file(path: str, what: str) -> bool:
    """Whether ``path`` is a file dpipe wrote as ``what`` ("model", "metrics", "report", "predictions" or "plot"), by its format marker."""
    if not os.path.isfile(path):
        return False
    try:
        if what in _JSON_FORMATS:
            with open(path, "rb") as f:
                if f.read(64).lstrip()[:1] != b"{":  # not JSON: do not read a large foreign file
                    return False
                f.seek(0)
                text = f.read()
            # the marker alone: msgspec checks the whole document but builds nothing else (a 10^6-feature model is 21 MB)
            return msgspec.json.decode(text, type=_FormatMarker).format == _JSON_FORMATS[what]
        if what == "predictions":
            import pyarrow.parquet as pq

            meta = pq.read_schema(path).metadata or {}
            return meta.get(PREDICTIONS_FORMAT_KEY.encode()) == PREDICTIONS_FORMAT.encode()
        if what == "plot":  # matplotlib writes the text chunks before the image data
            with open(path, "rb") as f:
                head = f.read(1 << 16)
            return head.startswith(_PNG_SIGNATURE) and b"tEXtdpipe.format\x00" + PLOT_FORMAT.encode() in head
    except (ValueError, OSError, UnicodeDecodeError):  # pyarrow's ArrowInvalid and msgspec's DecodeError are ValueErrors
        return False
    return False


def check_replaceable(path: str, what: str) -> None:
    """Refuse (one line naming ``path``) to replace an existing ``path`` that dpipe did not write as ``what``."""
    if not os.path.lexists(path):
        return
    if what == "store":
        if not is_dpipe_store(path):
            raise OutputExistsError(f"{path}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with overwrite=True")
    elif what in (*_JSON_FORMATS, "predictions", "plot"):
        if not is_dpipe_file(path, what):
            marker = (f'"format": "{_JSON_FORMATS[what]}"' if what in _JSON_FORMATS else
                      f"{PREDICTIONS_FORMAT_KEY} = {PLOT_FORMAT if what == 'plot' else PREDICTIONS_FORMAT}")
            raise OutputExistsError(f"{path}: exists and is not a dpipe {what} file (no {marker}); refusing to replace it, even with overwrite=True")
