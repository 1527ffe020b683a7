"""The store manifest: what a dataset store holds, kept in the store and as ``manifest.json``."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
from typing import Any

from ..exceptions import StoreError

__all__ = ["Manifest", "SCHEMA_VERSION", "MANIFEST_NAME", "read_manifest", "write_manifest"]

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"


@dataclasses.dataclass
class Manifest:
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
        Class counts of every shard (labels are -1 / +1).
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
        Version of this manifest's layout.
    """

    format: str
    n_rows: int
    n_features: int
    feature_names: list[str]
    shard_bounds: list[list[int]]
    class_counts: list[list[int]]
    groups: list[str] | None = None
    group_column: str | None = None
    group_counts: list[list[int]] | None = None
    has_weight: bool = False
    source: dict[str, Any] = dataclasses.field(default_factory=dict)
    encoding: dict[str, Any] = dataclasses.field(default_factory=dict)
    created: str = ""
    dpipe_version: str = ""
    schema_version: int = SCHEMA_VERSION

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

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON dictionary."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "manifest") -> Manifest:
        """Build from a dictionary, checking the schema version and required fields."""
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise StoreError(f"{where}: unsupported manifest schema_version {version!r} (this dpipe reads {SCHEMA_VERSION})")
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in d]
        if missing:
            raise StoreError(f"{where}: manifest lacks the field(s) {', '.join(missing)}")
        return cls(**{k: v for k, v in d.items() if k in names})

    def digest(self) -> str:
        """sha256 of the canonical JSON form; models record it to name their training data."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    @staticmethod
    def now() -> str:
        """Current UTC time in ISO 8601."""
        return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_manifest(directory: str, manifest: Manifest) -> None:
    """Write ``manifest.json`` into ``directory``."""
    with open(os.path.join(directory, MANIFEST_NAME), "w") as f:
        json.dump(manifest.to_dict(), f, indent=1)
        f.write("\n")


def read_manifest(directory: str) -> Manifest:
    """Read the manifest of the store at ``directory``."""
    path = os.path.join(directory, MANIFEST_NAME)
    if not os.path.isdir(directory):
        raise StoreError(f"{directory}: no such store (not a directory)")
    if not os.path.exists(path):
        raise StoreError(f"{directory}: not a dpipe store ({MANIFEST_NAME} is missing)")
    try:
        with open(path) as f:
            d = json.load(f)
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: manifest is not valid JSON ({exc})") from None
    return Manifest.from_dict(d, where=path)
