"""Ingest's per-format jobs: what pass 1 learns of a source (rows, features, labels, column types, vocabularies) and
how pass 2 encodes its pieces into rows, for svmlight (:class:`SvmlightJob`) and tabular sources, CSV or Parquet
(:class:`TabularJob`). :func:`dpipe.io._ingest.ingest` runs them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .._wide import NamePattern, same_names
from ..exceptions import InputError, ParameterError, StoreError
from ..reduce._block import csr_block
from ._hashing import FeatureHashing
from ._ingest_sources import SVM_BLOCK_BYTES, SourceFile
from ._labels import LabelCounter, LabelRule, Where, class_absent_message
from ._manifest import Manifest
from ._svmlight import parse_block

if TYPE_CHECKING:
    from ._tabular import Column, TabularScanner, TabularSchema

# The tabular modules (pyarrow, which loads pandas: about 130 MB) are imported by TabularJob's methods, not here: an
# svmlight ingest never loads them (tests/io/test_ingest_memory.py bounds the whole process's peak).

__all__ = ["OWNER", "SvmlightJob", "TabularJob", "like_label", "UNDECLARED_WIDTH_MAX", "UNDECLARED_MIN_FILL"]

OWNER = "ingest"

#: an svmlight source whose largest index makes it wider than this, with fewer than one non-zero value in
#: :data:`UNDECLARED_MIN_FILL` of its width, is refused unless ``n_features`` declares the width: a 60-byte file with
#: the index 2^31 - 1 is far more likely a wrong index than a 2^31-feature problem (the store costs nothing a feature,
#: but every weight vector trained on it costs 8 bytes a feature)
UNDECLARED_WIDTH_MAX = 2**24
UNDECLARED_MIN_FILL = 64


def like_label(like: Manifest) -> dict[str, Any]:
    """The like= store's label rule; an unlabelled like= store gives none to a labelled source."""
    if like.encoding.get("label") is None:
        raise ParameterError(f"The 'like' parameter of {OWNER} names an unlabelled store; give the labelled source the training store "
                             "as like= (or pass unlabeled=True)")
    return like.encoding["label"]


# ---------------------------------------------------------------------------------
# svmlight
# ---------------------------------------------------------------------------------
@dataclasses.dataclass
class _Indices:
    """What pass 1 learns of an svmlight source's feature indices, block by block: the largest and where, the first 0,
    and the first index beyond each of ``limits``."""

    limits: list[int]
    max_idx: int = -1
    max_where: Where | None = None
    first_zero: Where | None = None
    over: dict[int, tuple[Where, int]] = dataclasses.field(default_factory=dict)

    def add(self, idx: np.ndarray, where: Callable[[int], Where]) -> None:
        """A block's indices (``where(k)``: the place of its ``k``-th stored value)."""
        top = int(idx.max())
        if top > self.max_idx:
            self.max_idx, self.max_where = top, where(int(np.argmax(idx)))
        if self.first_zero is None and int(idx.min()) == 0:
            self.first_zero = where(int(np.argmax(idx == 0)))
        for lim in self.limits:
            if lim not in self.over:
                bad = np.flatnonzero(idx > lim)
                if bad.size:
                    self.over[lim] = (where(int(bad[0])), int(idx[bad[0]]))


class SvmlightJob:
    kind = "svmlight"
    #: what a tabular job may have and an svmlight source never does
    hashing: FeatureHashing | None = None
    groups: list[Any] | None = None
    group_column: str | None = None
    has_weight = False

    def __init__(self, files: list[SourceFile], read_rows: int, rule: LabelRule | None, n_features: int | None, zero_based, like: Manifest | None,
                 unlabeled: bool = False) -> None:
        self.files = files
        self.unlabeled = unlabeled
        self.read_rows = read_rows
        self.zero_based_opt = zero_based
        self.n_features_opt = n_features
        if like is not None:
            enc = like.encoding
            ln, lz = int(enc["n_features"]), bool(enc["zero_based"])
            if n_features is not None and n_features != ln:
                raise ParameterError(f"The 'n_features' parameter of {OWNER} is {n_features}, but the like= store has {ln} features.")
            if zero_based != "auto" and zero_based != lz:
                raise ParameterError(f"The 'zero_based' parameter of {OWNER} is {zero_based}, but the like= store is {'zero' if lz else 'one'}-based.")
            self.n_features_opt, self.zero_based_opt = ln, lz
            if rule is None and not unlabeled:
                rule = LabelRule.from_dict(like_label(like))
        self.rule = rule or LabelRule()
        self.rule.check_numeric()
        self.warnings: list[str] = []

    def _parse(self, f: SourceFile):
        return lambda data, nl, first_line: parse_block(data, first_line, f.path, float32=True)

    def scan(self) -> None:
        labels = LabelCounter()
        n_rows = nnz = 0
        nf = self.n_features_opt
        seen = _Indices([] if nf is None else [nf - 1, nf])
        for f in self.files:
            for blk in f.blocks(self.read_rows, SVM_BLOCK_BYTES, True, self._parse(f)):
                if blk.n_rows == 0:
                    continue
                n_rows += blk.n_rows
                nnz += int(blk.indices.size)
                vals, first, counts = np.unique(blk.labels, return_index=True, return_counts=True)
                labels.add([float(v) for v in vals], counts, [Where(f.path, line=int(blk.lines[r]), order=f.order) for r in first])
                if blk.indices.size:
                    seen.add(blk.indices, functools.partial(self._where, f, blk))
        if n_rows == 0:
            raise InputError("empty input (no rows)", path=self.files[0].path)
        zb, d = self._width(seen, n_rows, nnz)
        self.zero_based, self.n_features, self.n_rows, self.nnz = zb, d, n_rows, nnz
        self.nonzeros = nnz  # the layout's density (TabularJob's counts its numeric values)
        self.base = 0 if zb else 1
        self.feature_names = NamePattern("f", self.base, d)  # never d strings: a header-wide index costs nothing
        self.encoding = {"kind": "svmlight", "zero_based": zb, "n_features": d, "label": None}
        if self.unlabeled:  # the lines' label tokens are read and dropped
            self.label_map, self.n_neg, self.n_pos = {}, 0, 0
            return
        self.label_map = self.rule.resolve(labels.first)
        self.n_neg, self.n_pos = labels.class_counts(self.label_map)
        keys = np.array(sorted(self.label_map), dtype=np.float64)
        self._keys, self._lut = keys, np.array([self.label_map[k] for k in keys.tolist()], dtype=np.int8)
        self.encoding["label"] = {**self.rule.to_dict(), "classes": labels.classes(self.label_map)}
        msg = class_absent_message(self.n_neg, self.n_pos, self.rule, self.files[0].path)
        if msg:
            self.warnings.append(msg)

    def _width(self, seen: _Indices, n_rows: int, nnz: int) -> tuple[bool, int]:
        """Pass 1's verdict on the indices: ``(zero_based, n_features)``, checked against the options given."""
        if self.zero_based_opt == "auto":
            zb = seen.first_zero is not None
        else:
            zb = bool(self.zero_based_opt)
            if not zb and seen.first_zero is not None:
                raise seen.first_zero.error("feature index 0 found, but zero_based=False (one-based indices start at 1)")
        nf = self.n_features_opt
        if nf is not None:
            lim = nf - 1 if zb else nf
            if lim in seen.over:
                where, i = seen.over[lim]
                raise where.error(f"feature index {i} is beyond n_features={nf} ({'zero' if zb else 'one'}-based indices)")
            return zb, nf
        d = seen.max_idx + 1 if zb else seen.max_idx
        if d <= 0:
            raise InputError("no feature index in the input (every line holds only a label); pass n_features=", path=self.files[0].path)
        if d > UNDECLARED_WIDTH_MAX and nnz * UNDECLARED_MIN_FILL < d:
            assert seen.max_where is not None  # d > 0: an index was seen
            raise seen.max_where.error(
                f"feature index {seen.max_idx} makes the store {d} features wide, but the {n_rows} row(s) hold {nnz} non-zero value(s) "
                f"(fewer than 1 in {UNDECLARED_MIN_FILL} of the width): refused, as a store this much wider than its data is most likely "
                f"a wrong index; give the 'n_features' parameter as {d} (or the width you mean) if it is meant")
        return zb, d

    @staticmethod
    def _where(f: SourceFile, blk, k: int) -> Where:
        r = int(np.searchsorted(blk.indptr, k, side="right") - 1)
        return Where(f.path, line=int(blk.lines[r]), order=f.order)

    def parts(self) -> Iterator[tuple[int, Any]]:
        """Pass 2: (rows, encode) per block; ``encode(a, b, out)`` writes rows a..b into ``out``
        (``out=None``: returns them as a CSR block, with their labels)."""
        d = self.n_features
        for f in self.files:
            f.check_unchanged()
            for blk in f.blocks(self.read_rows, SVM_BLOCK_BYTES, False, self._parse(f)):
                if blk.n_rows == 0:
                    continue
                if self.unlabeled:
                    y = np.zeros(blk.n_rows, dtype=np.int8)
                else:
                    pos = np.minimum(np.searchsorted(self._keys, blk.labels), len(self._keys) - 1)
                    if not np.array_equal(self._keys[pos], blk.labels):
                        raise InputError("labels differ from the first pass (did the file change?)", path=f.path)
                    y = self._lut[pos]
                cols = blk.indices.astype(np.int64) - self.base
                if cols.size and (cols.max() >= d or cols.min() < 0):
                    raise InputError("feature indices differ from the first pass (did the file change?)", path=f.path)

                def encode(a: int, b: int, out: np.ndarray | None, blk=blk, y=y, cols=cols):
                    lo, hi = int(blk.indptr[a]), int(blk.indptr[b])
                    if out is None:  # a CSR store: the rows as they were parsed
                        return csr_block(blk.values[lo:hi], cols[lo:hi], blk.indptr[a : b + 1] - lo, d), y[a:b]
                    out[...] = 0.0
                    rows = np.repeat(np.arange(b - a), np.diff(blk.indptr[a : b + 1]))
                    out[rows, cols[lo:hi]] = blk.values[lo:hi]
                    return y[a:b], None, None

                yield blk.n_rows, encode


# ---------------------------------------------------------------------------------
# CSV and Parquet
# ---------------------------------------------------------------------------------
    def csr_pieces(self) -> Iterator[tuple[Any, np.ndarray, None, None]]:
        """Pass 2 as the parsed CSR blocks ``(X, y, None, None)``, never dense."""
        for n, encode in self.parts():
            X, y = encode(0, n, None)
            yield X, y, None, None

    def hashing_used(self) -> None:
        """svmlight features are not hashed."""
        return None


class TabularJob:
    kind = "tabular"
    header: bool | None  # whether the CSV files have a header line (None: Parquet)

    def __init__(
        self,
        files: list[SourceFile],
        source_format: str,
        read_rows: int,
        rule: LabelRule | None,
        label,
        group_col,
        weight_col,
        header,
        skip_rows: int,
        unseen: str,
        like: Manifest | None,
        unlabeled: bool = False,
        hash_features: int | None = None,
    ) -> None:
        self.files = files
        self.unlabeled = unlabeled
        self.hashing: FeatureHashing | None = None
        if hash_features is not None:
            self.hashing = FeatureHashing(hash_features)
        elif like is not None and like.encoding.get("hashing") is not None:
            self.hashing = FeatureHashing.from_dict(like.encoding["hashing"], f"{like.source.get('path')}: manifest encoding")
            self.hashing = FeatureHashing(self.hashing.n_features)  # the slots in use are this store's own
        from ._tabular_sources import tabular_source

        self.source_format = source_format
        self.source = tabular_source(source_format)
        self.read_rows = read_rows
        self.label_opt, self.group_opt, self.weight_opt = label, group_col, weight_col
        self.header_opt = header
        self.skip_rows = skip_rows
        self.unseen = unseen
        self.like = like
        if like is not None and rule is None and not unlabeled:
            rule = LabelRule.from_dict(like_label(like))
        self.rule = rule or LabelRule()
        self.warnings: list[str] = []

    # -- layout ------------------------------------------------------------------
    def like_columns(self) -> list[Column]:
        """The like= store's source columns; without its label column when this source is unlabelled."""
        from ._tabular import TabularSchema

        assert self.like is not None  # called only with a like= store
        cols = TabularSchema.from_list(self.like.encoding["columns"]).columns
        return [c for c in cols if c.role != "label"] if self.unlabeled else cols

    def _columns(self) -> list[Column]:
        from ._tabular import Column, resolve_column

        path = self.files[0].path
        names, kinds = self.source.columns(self)
        if self.like is not None:
            cols = self.like_columns()
            self.source.check_like(names, [c.name for c in cols], path)
            like_names = [c.name for c in cols]
            for spec, role, param in ((self.label_opt, "label", "label"), (self.group_opt, "group", "group_col"), (self.weight_opt, "weight", "weight_col")):
                if spec is None:
                    continue
                j = resolve_column(spec, like_names, param, path)
                if cols[j].role != role:
                    have = [c.name for c in cols if c.role == role]
                    raise ParameterError(f"The {param!r} parameter of {OWNER} is {spec!r}, but the like= store's {role} column is {have[0] if have else None!r}.")
            self.names = like_names
            return cols
        n = len(names)
        if self.unlabeled:
            li = None
        elif self.label_opt is not None:
            li = resolve_column(self.label_opt, names, "label", path)
        else:
            li = names.index("label") if "label" in names else n - 1
        gi = resolve_column(self.group_opt, names, "group_col", path)
        wi = resolve_column(self.weight_opt, names, "weight_col", path)
        used = [j for j in (li, gi, wi) if j is not None]
        if len(set(used)) != len(used):
            raise ParameterError(f"The 'label', 'group_col' and 'weight_col' parameters of {OWNER} must name different columns.")
        if n - (li is not None) - (wi is not None) < 1:  # a group column stays a feature
            raise InputError(f"{n} column(s): nothing is left as a feature", path=path)
        cols = []
        for j, name in enumerate(names):
            role = "label" if j == li else "group" if j == gi else "weight" if j == wi else "feature"
            kind = kinds[j]
            self.source.check_column(name, role, kind, self.hashing is not None, path, OWNER)
            cols.append(Column(name, role, kind if role in ("feature", "group") else None))
        self.names = names
        return cols

    def _batches(self, first_pass: bool) -> Iterator[tuple[list, Any]]:
        for f in self.files:
            if not first_pass:
                f.check_unchanged()
            yield from self.source.batches(self, f, first_pass)

    # -- passes ------------------------------------------------------------------
    def scan(self) -> None:
        from ._tabular import TabularEncoder, TabularScanner

        cols = self._columns()
        groups = list(self.like.groups) if self.like is not None and self.like.groups is not None else None
        scanner = TabularScanner(cols, unseen=self.unseen, groups=groups, hashing=self.hashing)
        self.numeric = scanner.numeric_columns()
        for arrays, rows in self._batches(True):
            scanner.scan(arrays, rows)
            self.numeric = scanner.numeric_columns()
        if scanner.n_rows == 0:
            raise InputError("empty input (no rows)", path=self.files[0].path)
        schema = scanner.schema()
        if self.like is not None and not same_names(schema.feature_names, self.like.feature_names):  # pragma: no cover - by construction
            raise StoreError(f"{self.like.source.get('path')}: the like= store's encoding does not reproduce its feature names")
        self.schema = schema
        self.n_rows = scanner.n_rows
        self.n_features = schema.n_features
        self.feature_names = schema.feature_names
        if self.unlabeled:
            self.label_map, self.n_neg, self.n_pos = {}, 0, 0
        else:
            self.label_map = self.rule.resolve(scanner.labels.first)
            self.n_neg, self.n_pos = scanner.labels.class_counts(self.label_map)
        gi = schema.index("group")
        self.group_column = None if gi is None else schema.columns[gi].name
        self.groups = scanner.groups() if gi is not None else None
        self.has_weight = schema.index("weight") is not None
        self.nnz = self.n_rows * sum(c.is_feature for c in schema.columns)  # at most one value a feature column (shard sizing)
        #: the non-zero features (numeric values counted, one per one-hot column and row): the layout's density
        self.nonzeros = self.nnz if self.hashing is not None else (
            scanner.numeric_nonzeros + self.n_rows * sum(c.is_feature and c.type == "categorical" for c in schema.columns))
        self.encoder = TabularEncoder(schema, self.label_map, self.groups)
        self.numeric = schema.numeric_columns()
        self.encoding = self._encoding(schema, scanner)
        self._occupied = None if self.hashing is None else np.zeros(self.hashing.n_features, dtype=bool)
        msg = None if self.unlabeled else class_absent_message(self.n_neg, self.n_pos, self.rule, self.files[0].path)
        if msg:
            self.warnings.append(msg)
        if scanner.unseen_counts:
            self.warnings.append(self._unseen_message(scanner.unseen_counts))

    def _encoding(self, schema: TabularSchema, scanner: TabularScanner) -> dict[str, Any]:
        """The manifest's ``encoding`` of a tabular source (module docstring of :mod:`dpipe.io._ingest`)."""
        from ._tabular import MISSING_VALUES

        li = schema.index("label")
        return {
            "kind": "tabular",
            "source_format": self.source_format,
            "header": self.header,
            "delimiter": self.source.delimiter,
            "missing": list(MISSING_VALUES),
            "columns": schema.to_list(),
            "label": None if li is None else {**self.rule.to_dict(), "column": schema.columns[li].name, "classes": scanner.labels.classes(self.label_map)},
            "n_features": self.n_features,
            "zero_based": None,
            "unseen": self.unseen,
            "unseen_counts": scanner.unseen_counts,
            "hashing": None if self.hashing is None else self.hashing.to_dict(),
        }

    def _unseen_message(self, unseen_counts: dict[str, dict[Any, int]]) -> str:
        """The one warning of ``unseen="ignore"``: how many values the like= store had not seen, the commonest of each column."""
        total = sum(sum(c.values()) for c in unseen_counts.values())
        parts = []
        for col, counts in unseen_counts.items():
            top = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
            parts.append(f"{col!r}: " + ", ".join(f"{v!r} x{c}" for v, c in top) + (" ..." if len(counts) > 5 else ""))
        return (f"{self.files[0].path}: {total} value(s) unseen in the like= store were encoded as all-zero one-hot rows "
                f"({'; '.join(parts)}); counts are in the manifest encoding['unseen_counts']")

    def parts(self) -> Iterator[tuple[int, Any]]:
        """Pass 2: (rows, encode) per piece; ``encode(a, b, out)`` writes rows a..b into ``out``."""
        for arrays, rows in self._batches(False):

            def encode(a: int, b: int, out: np.ndarray, arrays=arrays, rows=rows):
                if a == 0 and b == rows.n:
                    X, y, g, w = self.encoder.encode(arrays, rows, out)
                else:
                    X, y, g, w = self.encoder.encode([x.slice(a, b - a) for x in arrays], rows.slice(a, b), out)
                return y, g, w

            yield rows.n, encode

    def csr_pieces(self) -> Iterator[tuple[Any, np.ndarray, np.ndarray | None, np.ndarray | None]]:
        """Pass 2 as CSR blocks ``(X, y, group, weight)`` per piece, never dense; with hashing, counts the slots in use."""
        for arrays, rows in self._batches(False):
            X, y, g, w = self.encoder.encode_csr(arrays, rows)
            if self._occupied is not None:
                self._occupied[X.indices] = True
            yield X, y, g, w

    def hashing_used(self) -> FeatureHashing | None:
        """The hashing with the slots pass 2 filled (after :meth:`csr_pieces`), or None."""
        if self.hashing is None:
            return None
        assert self._occupied is not None  # made with the hashing
        return FeatureHashing(self.hashing.n_features, int(np.count_nonzero(self._occupied)))


# ---------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------
