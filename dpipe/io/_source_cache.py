"""Source files ingested once into a cache of stores, named by the file's content and the ingest options.

``dpipe retrain`` keeps its sources' stores in ``REGISTRY/data``; ``dpipe train`` / ``evaluate`` / ``predict`` given a
source file instead of a store keep them in the folder of the ``dpipe.ingest-cache`` setting (default
``$XDG_CACHE_HOME/dpipe/stores``, else ``~/.cache/dpipe/stores``). A store is named
``<file name>-<key>.zarr``, the key the sha256 of the file's xxh3-128 digest and the canonical JSON of every ingest
option (defaults filled in, a ``like`` store by its manifest's digest): new content or other options ingest again, the
same ones reuse the store. Ingest writes a temporary sibling and renames it, so the cache never holds half a store.
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any

from ..exceptions import ParameterError
from ._ingest_options import RETRAIN_SETS, ingest_defaults
from ._manifest import canonical_json

__all__ = ["file_digest", "source_digest", "resolved_ingest_options", "cached_store", "ingest_cache_folder"]

log = logging.getLogger("dpipe")


def file_digest(path: str | os.PathLike, hasher: Any) -> str:
    """The hex digest of a file's bytes by ``hasher`` (a fresh ``hashlib`` / ``xxhash`` object), read in 4 MB pieces."""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            hasher.update(chunk)
    return str(hasher.hexdigest())


def source_digest(path: str | os.PathLike) -> str:
    """xxh3-128 of a source file's bytes (names its ingested store in a cache)."""
    import xxhash

    return file_digest(path, xxhash.xxh3_128())


def resolved_ingest_options(options: dict[str, Any], *, unlabeled: bool) -> dict[str, Any]:
    """Every option of :func:`dpipe.io.ingest` as an ingest of a source with ``options`` uses it (defaults filled in,
    ``overwrite`` left out), ``like`` replaced by its store's manifest digest: what the content of the ingested store
    depends on, for a cache's key."""
    from ._store import open_store

    resolved = {k: v for k, v in ingest_defaults().items() if k not in RETRAIN_SETS}
    resolved.update(options, unlabeled=unlabeled)
    if resolved.get("like") is not None:
        resolved["like"] = {"manifest_sha256": open_store(resolved["like"], verify=False).manifest.digest()}
    return resolved


def ingest_cache_folder() -> str:
    """The folder of the stores ``train`` / ``evaluate`` / ``predict`` ingest from source files: the ``dpipe.ingest-cache``
    setting, else ``$XDG_CACHE_HOME/dpipe/stores``, else ``~/.cache/dpipe/stores``."""
    from .._config import get_setting

    folder = get_setting("ingest-cache")
    if folder:
        return os.path.expanduser(os.fspath(folder))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dpipe", "stores")


def cached_store(path: str | os.PathLike, folder: str | os.PathLike, options: dict[str, Any], *, unlabeled: bool = False,
                 who: str = "dpipe") -> tuple[str, bool]:
    """The store of source file ``path`` ingested with ``options`` in the cache ``folder``: ingested now when the cache has
    none for this content and these options, else the cached one. One log line says which (``who`` starts it).

    Parameters
    ----------
    path : path
        A source file (svmlight, CSV, Parquet; plain, .gz or .bz2).
    folder : path
        The cache folder (made when missing).
    options : dict
        Keyword arguments of :func:`dpipe.io.ingest` (``overwrite`` and ``unlabeled`` aside).
    unlabeled : bool
        Ingest without labels (a pool); another store than the labelled one of the same file.
    who : str
        The command named by the log line.

    Returns
    -------
    (str, bool)
        The store's path and whether it was already there.

    Raises
    ------
    ParameterError
        ``path`` is not a file.
    """
    from ._ingest import ingest

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ParameterError(f"{path}: no such store or source file")
    h = hashlib.sha256(source_digest(path).encode())
    h.update(canonical_json(resolved_ingest_options(options, unlabeled=unlabeled)).encode())
    dest = os.path.join(os.fspath(folder), f"{os.path.basename(path)}-{h.hexdigest()[:16]}.zarr")
    if os.path.exists(dest):
        log.info("%s: %s was ingested before with these options: reusing %s", who, path, dest)
        return dest, True
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    log.info("%s: ingesting %s -> %s (once per content and ingest options)", who, path, dest)
    ingest(path, dest, unlabeled=unlabeled, **options)  # a temporary name, then renamed: never half-written
    return dest, False
