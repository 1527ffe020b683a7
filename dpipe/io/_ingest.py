"""Stream a source file (svmlight, CSV or Parquet) into a sharded store.

:func:`ingest` reads its source twice, each time in pieces of at most ``read_rows``
lines (``dpipe.read-rows``, default 65,536) and a bounded number of bytes, so memory
does not grow with the size of the source:

pass 1 (scan)
    counts rows, checks every line, finds the feature count and zero/one-based
    indexing (svmlight) or the column types and categorical vocabularies (tabular),
    collects the label values and maps them to -1 / +1, and computes the sha256 of
    the source bytes as stored (for a ``.gz`` file, of the compressed bytes);
pass 2 (encode)
    encodes every piece as dense float32 rows straight into one shard-sized buffer
    and hands each full shard to :meth:`~dpipe.io.ShardWriter.write_shard`; the
    writer builds the store in a temporary sibling of ``dest`` and renames it into
    place at the end. On any error nothing is left at ``dest`` and no temporary
    directory is left behind. Peak memory is about one shard (``dpipe.shard-bytes``,
    64 MB by default) plus a few pieces, whatever the size of the source.

Text sources may be plain, gzip (``.gz``), bzip2 (``.bz2``) or xz compressed (told
by their magic bytes). Reading and parsing run in a helper thread, overlapped with
the encoding and writing of the previous piece.

Manifest fields written by ingest
---------------------------------
``source``
    ``{"path", "format", "sha256", "bytes", "files", "options"}``: absolute path,
    source format (``"svmlight"``, ``"csv"``, ``"parquet"``), sha256 and size of the
    file (for a Parquet directory: the sha256 of the lines ``"<relative path>
    <sha256>"`` of its files and their total size), ``files`` (one
    ``{"path", "sha256", "bytes"}`` per file read) and every ingest option. When
    ``src`` is a list, ``path``, ``sha256`` and ``bytes`` are lists too.
``encoding``
    Everything needed to encode more rows the same way (``like=``) or to score
    raw rows later:

    * ``kind``: ``"svmlight"`` or ``"tabular"``;
    * ``label``: the :class:`~dpipe.io._labels.LabelRule` (``{"kind", "values"}``)
      plus ``"column"`` (tabular) and ``"classes"`` (every observed label value ->
      -1 / +1);
    * ``n_features``, ``zero_based`` (svmlight; None for tabular);
    * tabular only: ``source_format``, ``header`` (whether the first file had a
      header line), ``delimiter``, ``missing`` (values read as missing),
      ``columns`` (one ``{"name", "role", "type", "categories"}`` per source
      column, see :mod:`dpipe.io._tabular`), ``unseen`` and ``unseen_counts``
      (``{column: {value: count}}`` of categories absent from the ``like`` store,
      ``unseen="ignore"`` only).
``groups`` / ``group_column``
    Sorted vocabulary of ``group_col`` (group code = position) and its name.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._config import get_setting
from .._log import VERBOSE
from .._progress import Progress, advance
from .._transform import SCALES, FeatureTransform
from .._validation import check_choice, check_int
from ..exceptions import DataWarning, InputError, ParameterError
from ._fit_transform import check_log1p, ingest_transformed, stored_transform
from ._hashing import COLLISION_WARNING, check_hash_features
from ._ingest_jobs import OWNER, SvmlightJob, TabularJob
from ._ingest_options import INGEST_LAYOUTS, SOURCE_FORMATS, UNSEEN, ingest_defaults
from ._ingest_sources import SourceFile, detect_source_format
from ._labels import LabelRule
from ._manifest import Manifest
from ._store import open_store
from ._svmlight import MAX_INDEX
from ._writer import STORE_FORMATS, ShardWriter, prepare_destination, shard_rows_for, store_lock

__all__ = ["ingest", "SOURCE_FORMATS", "INGEST_LAYOUTS", "SPARSE_MAX_DENSITY", "detect_source_format"]

#: ``layout="auto"`` stores a source as CSR up to this fraction of non-zero entries. Measured here (``python -m bench
#: text``: numba kernels, one thread, ``X w`` + ``X^T g`` of 160 MB dense blocks, non-zeros placed uniformly): CSR takes
#: 0.25-0.65x the dense time at 5 %, 0.43-0.94x at 10 %, 0.53-0.87x at 12.5 % for d = 54-300 (1.09x at d = 30) and
#: 1.2-1.4x at 20 %; the crossing is near 15 % for d >= 54, near 11 % at d = 30, and lower for a store that fits in the
#: CPU's caches, where dense passes run twice as fast. Whole default fits: kdd99 (10.6 %) 0.77x, adult (11.2 %) 0.94x, a9a (11.3 %) 0.85x,
#: covtype (22 %) 1.4x.
SPARSE_MAX_DENSITY = 0.125

log = logging.getLogger("dpipe.ingest")

def _check_tristate(value: Any, name: str) -> bool | str:
    if value is True or value is False or value == "auto":
        return value
    raise ParameterError(f"The {name!r} parameter of {OWNER} must be True, False or 'auto'. Got {value!r} instead.")


def _check_column_spec(value: Any, name: str) -> str | int | None:
    if value is None or (isinstance(value, str) and value != ""):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ParameterError(f"The {name!r} parameter of {OWNER} must be a column name (str), a column index (int) or None. Got {value!r} instead.")


def _check_src(src: Any) -> list[str]:
    items = [src] if isinstance(src, (str, os.PathLike)) else src
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(p, (str, os.PathLike)) for p in items):
        raise ParameterError(f"The 'src' parameter of {OWNER} must be a path or a non-empty list of paths. Got {src!r} instead.")
    paths = [os.path.abspath(os.fspath(p)) for p in items]
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", path=p)
    return paths


def _open_like(like: Any) -> Manifest | None:
    if like is None:
        return None
    if not isinstance(like, (str, os.PathLike)):
        raise ParameterError(f"The 'like' parameter of {OWNER} must be the path of a store. Got {like!r} instead.")
    m = open_store(like).manifest
    if not m.encoding or m.encoding.get("kind") not in ("svmlight", "tabular"):
        raise ParameterError(f"The 'like' parameter of {OWNER} names {os.fspath(like)}, whose manifest has no ingest encoding (it was not written by ingest).")
    return m


def ingest(
    src: str | list[str],
    dest: str,
    *,
    format: str = "zarr",
    source_format: str | None = None,
    label: str | int | None = None,
    positive: Sequence[str] | str | None = None,
    negative: Sequence[str] | str | None = None,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    header: bool | str = "auto",
    skip_rows: int = 0,
    group_col: str | int | None = None,
    weight_col: str | int | None = None,
    like: str | None = None,
    unseen: str = "error",
    unlabeled: bool = False,
    log1p: str | Sequence[str | int] | None = None,
    scale: str = "none",
    shard_rows: int | None = None,
    read_rows: int | None = None,
    overwrite: bool = False,
    layout: str = "auto",
    hash_features: int | str | None = None,
) -> Manifest:
    """Stream a source file into a sharded dataset store.

    Parameters
    ----------
    src : str or list of str
        Source file (svmlight, CSV, or Parquet file / directory of ``.parquet``
        files); text files may be gzip, bzip2 or xz compressed. A list is read as
        the concatenation of its files, which must share one format and layout.
    dest : str
        Path of the store to create.
    format : {"zarr", "parquet"}
        Storage format of the store.
    source_format : {"svmlight", "csv", "parquet"}, optional
        Format of ``src``; told from its name and first lines when omitted (see
        :func:`detect_source_format`).
    label : str or int, optional
        Tabular sources: label column (name or 0-based index, negative counts from
        the end). Default: the column named ``label``, else the last column.
    positive, negative : str or sequence of str, optional
        Label values that are +1 (``positive``) or -1 (``negative``), all others
        being the other class. Comma-separated strings are split. Neither: the
        labels must be {-1, +1} or {0, 1}.
    n_features : int, optional
        svmlight: number of features (an index beyond it is an error). Default: the
        largest index seen.
    zero_based : bool or "auto"
        svmlight: whether indices start at 0. "auto": zero-based iff an index 0
        occurs (as scikit-learn does).
    header : bool or "auto"
        CSV: whether the first line (after ``skip_rows``) is a header. "auto": yes
        when a field of the first row is not a number where the second row's is.
    skip_rows : int
        Text sources: leading lines to skip (``adult.test`` needs 1).
    group_col : str or int, optional
        Tabular: column whose values become the store's int16 group codes (sorted
        vocabulary in the manifest ``groups``); it stays a feature too.
    weight_col : str or int, optional
        Tabular: column of finite, non-negative row weights (not a feature).
    like : str, optional
        Path of a store whose encoding is reused exactly: feature layout,
        vocabularies, ``n_features``, zero-basedness, label rule (unless
        ``positive``/``negative`` are given) and group vocabulary.
    unseen : {"error", "ignore"}
        With ``like``: a category absent from the ``like`` store is an error, or
        ("ignore") encoded as an all-zero one-hot block, counted in the manifest
        ``encoding["unseen_counts"]`` and reported by one :class:`DataWarning`.
        Unseen group values are always errors.
    unlabeled : bool
        The source has no labels (a pool to score, or for churn and coverage
        constraints): a tabular source has no label column (with ``like``, the
        ``like`` store's columns without its label), an svmlight source's label
        tokens are dropped. The store's ``y`` is all 0 and its manifest says
        ``labelled: false``; training and ``evaluate`` refuse it, rates that need
        labels (recall, error, ...) refuse it by name.
    log1p : "auto", "all" or list of feature names / indices, optional
        Features stored as ``log1p(x)``: the named ones, every numeric feature ("all"), or
        the heavy-tailed ones ("auto": never negative, maximum at least about 128 times
        the median on ``1 + x``; see :mod:`dpipe.io._fit_transform`, every feature's figures
        are kept in the manifest). One-hot indicators are never logged.
    scale : {"none", "minmax", "standard", "maxabs"}
        Affine map of every numeric feature (after ``log1p``), fitted on this source (a row of
        ``weight_col`` weight ``v`` counting as ``v`` repeated rows): to
        [0, 1] by minimum and maximum, to zero mean and unit variance, or divided by the
        largest absolute value (``maxabs``: zeros stay zeros, so a sparse store stays sparse). The fitted
        transform is kept in the manifest (``encoding["transform"]``); ``like=`` ingests
        re-apply it (their values may fall outside [0, 1]) and models trained on the store
        carry it, so raw rows score as stored rows do. Fitting costs one more read and
        write of the new store.
    shard_rows : int, optional
        Rows per shard. Default: about ``dpipe.shard-bytes`` of float32 features, and
        at least ``dpipe.min-shards`` shards (of at least 8192 rows each).
    read_rows : int, optional
        Rows per piece read from the source (``dpipe.read-rows``).
    overwrite : bool
        Replace an existing ``dest``.
    layout : {"auto", "dense", "sparse"}
        How the features are stored: dense float32 rows, or CSR (``sparse``: only the
        non-zero values, read and multiplied in O(nnz); see :mod:`dpipe.io._store`).
        ``auto``: the ``like`` store's layout; else the source is stored sparse when at
        most :data:`SPARSE_MAX_DENSITY` of its entries are non-zero (12.5 %: numeric values
        counted in the first pass, one per one-hot column and row; the choice is logged). A sparse store takes ``log1p`` and
        ``scale="maxabs"``, which keep zeros, and ``minmax`` when every scaled feature's
        minimum is 0 (then it only multiplies; else it is refused, naming the feature);
        ``standard`` is refused. ``minmax`` and ``standard`` make ``auto`` dense.
    hash_features : int or str, optional
        Tabular sources: hash every feature column into this many slots (an int, or
        ``"2^k"``) instead of one-hot encoding, as scikit-learn's ``FeatureHasher`` and
        Vowpal Wabbit do (signed MurmurHash3, :mod:`dpipe.io._hashing`): a numeric column
        ``c`` is the token ``"c"`` with its value, a categorical one the token ``"c=v"``
        with 1, so a column of any number of categories (identifiers, words) costs no
        vocabulary. The store is sparse; its features are ``hash0 ..``; the manifest and
        every model trained on it record the hashing (``encoding["hashing"]``, with the
        slots in use and the collision rate; a :class:`DataWarning` from
        :data:`~dpipe.io._hashing.COLLISION_WARNING` on), so that
        :meth:`~dpipe.LinearModel.score_records` hashes raw records the same way.
        ``like=`` stores reuse the ``like`` store's hashing.

    Returns
    -------
    Manifest
        The manifest of the new store (see the module docstring for ``source`` and
        ``encoding``).

    Raises
    ------
    InputError
        The source is malformed; the message names the file and line (or row and
        column).
    ParameterError
        An invalid parameter.
    StoreError
        ``dest`` exists and ``overwrite`` is False, or ``like`` is not a store.

    Warns
    -----
    DataWarning
        One class is absent, or (``unseen="ignore"``) unseen categories were met.

    Examples
    --------
    >>> ingest("kddcup.data_10_percent.gz", "kdd.zarr", negative="normal.")  # doctest: +SKIP
    """
    paths = _check_src(src)
    if not isinstance(dest, (str, os.PathLike)):
        raise ParameterError(f"The 'dest' parameter of {OWNER} must be a path. Got {dest!r} instead.")
    dest = os.path.abspath(os.fspath(dest))
    check_choice(format, "format", OWNER, STORE_FORMATS)
    check_choice(layout, "layout", OWNER, INGEST_LAYOUTS)
    if source_format is not None:
        check_choice(source_format, "source_format", OWNER, SOURCE_FORMATS)
    check_choice(unseen, "unseen", OWNER, UNSEEN)
    zero_based = _check_tristate(zero_based, "zero_based")
    header = _check_tristate(header, "header")
    skip_rows = check_int(skip_rows, "skip_rows", OWNER, 0)
    if n_features is not None:
        n_features = check_int(n_features, "n_features", OWNER, 1, MAX_INDEX + 1)
    if shard_rows is not None:
        shard_rows = check_int(shard_rows, "shard_rows", OWNER, 1)
    read_rows = check_int(get_setting("read-rows", read_rows), "read_rows", OWNER, 1)
    if not isinstance(overwrite, bool):
        raise ParameterError(f"The 'overwrite' parameter of {OWNER} must be a bool. Got {overwrite!r} instead.")
    if not isinstance(unlabeled, bool):
        raise ParameterError(f"The 'unlabeled' parameter of {OWNER} must be a bool. Got {unlabeled!r} instead.")
    if unlabeled:
        for value, name in ((label, "label"), (positive, "positive"), (negative, "negative")):
            if value is not None:
                raise ParameterError(f"The {name!r} parameter of {OWNER} names labels; unlabeled=True says the source has none.")
    label = _check_column_spec(label, "label")
    group_col = _check_column_spec(group_col, "group_col")
    weight_col = _check_column_spec(weight_col, "weight_col")
    rule = LabelRule.from_args(positive, negative, OWNER)
    like_manifest = _open_like(like)
    log1p = check_log1p(log1p, OWNER)
    check_choice(scale, "scale", OWNER, SCALES)
    hash_features = check_hash_features(hash_features, OWNER)
    if hash_features is not None:
        if like_manifest is not None:
            assert like is not None  # like_manifest is like's manifest
            raise ParameterError(f"The 'hash_features' parameter of {OWNER} hashes a training source; a like= store reuses its store's hashing "
                                 f"({os.fspath(like)}): drop hash_features.")
        if layout == "dense":
            raise ParameterError(f"The 'hash_features' parameter of {OWNER} writes a sparse store (one value a column in {hash_features} slots); "
                                 "drop layout='dense'.")
        if log1p is not None:
            raise ParameterError(f"The 'log1p' parameter of {OWNER} names features, and hashed features have no names of their own: drop log1p "
                                 "or hash_features (scale='maxabs' applies to hashed features).")
    transform = None
    if like_manifest is not None and (log1p is not None or scale != "none"):
        has = like_manifest.encoding.get("transform") is not None
        assert like is not None
        raise ParameterError(f"The 'log1p' and 'scale' parameters of {OWNER} fit a transform on this source, but like= stores must share the "
                             f"training store's features: {os.fspath(like)} {'has a transform, which is re-applied' if has else 'has none'}; "
                             "drop log1p= and scale= (a transform is fitted on the training store and re-applied by like=).")
    if like_manifest is not None and like_manifest.encoding.get("transform") is not None:
        assert like is not None
        transform = stored_transform(like_manifest, os.fspath(like))
    shifting = scale == "standard" or (transform is not None and not transform.keeps_zeros)
    if layout == "sparse" and shifting:  # minmax: fitted first, then refused unless every minimum is 0 (check_sparse_transform)
        raise ParameterError(f"The 'layout' parameter of {OWNER} is 'sparse', but scale={scale if transform is None else transform.scale!r} would "
                             "shift every zero; use scale='maxabs' (it keeps zeros, as log1p does) or layout='dense'.")
    if layout == "auto" and (shifting or scale == "minmax"):
        layout = "dense"
    with store_lock(dest):  # one writer of dest from the check to the rename (the ShardWriter re-enters it)
        prepare_destination(dest, overwrite)
        if log1p is not None or scale != "none":
            now = locals()  # every option as checked so far (layout resolved)
            raw_args = {name: now[name] for name in ingest_defaults() if name not in ("log1p", "scale", "overwrite")}

            def source_of(raw: Manifest) -> dict[str, Any]:
                return {**raw.source, "options": {**raw.source["options"], "log1p": log1p, "scale": scale, "overwrite": overwrite}}

            return ingest_transformed(lambda path: ingest(src, path, **raw_args), dest, overwrite, log1p, scale, source_of,
                                      fitted_on=paths[0] if len(paths) == 1 else ", ".join(paths))

        kinds = [source_format or detect_source_format(p, skip_rows) for p in paths]
        if len(set(kinds)) > 1:
            raise InputError(f"sources of different formats ({', '.join(sorted(set(kinds)))}); ingest them separately", path=paths[0])
        kind = kinds[0]
        for p in paths:
            if os.path.isdir(p) and kind != "parquet":
                raise InputError(f"is a directory, but source_format={kind!r}", path=p)
        if like_manifest is not None:
            want = "svmlight" if kind == "svmlight" else "tabular"
            if like_manifest.encoding["kind"] != want:
                raise ParameterError(f"The 'like' parameter of {OWNER} names a store ingested from a {like_manifest.encoding['kind']} source; this source is {kind}.")

        files: list[SourceFile] = []
        for i, p in enumerate(paths):
            if kind == "parquet":
                from ._parquet_source import parquet_files  # pyarrow: imported by the tabular sources only
            for fp in parquet_files(p) if kind == "parquet" else [p]:
                files.append(SourceFile(fp, len(files), i))

        if kind == "svmlight":
            for value, name in ((label, "label"), (group_col, "group_col"), (weight_col, "weight_col")):
                if value is not None:
                    raise ParameterError(f"The {name!r} parameter of {OWNER} applies to CSV and Parquet sources, not to svmlight.")
            if header is True:
                raise ParameterError(f"The 'header' parameter of {OWNER} applies to CSV sources; svmlight files have no header.")
            if hash_features is not None:
                raise ParameterError(f"The 'hash_features' parameter of {OWNER} applies to CSV and Parquet sources; an svmlight source's "
                                     "features are indices already (n_features= bounds them).")
            job: SvmlightJob | TabularJob = SvmlightJob(files, read_rows, rule, n_features, zero_based, like_manifest, unlabeled)
        else:
            if n_features is not None:
                raise ParameterError(f"The 'n_features' parameter of {OWNER} applies to svmlight sources; tabular sources get their features from the columns.")
            if zero_based != "auto":
                raise ParameterError(f"The 'zero_based' parameter of {OWNER} applies to svmlight sources only.")
            if kind == "parquet" and (header is True or skip_rows):
                raise ParameterError(f"The 'header' and 'skip_rows' parameters of {OWNER} apply to text sources, not to Parquet.")
            job = TabularJob(files, kind, read_rows, rule, label, group_col, weight_col, header, skip_rows, unseen, like_manifest, unlabeled,
                              hash_features)

        with Progress(f"ingest: reading {', '.join(paths)} (pass 1 of 2)", total_bytes=sum(f.stamp[0] for f in files), bytes_label="read"):
            job.scan()
        if isinstance(job, TabularJob):
            import pyarrow as pa  # loaded by the tabular job already; an svmlight ingest never imports it

            pa.default_memory_pool().release_unused()  # give back what pass 1's Arrow buffers held
        for msg in job.warnings:
            warnings.warn(msg, DataWarning, stacklevel=2)

        d = job.n_features
        store_layout = _choose_layout(layout, job, like_manifest)
        nnz_per_row = job.nnz / max(1, job.n_rows) if store_layout == "csr" and hasattr(job, "nnz") else None
        # a source smaller than one default shard becomes one shard of exactly its rows
        rows_per_shard = shard_rows or shard_rows_for(job.n_rows, d, nnz_per_row=nnz_per_row)
        groups = getattr(job, "groups", None)
        with_group = groups is not None
        now = locals()
        options = {name: now[name] for name in ingest_defaults()}  # every option, as the manifest's source records them:
        options.update(  # the label values as lists, like= absolute, the store as written (no transform here), its shard rows
            positive=None if positive is None else list(LabelRule.from_args(positive, None).values),
            negative=None if negative is None else list(LabelRule.from_args(None, negative).values),
            like=None if like is None else os.path.abspath(os.fspath(like)), log1p=None, scale="none", shard_rows=rows_per_shard,
        )
        source = _source_dict(paths, files, kind, options, isinstance(src, (str, os.PathLike)))
        with ShardWriter(dest, d, job.feature_names, rows_per_shard, format=format, with_group=with_group, with_weight=getattr(job, "has_weight", False),
                         overwrite=overwrite, labelled=not unlabeled, layout=store_layout) as writer:
            with Progress(f"ingest: writing {dest} (pass 2 of 2)", total_rows=job.n_rows, bytes_label="of features"):
                if store_layout == "csr":
                    written = _write_csr_shards(job, writer, transform, ", ".join(paths))
                else:
                    written = _write_shards(job, writer, rows_per_shard, d, transform, ", ".join(paths))
            if written != job.n_rows:
                raise InputError(f"pass 2 read {written} rows, pass 1 counted {job.n_rows} (did the file change?)", path=files[0].path)
            encoding = job.encoding
            if transform is not None:
                assert like_manifest is not None  # a transform here is the like= store's
                encoding = {**job.encoding, "transform": like_manifest.encoding["transform"]}
            hashing = job.hashing_used()
            if hashing is not None:
                encoding = {**encoding, "hashing": hashing.to_dict()}
                if hashing.collision_rate >= COLLISION_WARNING:
                    warnings.warn(f"{', '.join(paths)}: {100 * hashing.collision_rate:.1f} % of the {hashing.n_features} hash slots are in use, so "
                                  f"about that share of the tokens (some {hashing.tokens_estimate:.0f}) shares a slot with another; "
                                  f"hash_features={hashing.slots_for()} would keep it under 5 %.", DataWarning, stacklevel=2)
            manifest = writer.commit(source=source, encoding=encoding, groups=groups, group_column=getattr(job, "group_column", None))
        return manifest


def _choose_layout(layout: str, job: SvmlightJob | TabularJob, like: Manifest | None = None) -> str:
    """The store's layout (``"dense"`` or ``"csr"``) for the ingest option ``layout``; ``auto`` is logged with its reason
    (with a ``like`` store: that store's layout, so that a test store is read as its training store is)."""
    if layout != "auto":
        return "csr" if layout == "sparse" else "dense"
    if like is not None:
        log.log(VERBOSE, "layout auto: %s (the like= store's)", "sparse" if like.layout == "csr" else "dense")
        return like.layout
    if getattr(job, "hashing", None) is not None:
        log.log(VERBOSE, "layout auto: sparse (hashed features)")
        return "csr"
    density = job.nonzeros / max(1, job.n_rows * job.n_features)
    chosen = "csr" if density <= SPARSE_MAX_DENSITY else "dense"
    log.log(VERBOSE, "layout auto: %s (%.2f %% of the entries are non-zero; sparse up to %.1f %%)", "sparse" if chosen == "csr" else "dense",
             100 * density, 100 * SPARSE_MAX_DENSITY)
    return chosen


def _write_csr_shards(job: SvmlightJob | TabularJob, writer: ShardWriter, transform: FeatureTransform | None = None, where: str = "") -> int:
    """Pass 2 into a CSR store: the source's rows go to the writer as CSR blocks (never dense; svmlight's parsed rows,
    a tabular source's one-hot or hashed columns), transformed by the like= store's ``transform`` (one that keeps zeros)."""
    total = 0
    for X, y, g, w in job.csr_pieces():
        if transform is not None:
            try:
                X = transform.apply(X, first_row=total, where=where)
            except ValueError as exc:
                raise InputError(f"{exc} (a row of the source, counted from 0; the transform is the like= store's)") from None
        writer.append(X, y, g, w)
        total += X.shape[0]
        advance(rows=X.shape[0], nbytes=8 * X.nnz)
    return total


def _write_shards(job: SvmlightJob | TabularJob, writer: ShardWriter, shard_rows: int, d: int,
                  transform: FeatureTransform | None = None, where: str = "") -> int:
    """Encode pass 2 straight into one shard-sized buffer and write every full shard (transformed in place
    by the like= store's ``transform``)."""

    def write(rows: int) -> None:
        if transform is not None:
            try:
                view = X[:rows]
                transform.apply(view, out=view, first_row=total, where=where)
            except ValueError as exc:
                raise InputError(f"{exc} (a row of the source, counted from 0; the transform is the like= store's)") from None
        writer.write_shard(X[:rows], y[:rows], None if g is None else g[:rows], None if w is None else w[:rows])
        advance(rows=rows, nbytes=4 * rows * d)  # pass 2's progress: rows written

    X = np.zeros((shard_rows, d), dtype=np.float32)
    y = np.zeros(shard_rows, dtype=np.int8)
    g = np.zeros(shard_rows, dtype=np.int16) if writer.with_group else None
    w = np.zeros(shard_rows, dtype=np.float32) if writer.with_weight else None
    pos = total = 0
    for n, encode in job.parts():
        a = 0
        while a < n:
            take = min(n - a, shard_rows - pos)
            yy, gg, ww = encode(a, a + take, X[pos : pos + take])
            y[pos : pos + take] = yy
            if g is not None:
                g[pos : pos + take] = gg
            if w is not None:
                w[pos : pos + take] = ww
            pos += take
            a += take
            if pos == shard_rows:
                write(pos)
                total += pos
                pos = 0
    if pos:
        write(pos)
        total += pos
    return total


def _source_dict(paths: list[str], files: list[SourceFile], kind: str, options: dict[str, Any], single: bool) -> dict[str, Any]:
    per_src = []
    for i, p in enumerate(paths):
        mine = [f for f in files if f.src_index == i]
        if os.path.isdir(p):
            h = hashlib.sha256()
            for f in mine:
                h.update(f"{os.path.relpath(f.path, p)} {f.sha256}\n".encode())
            per_src.append((p, h.hexdigest(), sum(f.bytes for f in mine)))
        else:
            per_src.append((p, mine[0].sha256, mine[0].bytes))
    out: dict[str, Any] = {"format": kind}
    if single:
        out.update(path=per_src[0][0], sha256=per_src[0][1], bytes=per_src[0][2])
    else:
        out.update(path=[s[0] for s in per_src], sha256=[s[1] for s in per_src], bytes=[s[2] for s in per_src])
    out["files"] = [{"path": f.path, "sha256": f.sha256, "bytes": f.bytes} for f in files]
    out["options"] = options
    return out
