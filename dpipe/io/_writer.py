"""Write a sharded dataset store safely, in any store format (:mod:`dpipe.io._store_format`).

The store is written into a temporary sibling of its destination and renamed into
place by :meth:`ShardWriter.commit`; a failure at any point removes the temporary
directory, so a half-written store is never left behind. The writer holds the
destination's lock (:func:`dpipe._locks.destination_lock`) throughout: one writer per
destination, and only a holder removes what a killed writer left.

Every shard's row count, class counts and a content hash of each array's decoded
values (:mod:`dpipe.io._checksum`) go into the manifest (schema 2). The format lays the
arrays down (:meth:`~dpipe.io._store_format.StoreFormat.sink`) with its own protection
against moved or lost pieces: Zarr writes every chunk's file, Parquet records each part's
position in its metadata.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, Literal, cast

import numpy as np

from .._config import get_setting
from .._locks import before_rename, destination_lock, hold_temporary, release_temporary
from .._output import check_not_inside
from .._wide import NamePattern
from .._written import check_store_replaceable, is_dpipe_store
from ..exceptions import DPipeError, ParameterError, StoreError
from ..reduce._block import LAYOUTS, block_nnz, concat_rows
from ._checksum import CHECKSUM_ALGORITHM, shard_digests
from ._ingest_options import STORE_FORMATS
from ._manifest import SCHEMA_VERSION, Manifest, ShardRecord, stored_feature_names, write_manifest
from ._store_format import store_format

log = logging.getLogger("dpipe.io")

__all__ = ["ShardWriter", "STORE_FORMATS", "default_shard_rows", "shard_rows_for", "prepare_destination", "store_lock"]


def default_shard_rows(n_features: int, target_bytes: int, nnz_per_row: float | None = None) -> int:
    """Rows per shard so that a shard of float32 features is about ``target_bytes``: ``4 d`` bytes a
    dense row, ``8 nnz + 8`` a CSR row (``nnz_per_row``: its mean stored values)."""
    per_row = 8 * nnz_per_row + 8 if nnz_per_row is not None else 4 * n_features
    return max(1024, int(target_bytes // max(1, per_row)))


#: Splitting a small store for ``dpipe.min-shards`` never makes shards below this many rows.
MIN_SPREAD_ROWS = 8192


def shard_rows_for(n_rows: int, n_features: int, balance: bool = True, nnz_per_row: float | None = None) -> int:
    """Default rows per shard for a store of ``n_rows``: about ``dpipe.shard-bytes`` per
    shard, and at least ``dpipe.min-shards`` shards when every shard keeps at least
    8192 rows, so that a small store still gives every worker of a small cluster work.
    With ``balance`` (``n_rows`` is exact) the shards are of (nearly) equal size: the last
    one is shorter by fewer rows than there are shards. A CSR store (``nnz_per_row``) is
    sized by the bytes of its stored values.
    """
    by_bytes = default_shard_rows(n_features, int(get_setting("shard-bytes")), nnz_per_row)
    spread = max(MIN_SPREAD_ROWS, -(-n_rows // max(1, int(get_setting("min-shards")))))
    rows = max(1, min(by_bytes, spread, n_rows))
    # as many shards as that takes, of equal size: 2e6 rows at 133,333 a shard are 16 shards of
    # 125,000, not 15 full ones and a last shard of 5 rows
    return max(1, -(-n_rows // -(-n_rows // rows))) if balance and n_rows > 0 else rows


def store_lock(dest: str | os.PathLike) -> contextlib.AbstractContextManager[str]:
    """:func:`dpipe._locks.destination_lock` on the store ``dest`` (a missing parent directory is a :class:`StoreError`;
    a ``dest`` inside a dpipe store or a dpipe model registry is refused before anything is created).

    Hold it from :func:`prepare_destination` to :meth:`ShardWriter.commit`; a :class:`ShardWriter`
    created inside re-enters it.
    """
    dest = os.path.abspath(os.fspath(dest))
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        raise StoreError(f"{dest}: parent directory {parent} does not exist")
    check_not_inside(dest, "store")  # before the lock file is created next to dest
    return destination_lock(dest, "store")


def prepare_destination(dest: str, overwrite: bool) -> None:
    """Refuse an existing destination unless ``overwrite`` and it is a dpipe store; check the parent exists and
    that ``dest`` lies neither inside a dpipe store nor inside a dpipe model registry.

    Takes :func:`dpipe._locks.destination_lock` on ``dest`` for a moment unless this thread
    holds it (a writer holds it from this check to its final rename), which removes the
    ``.DEST.tmp-*`` / ``.DEST.old-*`` siblings a killed run left behind and fails at once
    when another process is writing ``dest``.
    """
    dest = os.path.abspath(dest)
    with store_lock(dest):  # the parent exists, dest is inside no store and no registry
        if os.path.lexists(dest):
            if not overwrite:
                raise StoreError(f"{dest}: destination exists; pass overwrite=True to replace it")
            if not is_dpipe_store(dest):
                raise StoreError(f"{dest}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with overwrite=True")
            check_store_replaceable(dest)  # a user's file inside the store: refused before the work


class ShardWriter:
    """Accumulate rows and write them as fixed-size shards.

    Parameters
    ----------
    dest : str
        Path of the store to create.
    n_features : int
        Number of feature columns.
    feature_names : list of str
        Names of the feature columns.
    shard_rows : int
        Rows per shard (the last shard may be shorter).
    format : {"zarr", "parquet"}
        Storage format.
    with_group, with_weight : bool
        Whether ``group`` (int16 codes) and ``weight`` (float32) columns are written.
    overwrite : bool
        Replace an existing ``dest`` on commit.
    labelled : bool
        False: an unlabelled store (every ``y`` must be 0; the manifest says ``labelled: false``).
    layout : {"dense", "csr"}
        How the features are stored (:mod:`dpipe.io._store`); rows of either layout are
        accepted and converted.

    Notes
    -----
    Use as a context manager; leaving the block with an exception discards everything.
    The writer holds :func:`dpipe._locks.destination_lock` on ``dest`` from its creation
    (before :func:`prepare_destination`) until :meth:`commit` has renamed the store into
    place or :meth:`abort` has removed the temporary: a second writer of ``dest`` fails at
    once. An OS error while writing (a full disk, a file-size limit) is a
    :class:`~dpipe.exceptions.StoreError` naming ``dest``, the temporary removed.
    """

    def __init__(
        self,
        dest: str,
        n_features: int,
        feature_names: Sequence[str],
        shard_rows: int,
        format: str = "zarr",
        with_group: bool = False,
        with_weight: bool = False,
        overwrite: bool = False,
        labelled: bool = True,
        layout: str = "dense",
    ) -> None:
        if layout not in LAYOUTS:
            raise ParameterError(f"The 'layout' parameter of ShardWriter must be one of {tuple(LAYOUTS)}. Got {layout!r} instead.")
        if format not in STORE_FORMATS:
            raise ParameterError(f"The 'format' parameter of ShardWriter must be one of {STORE_FORMATS}. Got {format!r} instead.")
        if shard_rows < 1:
            raise ParameterError(f"The 'shard_rows' parameter of ShardWriter must be an int in the range [1, inf]. Got {shard_rows!r} instead.")
        self.dest = os.path.abspath(dest)
        self.tmp: str | None = None
        self._tmp_hold: int | None = None  # an flock on the temporary: another writer's stale-sibling sweep leaves it alone
        self._lock = contextlib.ExitStack()
        self._done = False
        try:
            self._lock.enter_context(store_lock(self.dest))  # free when the caller holds it already
            prepare_destination(self.dest, overwrite)
            self.overwrite = overwrite
            self.format = cast(Literal["zarr", "parquet"], format)  # checked against STORE_FORMATS above
            self.n_features = int(n_features)
            self.feature_names = feature_names if isinstance(feature_names, NamePattern) else list(feature_names)  # a pattern stays one
            self.shard_rows = int(shard_rows)
            self.with_group = with_group
            self.with_weight = with_weight
            self.labelled = bool(labelled)
            self.layout = layout  # checked against LAYOUTS above
            parent = os.path.dirname(self.dest)
            with self._writing():
                self.tmp = self._tmp = tempfile.mkdtemp(  # _tmp: the same path, typed str for the writing methods
                    prefix="." + os.path.basename(self.dest) + ".tmp-", dir=parent)
                self._start(format, with_group, with_weight)
                # after the sink made its files (zarr's mode "w" makes the directory anew): the directory as it stays
                self._tmp_hold = hold_temporary(self._tmp)
                self._tmp_identity = os.stat(self._tmp)
        except BaseException:  # an interruption before the ``with`` block: nothing left behind
            self.abort()
            raise

    def _start(self, format: str, with_group: bool, with_weight: bool) -> None:
        self._buf: list[tuple[np.ndarray, ...]] = []
        self._buf_rows = 0
        self.n_rows = 0
        self.shard_bounds: list[list[int]] = []
        self.class_counts: list[list[int]] = []
        self.group_counts: list[np.ndarray] = []
        self.shard_records: list[ShardRecord] = []
        self.shard_nnz: list[int] = []
        self.nnz = 0
        self._sink = store_format(format, self.dest).sink(self._tmp, self.n_features, self.shard_rows, self.layout, with_group, with_weight)

    # -- context manager ---------------------------------------------------------
    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or not self._done:
            self.abort()

    def abort(self) -> None:
        """Remove the temporary directory and release ``dest``; nothing is left at ``dest``."""
        try:
            if self.tmp is not None and not self._done and self._still_mine():
                shutil.rmtree(self.tmp, ignore_errors=True)
                if os.path.lexists(self.tmp):  # a file was still being added: once more
                    shutil.rmtree(self.tmp, ignore_errors=True)
        finally:
            self._done = True
            release_temporary(self._tmp_hold)
            self._tmp_hold = None
            self._unlock()

    def _still_mine(self) -> bool:
        """Whether the path of the temporary is still the directory this writer made (not removed, nor another's since)."""
        identity = getattr(self, "_tmp_identity", None)
        if identity is None:  # still being made (mkdtemp, then the sink's files): this writer's own
            return True
        try:
            return os.path.samestat(os.stat(self._tmp, follow_symlinks=False), identity)
        except OSError:  # removed
            return False

    def _check_temporary(self) -> None:
        """Before the final rename: the temporary is still the directory this writer made and holds every shard it wrote."""
        if not self._still_mine():
            raise StoreError(f"{self.dest}: the temporary {self._tmp} this writer filled was removed or replaced while it wrote "
                             f"({len(self.shard_bounds)} shard(s) lost); nothing was renamed into place (ingest again)")
        self._sink.check_written(self.n_rows, self.nnz, f"{self.dest} (temporary {os.path.basename(self._tmp)})")

    def _unlock(self) -> None:
        self._lock.close()  # idempotent

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """An OS error while writing (a full disk, a file-size limit, an I/O error): the temporary removed, one line naming ``dest``."""
        try:
            yield
        except OSError as exc:
            if isinstance(exc, DPipeError):
                raise
            self.abort()
            raise StoreError(f"{self.dest}: cannot write the store: {exc.strerror or exc or type(exc).__name__}") from exc

    # -- writing -----------------------------------------------------------------
    def _as_layout(self, X: Any) -> Any:
        """Rows (of any layout) in this store's layout, float32 (the layout's block converts them)."""
        return LAYOUTS[self.layout].block.of(X).array

    def append(self, X: Any, y: np.ndarray, group: np.ndarray | None = None, weight: np.ndarray | None = None) -> None:
        """Add rows (dense or CSR); full shards are written as soon as they are complete."""
        X = self._as_layout(X)
        y = np.asarray(y, dtype=np.int8)
        if len(X.shape) != 2 or X.shape[1] != self.n_features or X.shape[0] != y.shape[0]:
            raise StoreError(f"{self.dest}: rows of shape {X.shape} / labels {y.shape} do not match {self.n_features} features")
        parts: tuple[np.ndarray, ...] = (X, y)
        if self.with_group:
            parts += (np.asarray(group, dtype=np.int16),)
        if self.with_weight:
            parts += (np.asarray(weight, dtype=np.float32),)
        self._buf.append(parts)
        self._buf_rows += X.shape[0]
        while self._buf_rows >= self.shard_rows:
            self._flush(self.shard_rows)

    def _take(self, rows: int) -> list[Any]:
        cols = [concat_rows([b[0] for b in self._buf], self.n_features, self.layout)]
        cols += [np.concatenate([b[k] for b in self._buf]) for k in range(1, len(self._buf[0]))]
        head = [c[:rows] for c in cols]
        tail = tuple(c[rows:] for c in cols)
        self._buf = [tail] if tail[0].shape[0] else []
        self._buf_rows -= rows
        return head

    def _flush(self, rows: int) -> None:
        cols = self._take(rows)
        self.write_shard(*cols)

    def write_shard(self, X: Any, y: np.ndarray, group: np.ndarray | None = None, weight: np.ndarray | None = None) -> None:
        """Write exactly one shard (it may be empty or of any size; dense or CSR rows)."""
        with self._writing():
            self._write_shard(X, y, group, weight)

    def _write_shard(self, X: Any, y: np.ndarray, group: np.ndarray | None, weight: np.ndarray | None) -> None:
        X = self._as_layout(X)
        y = np.asarray(y, dtype=np.int8)
        if X.shape[0] != y.shape[0] or X.shape[1] != self.n_features:
            raise StoreError(f"{self.dest}: rows of shape {X.shape} / labels {y.shape} do not match {self.n_features} features")
        bad = ~np.isin(y, (-1, 1)) if self.labelled else y != 0
        if bad.any():
            row = self.n_rows + int(np.argmax(bad))
            raise StoreError(f"{self.dest}: label {int(y[bad][0])} at row {row} is not -1 or +1" if self.labelled
                             else f"{self.dest}: label {int(y[bad][0])} at row {row} in an unlabelled store (expected 0)")
        start, stop = self.n_rows, self.n_rows + X.shape[0]
        index = len(self.shard_bounds)
        group = np.asarray(group, dtype=np.int16) if self.with_group else None
        weight = np.asarray(weight, dtype=np.float32) if self.with_weight else None
        digests = shard_digests(index, start, stop, X, y, group, weight)
        nnz = block_nnz(X)
        self._sink.write(index, start, stop, X, y, group, weight)
        counts = [int((y == -1).sum()), int((y == 1).sum())]
        self.shard_bounds.append([start, stop])
        self.class_counts.append(counts)
        self.shard_records.append(ShardRecord(rows=stop - start, class_counts=list(counts), digests=digests))
        self.shard_nnz.append(nnz)
        self.nnz += nnz
        if self.with_group:
            self.group_counts.append(np.bincount(np.asarray(group, dtype=np.int64), minlength=0))
        self.n_rows = stop

    def commit(self, **manifest_fields: Any) -> Manifest:
        """Write the last partial shard and the manifest, then rename into place.

        Keyword arguments become manifest fields (``source``, ``encoding``,
        ``groups``, ``group_column``).
        """
        with self._writing():
            return self._commit(manifest_fields)

    def _commit(self, manifest_fields: dict[str, Any]) -> Manifest:
        from .._version import __version__

        if self._buf_rows:
            self._flush(self._buf_rows)
        groups = manifest_fields.pop("groups", None)
        group_counts = None
        if self.with_group:
            k = len(groups) if groups is not None else max((len(c) for c in self.group_counts), default=0)
            group_counts = [np.pad(c, (0, max(0, k - len(c))))[:k].astype(int).tolist() for c in self.group_counts]
        manifest = Manifest(
            format=self.format,
            n_rows=self.n_rows,
            n_features=self.n_features,
            feature_names=self.feature_names,
            shard_bounds=self.shard_bounds,
            class_counts=self.class_counts,
            labelled=self.labelled,
            groups=groups,
            group_counts=group_counts,
            has_weight=self.with_weight,
            created=Manifest.now(),
            dpipe_version=__version__,
            schema_version=SCHEMA_VERSION,
            shards=self.shard_records,
            checksum_algorithm=CHECKSUM_ALGORITHM,
            layout=self.layout,
            shard_nnz=self.shard_nnz if LAYOUTS[self.layout].block.sparse else None,  # a sparse layout counts its stored values
            feature_names_stored=stored_feature_names(self.feature_names),
            **manifest_fields,
        )
        self._sink.finish(manifest)
        write_manifest(self._tmp, manifest)
        from .._modes import set_default_mode

        set_default_mode(self._tmp)  # mkdtemp / mkstemp made it 0700 / 0600: give it the user's umask
        self._replace_destination()
        return manifest

    def _replace_destination(self) -> None:
        """Rename the temporary into place; an existing ``dest`` must be a dpipe store (renamed to
        ``.DEST.old-*`` and removed; a symlink is removed, never what it points to)."""
        old = None
        try:
            self._check_temporary()
            before_rename(self.dest)  # no signal received, and dest's lock still this process's
            if os.path.lexists(self.dest):
                if not self.overwrite:
                    raise StoreError(f"{self.dest}: destination appeared while writing; pass overwrite=True to replace it")
                if not is_dpipe_store(self.dest):
                    raise StoreError(f"{self.dest}: exists and is not a dpipe store (no dpipe manifest.json); refusing to replace it, even with overwrite=True")
                if os.path.islink(self.dest):
                    removing = "the symbolic link there (not the dpipe store it points to)"
                else:
                    files, size = check_store_replaceable(self.dest)  # a user's file that appeared while writing: refused
                    removing = f"the dpipe store it replaces ({files} file(s), {size / 2**20:.1f} MB)"
                old = os.path.join(os.path.dirname(self.dest), "." + os.path.basename(self.dest) + ".old-" + self._tmp[-8:])
                os.rename(self.dest, old)
                log.info("%s: removing %s", self.dest, removing)
            os.rename(self._tmp, self.dest)
            self._done = True
        except BaseException:
            if old is not None and not os.path.lexists(self.dest) and os.path.lexists(old):
                os.rename(old, self.dest)  # put the previous store back
                old = None
            self.abort()
            raise
        finally:
            if old is not None:
                if os.path.islink(old) or not os.path.isdir(old):
                    os.unlink(old)
                else:
                    shutil.rmtree(old, ignore_errors=True)
            self._unlock()


