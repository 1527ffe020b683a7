"""The store manifest: what a dataset store holds, kept in the store and as ``manifest.json``.

One typed schema (:class:`Manifest`, a :class:`msgspec.Struct`) decodes the manifest
with strict types; :func:`validate_manifest` then checks what types cannot say (the
shard bounds partition ``[0, n_rows)``, class counts add up, one entry per shard).
Every malformed manifest is one :class:`~dpipe.exceptions.StoreError` naming the
store and the field.

Schema versions: 1 (dpipe <= 0.1, no checksums) is still read; 2 adds ``shards``,
one :class:`ShardRecord` per shard with its row count, class counts and a content
hash of every array (see :mod:`dpipe.io._checksum`); 3 adds the feature ``layout``
(``dense`` or ``csr``) and, for CSR stores, the stored values of every shard
(``shard_nnz``). Schema 1 and 2 stores are dense and still read.

Wide stores (schema 3, more than :data:`dpipe._wide.INLINE_MAX` features) keep their
feature names out of the manifest, so that opening a store of 10^6 features does not
parse and compare 10^6 strings twice: names that follow a pattern (svmlight's ``f1 ..
fd``, hashed or generated features) are written as ``{"prefix", "start", "count"}``, any
other list in ``feature_names.json`` beside the manifest, referred to as ``{"file",
"sha256", "count"}`` and checked against its hash when read. A decoded :class:`Manifest`
always holds the full list.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

from .._formats import STORE_MANIFEST_NAME, STORE_SCHEMA_VERSIONS
from .._locks import before_rename
from .._modes import set_default_mode
from .._wide import INLINE_MAX, NamePattern, compact_names, expand_names
from ..exceptions import StoreError
from ..reduce._block import LAYOUTS
from ._checksum import CHECKSUM_ALGORITHM

__all__ = [
    "Manifest", "ShardRecord", "SCHEMA_VERSION", "READABLE_SCHEMA_VERSIONS", "MANIFEST_NAME",
    "write_manifest", "decode_manifest", "validate_manifest", "canonical_json", "write_json_atomic",
    "stored_feature_names", "FEATURE_NAMES_FILE",
]

SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = STORE_SCHEMA_VERSIONS
MANIFEST_NAME = STORE_MANIFEST_NAME
#: a wide store's irregular feature names, beside the manifest
FEATURE_NAMES_FILE = "feature_names.json"

_HEX128 = re.compile(r"[0-9a-f]{32}")


class ShardRecord(msgspec.Struct, kw_only=True):
    """What the writer saw of one shard: rows, class counts, content hash per array.

    Attributes
    ----------
    rows : int
    class_counts : [n_negative, n_positive]
    digests : dict
        Array name (``X``, ``y``, ``group``, ``weight``) -> xxh3_128 hex digest of its decoded values.
    """

    rows: int
    class_counts: list[int]
    digests: dict[str, str]


class Manifest(msgspec.Struct, kw_only=True):
    """Description of a sharded dataset store.

    Attributes
    ----------
    format : {"zarr", "parquet"}
        Storage format of the shards.
    n_rows, n_features : int
        Shape of the feature matrix ``X``.
    feature_names : list of str
        One name per column of ``X``.
    shard_bounds : list of [start, stop]
        Row range of every shard, in order; shards cover ``0..n_rows``.
    class_counts : list of [n_negative, n_positive]
        Class counts of every shard (labels are -1 / +1; ``[0, 0]`` in an unlabelled store).
    labelled : bool
        False for a store ingested without labels (``--unlabeled``: its ``y`` is all 0):
        a pool for churn or coverage constraints, or rows to score.
    groups : list of str or None
        Names of the group codes stored in the ``group`` column (code = index).
    group_column : str or None
        Source column the groups come from.
    group_counts : list of list of int or None
        Per shard, the number of rows of every group.
    has_weight : bool
        Whether the store has a ``weight`` column.
    source : dict
        Source path, format, sha256 and the ingest options.
    encoding : dict
        How source rows become features: label rule, categorical vocabularies,
        column layout. ``--like`` ingests reuse it so columns line up.
    created : str
        ISO 8601 creation time (UTC).
    dpipe_version : str
        Version of dpipe that wrote the store.
    schema_version : int
        Version of this manifest's layout (1: no checksums; 2: ``shards``).
    shards : list of ShardRecord or None
        Schema 2: per shard, rows, class counts and content hashes.
    checksum_algorithm : str or None
        Schema 2: ``"xxh3_128"``.
    layout : str
        A name in :data:`dpipe.reduce._block.LAYOUTS` (today ``"dense"`` or ``"csr"``).
        Schema 3: how the features are stored: a dense ``(n, d)`` float32 array, or CSR
        (row offsets, int32 column indices and float32 values; see :mod:`dpipe.io._store`).
    shard_nnz : list of int or None
        Schema 3, CSR stores: stored values per shard (what the memory model counts).
    feature_names_stored : dict or None
        How a wide store writes its ``feature_names`` (a pattern or a file reference; see
        the module docstring); None: the list itself. Not a field of the JSON.
    """

    format: Literal["zarr", "parquet"]
    n_rows: int
    n_features: int
    feature_names: Sequence[str]  # a list, or a wide store's :class:`~dpipe._wide.NamePattern` (its names made when asked for)
    shard_bounds: list[list[int]]
    class_counts: list[list[int]]
    labelled: bool = True
    groups: list[str] | None = None
    group_column: str | None = None
    group_counts: list[list[int]] | None = None
    has_weight: bool = False
    source: dict[str, Any] = msgspec.field(default_factory=dict)
    encoding: dict[str, Any] = msgspec.field(default_factory=dict)
    created: str = ""
    dpipe_version: str = ""
    schema_version: int = SCHEMA_VERSION
    shards: list[ShardRecord] | None = None
    checksum_algorithm: str | None = None
    layout: str = "dense"  # a name in reduce._block.LAYOUTS (checked below), so a new layout is not declared here again
    shard_nnz: list[int] | None = None
    feature_names_stored: dict[str, Any] | None = None

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return len(self.shard_bounds)

    @property
    def n_positive(self) -> int:
        """Rows with label +1."""
        return int(sum(c[1] for c in self.class_counts))

    @property
    def n_negative(self) -> int:
        """Rows with label -1."""
        return int(sum(c[0] for c in self.class_counts))

    @property
    def nnz(self) -> int:
        """Stored feature values: every entry of a dense store, the non-zeros of a CSR store."""
        return int(sum(self.shard_nnz)) if self.shard_nnz is not None else self.n_rows * self.n_features

    @property
    def has_checksums(self) -> bool:
        """Whether per-shard content hashes are recorded (schema 2)."""
        return self.shards is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON dictionary (a schema-1 manifest keeps its old layout, so its digest is unchanged)."""
        d = msgspec.to_builtins(self, enc_hook=_pattern_json)
        stored = d.pop("feature_names_stored", None)
        if stored is not None:
            d["feature_names"] = stored
        if self.schema_version < 3:
            d.pop("layout", None)
            d.pop("shard_nnz", None)
        if self.schema_version < 2:
            d.pop("shards", None)
            d.pop("checksum_algorithm", None)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "manifest") -> Manifest:
        """Decode and validate a dictionary (strict types, then :func:`validate_manifest`)."""
        return decode_manifest(d, where)

    def digest(self) -> str:
        """sha256 of the canonical JSON form; models record it to name their training data."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()

    @staticmethod
    def now() -> str:
        """Current UTC time in ISO 8601."""
        return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _pattern_json(obj: Any) -> Any:
    """A :class:`~dpipe._wide.NamePattern` in :meth:`Manifest.to_dict`: its compact form (replaced by ``feature_names_stored``)."""
    if isinstance(obj, NamePattern):
        return obj.to_json()
    raise NotImplementedError(f"cannot write a {type(obj).__name__}")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces): two manifests agree when these are equal."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _field_of(error: msgspec.ValidationError) -> tuple[str, str]:
    """(field path without ``$.``, message) of a msgspec validation error."""
    text = str(error)
    m = re.search(r" - at `\$\.?(.*)`$", text)
    if m:
        return m.group(1) or "(top level)", text[: m.start()]
    m = re.match(r"Object missing required field `(.*)`$", text)
    if m:
        return m.group(1), "missing (required)"
    return "(top level)", text


def stored_feature_names(names: Sequence[str], schema_version: int = SCHEMA_VERSION) -> dict[str, Any] | None:
    """How a manifest of this schema writes ``names``: None (the list), a pattern, or a reference to ``feature_names.json``."""
    if schema_version < 3 or len(names) <= INLINE_MAX:
        return None
    compact = compact_names(names)
    if isinstance(compact, dict):
        return compact
    return {"file": FEATURE_NAMES_FILE, "sha256": hashlib.sha256(canonical_json(names).encode()).hexdigest(), "count": len(names)}


def _expand_feature_names(raw: dict[str, Any], where: str, directory: str | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``raw`` with its compact ``feature_names`` expanded to the list, and the compact form (None when it was a list)."""
    value = raw.get("feature_names")
    if "feature_names_stored" in raw:
        raise StoreError(f"{where}: manifest field feature_names_stored: not a field of the JSON")
    if not isinstance(value, dict):
        return raw, None
    if raw.get("schema_version", 0) < 3:
        raise StoreError(f"{where}: manifest field feature_names: a list in a schema_version {raw.get('schema_version')} manifest, got an object")
    if set(value) == {"file", "sha256", "count"}:
        if directory is None:
            raise StoreError(f"{where}: manifest field feature_names: in {value.get('file')!r}, which is read with the store (open the store)")
        fn = os.path.join(directory, str(value["file"]))
        if os.path.basename(fn) != FEATURE_NAMES_FILE:
            raise StoreError(f"{where}: manifest field feature_names: file must be {FEATURE_NAMES_FILE!r}, got {value['file']!r}")
        try:
            with open(fn, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            raise StoreError(f"{where}: {FEATURE_NAMES_FILE} (the feature names) is missing") from None
        names = msgspec.json.decode(text)
        if not isinstance(names, list) or hashlib.sha256(canonical_json(names).encode()).hexdigest() != value["sha256"]:
            raise StoreError(f"{where}: {FEATURE_NAMES_FILE} differs from the hash recorded in the manifest (changed or replaced since)")
        return {**raw, "feature_names": names}, value
    try:
        return {**raw, "feature_names": expand_names(value, f"{where}: manifest field feature_names")}, value
    except ValueError as exc:
        raise StoreError(str(exc)) from None


def decode_manifest(raw: Any, where: str, directory: str | None = None) -> Manifest:
    """Decode a manifest from JSON text/bytes or an already parsed object, then validate it.

    ``where`` names the store in error messages; ``directory``, the store's folder, is where a
    wide store's ``feature_names.json`` is read from.
    """
    if isinstance(raw, (bytes, str)):
        try:
            raw = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise StoreError(f"{where}: manifest is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise StoreError(f"{where}: manifest is a JSON {_json_kind(raw)}, expected an object")
    version = raw.get("schema_version")
    if type(version) is not int or version not in READABLE_SCHEMA_VERSIONS:
        raise StoreError(f"{where}: manifest field schema_version: unsupported value {version!r} (this dpipe reads {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})")
    raw, stored = _expand_feature_names(raw, where, directory)
    names = raw.get("feature_names")
    try:
        if isinstance(names, NamePattern):  # checked as a pattern; the Struct holds it as it is
            m = msgspec.structs.replace(msgspec.convert({**raw, "feature_names": [], "feature_names_stored": stored}, Manifest, strict=True), feature_names=names)
        else:
            m = msgspec.convert({**raw, "feature_names_stored": stored} if stored is not None else raw, Manifest, strict=True)
    except msgspec.ValidationError as exc:
        field, msg = _field_of(exc)
        raise StoreError(f"{where}: manifest field {field}: {msg}") from None
    validate_manifest(m, where)
    return m


def _json_kind(v: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}.get(type(v), type(v).__name__)


def validate_manifest(m: Manifest, where: str) -> None:
    """Check what the types cannot: counts, the shard partition, one entry per shard."""
    def bad(field: str, msg: str) -> StoreError:
        return StoreError(f"{where}: manifest field {field}: {msg}")

    _check_partition(m, bad)
    _check_counts(m, bad)
    _check_layout(m, bad)
    if m.schema_version == 1:
        if m.shards is not None:
            raise bad("shards", "present in a schema_version 1 manifest")
        return
    _check_shard_records(m, bad)


_Bad = Callable[[str, str], StoreError]


def _per_shard(m: Manifest, bad: _Bad, field: str, values: list | None) -> None:
    """A per-shard field (when present) has one entry per shard."""
    if values is not None and len(values) != m.n_shards:
        raise bad(field, f"{len(values)} entries for {m.n_shards} shards (shard_bounds)")


def _check_partition(m: Manifest, bad: _Bad) -> None:
    """The sizes, and the shard bounds partitioning [0, n_rows) in order."""
    if m.n_rows < 0:
        raise bad("n_rows", f"must be >= 0, got {m.n_rows}")
    if m.n_features < 0:
        raise bad("n_features", f"must be >= 0, got {m.n_features}")
    if len(m.feature_names) != m.n_features:
        raise bad("feature_names", f"{len(m.feature_names)} names for n_features = {m.n_features}")
    prev = 0
    for i, b in enumerate(m.shard_bounds):
        if len(b) != 2 or b[0] != prev or b[1] < b[0]:
            raise bad(f"shard_bounds[{i}]", f"expected [start, stop] with start = previous stop ({prev}) and stop >= start, got {b}"
                      " (shard bounds must partition [0, n_rows) in order)")
        prev = b[1]
    if prev != m.n_rows:
        raise bad("shard_bounds", f"shards cover rows 0..{prev}, n_rows is {m.n_rows} (a shard is missing or n_rows is wrong)")


def _check_counts(m: Manifest, bad: _Bad) -> None:
    """Each shard's class and group counts add up to its rows (an unlabelled store's class counts are zeros)."""
    _per_shard(m, bad, "class_counts", m.class_counts)
    for i, (c, (start, stop)) in enumerate(zip(m.class_counts, m.shard_bounds)):
        if not m.labelled:
            if list(c) != [0, 0]:
                raise bad(f"class_counts[{i}]", f"expected [0, 0] in an unlabelled store, got {c}")
        elif len(c) != 2 or min(c) < 0 or sum(c) != stop - start:
            raise bad(f"class_counts[{i}]", f"expected [n_negative, n_positive] adding up to the shard's {stop - start} rows, got {c}")
    _per_shard(m, bad, "group_counts", m.group_counts)
    if m.group_counts is not None:
        k = len(m.groups) if m.groups is not None else (len(m.group_counts[0]) if m.group_counts else 0)
        for i, (c, (start, stop)) in enumerate(zip(m.group_counts, m.shard_bounds)):
            if len(c) != k or min(c, default=0) < 0 or sum(c) != stop - start:
                raise bad(f"group_counts[{i}]", f"expected {k} non-negative counts adding up to the shard's {stop - start} rows, got {c}")


def _check_layout(m: Manifest, bad: _Bad) -> None:
    """A sparse layout's store (CSR) counts each shard's stored values; a dense one (every store before schema 3) does not."""
    if m.schema_version < 3 and (m.layout != "dense" or m.shard_nnz is not None):
        raise bad("layout", f"a schema_version {m.schema_version} store is dense (layout and shard_nnz came with schema 3)")
    if m.layout not in LAYOUTS:
        raise bad("layout", f"must be one of {tuple(LAYOUTS)}, got {m.layout!r}")
    if LAYOUTS[m.layout].block.sparse:
        if m.shard_nnz is None:
            raise bad("shard_nnz", f"missing (required by layout {m.layout})")
        _per_shard(m, bad, "shard_nnz", m.shard_nnz)
        for i, k in enumerate(m.shard_nnz):
            if k < 0:
                raise bad(f"shard_nnz[{i}]", f"must be >= 0, got {k}")
    elif m.shard_nnz is not None:
        raise bad("shard_nnz", "present in a dense store")


def _check_shard_records(m: Manifest, bad: _Bad) -> None:
    """Schema 2 and later: one record a shard, agreeing with the bounds and counts, with a digest of each of its arrays."""
    if m.shards is None:
        raise bad("shards", f"missing (required by schema_version {m.schema_version})")
    if m.checksum_algorithm != CHECKSUM_ALGORITHM:
        raise bad("checksum_algorithm", f"expected {CHECKSUM_ALGORITHM!r}, got {m.checksum_algorithm!r}")
    _per_shard(m, bad, "shards", m.shards)
    want = {"X", "y"} | ({"group"} if m.group_counts is not None else set()) | ({"weight"} if m.has_weight else set())
    for i, (r, (start, stop), c) in enumerate(zip(m.shards, m.shard_bounds, m.class_counts)):
        if r.rows != stop - start:
            raise bad(f"shards[{i}].rows", f"{r.rows} rows, shard_bounds[{i}] = [{start}, {stop}] has {stop - start}")
        if r.class_counts != c:
            raise bad(f"shards[{i}].class_counts", f"{r.class_counts} disagrees with class_counts[{i}] = {c}")
        if set(r.digests) != want:
            raise bad(f"shards[{i}].digests", f"arrays {sorted(r.digests)}, the store has {sorted(want)}")
        for name, h in r.digests.items():
            if not _HEX128.fullmatch(h):
                raise bad(f"shards[{i}].digests.{name}", f"expected 32 lowercase hex digits, got {h!r}")


def write_json_atomic(path: str, obj: Any, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file in the same directory and a rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=indent)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        set_default_mode(tmp)  # the user's umask, not mkstemp's 0600
        before_rename(path)  # no signal received, and the lock of path (when this process holds it) still its own
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_manifest(directory: str, manifest: Manifest) -> None:
    """Write ``manifest.json`` into ``directory`` (temporary file + rename), and ``feature_names.json`` first when the
    manifest refers to it."""
    stored = manifest.feature_names_stored
    if stored is not None and "file" in stored:
        write_json_atomic(os.path.join(directory, FEATURE_NAMES_FILE), list(manifest.feature_names), indent=None)
    write_json_atomic(os.path.join(directory, MANIFEST_NAME), manifest.to_dict())


def read_manifest_raw(directory: str) -> bytes:
    """Bytes of ``manifest.json`` of the store at ``directory``."""
    path = os.path.join(directory, MANIFEST_NAME)
    if not os.path.isdir(directory):
        raise StoreError(f"{directory}: no such store (not a directory)")
    if not os.path.exists(path):
        raise StoreError(f"{directory}: not a dpipe store ({MANIFEST_NAME} is missing)")
    with open(path, "rb") as f:
        return f.read()

