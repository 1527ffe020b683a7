"""How a tabular ingest reads each kind of source file: CSV (text, typed by its values) or Parquet (typed by its schema).

:class:`~dpipe.io._ingest_jobs.TabularJob` runs both passes the same way; a
:class:`TabularSource` tells it the columns' names (and, for Parquet, their kinds), checks
what only that kind of file can get wrong, and reads a file in batches of columns.
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .._progress import advance
from ..exceptions import InputError, ParameterError
from ._csv_source import detect_header, read_csv_block, split_csv_line
from ._ingest_sources import CSV_BLOCK_BYTES, SourceFile, hash_file, peek_lines, prefetch
from ._tabular import HASHED_ONLY

if TYPE_CHECKING:
    from ._manifest import Manifest

__all__ = ["TabularJob", "TabularSource", "tabular_source"]


class TabularJob(Protocol):
    """What a source reads of its ingest job (:class:`dpipe.io._ingest_jobs.TabularJob`)."""

    files: list[SourceFile]
    like: Manifest | None
    header_opt: bool | str | None
    skip_rows: int
    read_rows: int
    #: the columns' names once known, and the numeric columns' positions (a CSV block's typed columns)
    names: list[str]
    numeric: Any
    #: whether the CSV files have a header line (None: Parquet), set by :meth:`TabularSource.columns`
    header: bool | None

    def like_columns(self) -> list[Any]:
        """The like= store's source columns."""


class TabularSource(abc.ABC):
    """One kind of tabular source file (stateless; the job holds what pass 1 learns)."""

    #: ``source_format``
    name: ClassVar[str]
    #: the manifest encoding's ``delimiter``
    delimiter: ClassVar[str | None]

    @abc.abstractmethod
    def columns(self, job: TabularJob) -> tuple[list[str], list[str | None]]:
        """The columns' names and kinds (None: told by the values in pass 1), the same in every file of ``job``."""

    def check_like(self, names: list[str], like_names: list[str], path: str) -> None:  # noqa: B027 - CSV: nothing to check
        """Refuse a file that cannot hold the like= store's columns."""

    def check_column(self, name: str, role: str, kind: str | None, hashing: bool, path: str, owner: str) -> None:  # noqa: B027
        """Refuse a column whose declared kind cannot take ``role`` (CSV columns have no declared kind)."""

    @abc.abstractmethod
    def batches(self, job: TabularJob, f: SourceFile, first_pass: bool) -> Iterator[tuple[list, Any]]:
        """``(arrays, rows)`` batches of file ``f``; pass 1 (``first_pass``) also hashes the file and reports progress."""


class CsvSource(TabularSource):
    """CSV text: a header told from the first two lines (or ``header=``), columns typed by their values."""

    name = "csv"
    delimiter = ","

    def columns(self, job: TabularJob) -> tuple[list[str], list[str | None]]:
        names = self._names(job)
        return names, [None] * len(names)

    @staticmethod
    def _names(job: TabularJob) -> list[str]:
        names: list[str] | None = None
        ref: SourceFile | None = None
        for f in job.files:
            lines = peek_lines(f.path, job.skip_rows, 2)
            f.skip = job.skip_rows
            if not lines:
                continue
            first = split_csv_line(lines[0][1])
            second = split_csv_line(lines[1][1]) if len(lines) > 1 else None
            if second is not None and len(first) != len(second):
                raise InputError(
                    f"wrong number of columns: {len(second)}, but line {lines[0][0]} has {len(first)}; "
                    "if the file starts with preamble lines, skip them with skip_rows=",
                    path=f.path,
                    line=lines[1][0],
                )
            has_header = job.header_opt if isinstance(job.header_opt, bool) else detect_header(first, second)
            f.header = has_header
            if has_header:
                f.skip = lines[0][0]
                these = [c if c else str(i) for i, c in enumerate(first)]
                dup = sorted(c for c, k in Counter(these).items() if k > 1)
                if dup:
                    raise InputError(f"duplicate column name(s) {dup} in the header", path=f.path, line=lines[0][0])
            else:
                these = [str(i) for i in range(len(first))]
            if names is None:
                names, ref = these, f
                continue
            assert ref is not None  # set with names
            if len(these) != len(names):
                raise InputError(f"{len(these)} columns, but {ref.path} has {len(names)}", path=f.path, line=lines[0][0])
            if has_header and ref.header and these != names:
                raise InputError(f"header {these} differs from the header of {ref.path}", path=f.path, line=lines[0][0])
        if names is None:
            raise InputError("empty input (no rows)", path=job.files[0].path)
        if job.like is not None:
            like_names = [c.name for c in job.like_columns()]
            for f in job.files:
                if f.header and names != like_names:
                    raise InputError(f"header {names} differs from the columns of the like= store {like_names}", path=f.path, line=max(1, f.skip))
            if len(names) != len(like_names):
                assert ref is not None  # names came from a file
                raise InputError(f"{len(names)} columns, but the like= store was ingested from {len(like_names)}", path=ref.path, line=ref.skip + 1)
            names = like_names
        job.header = bool(job.files[0].header)
        return names

    def batches(self, job: TabularJob, f: SourceFile, first_pass: bool) -> Iterator[tuple[list, Any]]:
        n_cols = len(job.names)

        def parse(data, nl, first_line):
            return read_csv_block(data, nl, first_line, n_cols, f.path, f.order, job.numeric)

        yield from f.blocks(job.read_rows, CSV_BLOCK_BYTES, first_pass, parse)


class ParquetSource(TabularSource):
    """Parquet files: the schema gives the columns' kinds, and every file must have the first one's columns."""

    name = "parquet"
    delimiter = None

    def columns(self, job: TabularJob) -> tuple[list[str], list[str | None]]:
        from ._parquet_source import parquet_columns

        names, kinds = parquet_columns(job.files[0].path)
        for f in job.files[1:]:
            n2, _ = parquet_columns(f.path)
            if n2 != names:
                raise InputError(f"columns {n2} differ from those of {job.files[0].path} ({names})", path=f.path)
        job.header = None
        return names, kinds

    def check_like(self, names: list[str], like_names: list[str], path: str) -> None:
        missing = [c for c in like_names if c not in names]
        if missing:
            raise InputError(f"lacks the column(s) {missing} of the like= store", path=path)

    def check_column(self, name: str, role: str, kind: str | None, hashing: bool, path: str, owner: str) -> None:
        if kind is None:
            raise InputError(f"column {name!r} has a type that cannot be ingested (numbers, booleans, strings; with hash_features also "
                             "lists of strings and maps of string to number)", path=path)
        if role == "weight" and kind != "numeric":
            raise InputError(f"weight column {name!r} is not numeric", path=path)
        if kind in HASHED_ONLY and role != "feature":
            raise InputError(f"{role} column {name!r} holds {kind} ({kind} columns can only be hashed features)", path=path)
        if kind in HASHED_ONLY and not hashing:
            raise ParameterError(f"The {name!r} column of {path} holds {'lists of tokens' if kind == 'tokens' else 'maps of token -> number'}, "
                                 f"which only feature hashing encodes: give the 'hash_features' parameter of {owner}.")

    def batches(self, job: TabularJob, f: SourceFile, first_pass: bool) -> Iterator[tuple[list, Any]]:
        from ._parquet_source import iter_parquet

        if first_pass:
            f.sha256, f.bytes = hash_file(f.path)
        yield from prefetch(iter_parquet(f.path, job.names, job.read_rows, f.order))
        if first_pass:
            advance(nbytes=f.stamp[0])  # pass 1's progress: one more file read


_SOURCES: dict[str, TabularSource] = {s.name: s for s in (CsvSource(), ParquetSource())}


def tabular_source(name: str) -> TabularSource:
    """The :class:`TabularSource` of ``source_format`` ``"csv"`` or ``"parquet"``."""
    return _SOURCES[name]
