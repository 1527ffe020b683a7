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

:func:`ingest` is five steps of one concern each: its options checked once into an
:class:`~dpipe.io._ingest_checks.IngestPlan` (the choices from
:class:`~dpipe.io.IngestOptions`' declaration), the sources detected, the job of their format
chosen (an option the format does not take refused), the two passes writing the shards
(:mod:`dpipe.io._ingest_write`), and the source recorded in the manifest
(:func:`record_source`).

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
import os
from collections.abc import Sequence
from typing import Any

from ..exceptions import InputError, ParameterError
from ._ingest_checks import IngestPlan, plan_ingest
from ._ingest_jobs import OWNER, SvmlightJob, TabularJob
from ._ingest_options import IngestOptions
from ._ingest_sources import SourceFile, detect_source_format
from ._ingest_write import scan, write_store
from ._labels import LabelRule
from ._manifest import Manifest
from ._transform_store import ingest_transformed
from ._writer import prepare_destination, store_lock

__all__ = ["ingest", "record_source"]


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
        :func:`~dpipe.io._ingest_sources.detect_source_format`).
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
        most :data:`~dpipe.io._ingest_write.SPARSE_MAX_DENSITY` of its entries are non-zero (12.5 %: numeric values
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
    options = IngestOptions(format=format, source_format=source_format, label=label, positive=positive, negative=negative, n_features=n_features,
                            zero_based=zero_based, header=header, skip_rows=skip_rows, group_col=group_col, weight_col=weight_col, like=like,
                            unseen=unseen, unlabeled=unlabeled, log1p=log1p, scale=scale, shard_rows=shard_rows, read_rows=read_rows,
                            overwrite=overwrite, layout=layout, hash_features=hash_features)
    plan = plan_ingest(src, dest, options)  # 1. validate
    with store_lock(plan.dest):  # one writer of dest from the check to the rename (the ShardWriter re-enters it)
        prepare_destination(plan.dest, plan.options.overwrite)
        if plan.fits_transform:
            return _ingest_transformed(src, plan)
        kind, files = _detect_sources(plan)  # 2. detect the sources
        job = _choose_job(plan, kind, files)  # 3. choose the job
        scan(plan, job, files, stacklevel=2)  # 4. pass 1, then pass 2 writes the shards ...
        return write_store(plan, job, files, lambda rows_per_shard: record_source(plan, kind, files, rows_per_shard), stacklevel=2)  # 5. ... and the manifest records the source


def _ingest_transformed(src: str | list[str], plan: IngestPlan) -> Manifest:
    """Ingest the raw source into a temporary store (every option but the transform's), fit the transform there and
    write ``plan.dest`` (:func:`~dpipe.io._transform_store.ingest_transformed`)."""
    o = plan.options
    raw = o.replace(log1p=None, scale="none", overwrite=False)

    def source_of(raw_manifest: Manifest) -> dict[str, Any]:
        return {**raw_manifest.source, "options": {**raw_manifest.source["options"], "log1p": o.log1p, "scale": o.scale, "overwrite": o.overwrite}}

    return ingest_transformed(lambda path: ingest(src, path, **raw.keywords()), plan.dest, o.overwrite, o.log1p, o.scale, source_of,
                              fitted_on=plan.where)


def _detect_sources(plan: IngestPlan) -> tuple[str, list[SourceFile]]:
    """The sources' one format (``source_format``, or told from each one) and the files to read (a Parquet directory's
    parts), checked against the ``like`` store's kind."""
    o = plan.options
    kinds = [o.source_format or detect_source_format(p, o.skip_rows) for p in plan.paths]
    if len(set(kinds)) > 1:
        raise InputError(f"sources of different formats ({', '.join(sorted(set(kinds)))}); ingest them separately", path=plan.paths[0])
    kind = kinds[0]
    for p in plan.paths:
        if os.path.isdir(p) and kind != "parquet":
            raise InputError(f"is a directory, but source_format={kind!r}", path=p)
    if plan.like is not None:
        want = "svmlight" if kind == "svmlight" else "tabular"
        if plan.like.encoding["kind"] != want:
            raise ParameterError(f"The 'like' parameter of {OWNER} names a store ingested from a {plan.like.encoding['kind']} source; this source is {kind}.")
    files: list[SourceFile] = []
    for i, p in enumerate(plan.paths):
        if kind == "parquet":
            from ._parquet_source import parquet_files  # pyarrow: imported by the tabular sources only
        for fp in parquet_files(p) if kind == "parquet" else [p]:
            files.append(SourceFile(fp, len(files), i))
    return kind, files


def _choose_job(plan: IngestPlan, kind: str, files: list[SourceFile]) -> SvmlightJob | TabularJob:
    """The job that reads ``kind`` (its two passes); an option that does not apply to ``kind`` is refused, naming it."""
    o = plan.options
    if kind == "svmlight":
        for name in ("label", "group_col", "weight_col"):
            if getattr(o, name) is not None:
                raise ParameterError(f"The {name!r} parameter of {OWNER} applies to CSV and Parquet sources, not to svmlight.")
        if o.header is True:
            raise ParameterError(f"The 'header' parameter of {OWNER} applies to CSV sources; svmlight files have no header.")
        if o.hash_features is not None:
            raise ParameterError(f"The 'hash_features' parameter of {OWNER} applies to CSV and Parquet sources; an svmlight source's "
                                 "features are indices already (n_features= bounds them).")
        return SvmlightJob(files, plan.read_rows, plan.rule, o.n_features, o.zero_based, plan.like, o.unlabeled)
    if o.n_features is not None:
        raise ParameterError(f"The 'n_features' parameter of {OWNER} applies to svmlight sources; tabular sources get their features from the columns.")
    if o.zero_based != "auto":
        raise ParameterError(f"The 'zero_based' parameter of {OWNER} applies to svmlight sources only.")
    if kind == "parquet" and (o.header is True or o.skip_rows):
        raise ParameterError(f"The 'header' and 'skip_rows' parameters of {OWNER} apply to text sources, not to Parquet.")
    return TabularJob(files, kind, plan.read_rows, plan.rule, o.label, o.group_col, o.weight_col, o.header, o.skip_rows, o.unseen, plan.like,
                      o.unlabeled, plan.hash_features)


def record_source(plan: IngestPlan, kind: str, files: list[SourceFile], rows_per_shard: int) -> dict[str, Any]:
    """The manifest's ``source``: the sources' paths, format, sha256 and sizes, and every option as checked, with the
    label values as lists, ``like`` absolute, the store as written (no transform here) and its shard rows."""
    o = plan.options
    options = o.keywords()
    options.update(
        positive=None if o.positive is None else list(LabelRule.from_args(o.positive, None).values),
        negative=None if o.negative is None else list(LabelRule.from_args(None, o.negative).values),
        like=None if o.like is None else os.path.abspath(os.fspath(o.like)), log1p=None, scale="none", shard_rows=rows_per_shard,
    )
    return _source_dict(plan.paths, files, kind, options, plan.single)


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
