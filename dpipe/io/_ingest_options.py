"""How a source is read into a store, declared once: :class:`IngestOptions`.

Every option of :func:`dpipe.io.ingest` is one field here: its Python keyword, default,
choices, help, CLI flag and the ``dpipe`` commands that take it (:func:`dpipe._options.option`):
``ingest`` takes them all, ``demo`` those that read a source (for ``--data``), ``train`` / ``evaluate`` / ``predict``
those that read a source (for a source file given instead of a store; ``train`` the transform too), ``split`` the
transform (``log1p``, ``scale``), ``make-data`` the store's ``format`` and ``shard_rows``. ``ingest``'s and ``split_store``'s signatures are checked
against it by a test; the commands' flags and the retrain configuration's ``data.ingest``
(decoded and checked at load) are generated from it.

Adding an ingest option is one field here plus its use in :func:`dpipe.io.ingest`
(a keyword of its signature, which the test asks for, and what it does).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from .._options import add_arguments, keyword_defaults, option, options_of
from .._transform import SCALES

__all__ = ["IngestOptions", "SOURCE_FORMATS", "STORE_FORMATS", "INGEST_LAYOUTS", "UNSEEN", "TRANSFORM_OPTIONS", "RETRAIN_SETS",
           "ingest_defaults", "add_ingest_arguments"]

#: source formats ingest reads
SOURCE_FORMATS = ("svmlight", "csv", "parquet")
#: store formats ingest writes
STORE_FORMATS = ("zarr", "parquet")
#: ``layout=`` values of ingest
INGEST_LAYOUTS = ("auto", "dense", "sparse")
#: what ingest does with a category a ``like`` store has not seen
UNSEEN = ("error", "ignore")
#: the options of the feature transform, which ``split`` fits on its training part too
TRANSFORM_OPTIONS = ("log1p", "scale")
#: ingest options a retrain sets itself: never in its configuration's ``data.ingest``
RETRAIN_SETS = ("unlabeled", "overwrite")


def _column(value: str) -> str | int:
    """A column named on the command line: a 0-based index when it is all digits, else a name."""
    return int(value) if value.isdigit() else value


def _csv_list(value: str) -> list[str]:
    """Comma-separated values."""
    return [v for v in value.split(",") if v != ""]


def _tristate(value: str) -> bool | str:
    """``auto``, ``yes`` or ``no`` (``true`` / ``false``, ``1`` / ``0``)."""
    v = value.lower()
    if v == "auto":
        return "auto"
    if v in ("yes", "true", "1"):
        return True
    if v in ("no", "false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected auto, yes or no; got {value!r}")


#: the commands that read a source (train, evaluate and predict when given a source file instead of a store)
_READS = ("ingest", "demo", "train", "evaluate", "predict")
_TRANSFORMS = ("ingest", "demo", "split", "train")  # ... those that fit a transform
_WRITES = ("ingest", "make-data")  # ... and those that write a store of their own format and shard size


@dataclasses.dataclass(frozen=True)
class IngestOptions:
    """The options of :func:`dpipe.io.ingest` (its ``src`` and ``dest`` aside); see its docstring for each one's details."""

    format: str = option("zarr", "store format", choices=STORE_FORMATS, commands=_WRITES)
    source_format: str | None = option(None, "format of the source (default: from its name and first line)", choices=SOURCE_FORMATS,
                                       commands=_READS)
    label: str | int | None = option(None, "label column (name, or 0-based index for CSV without header)", commands=_READS, parse=_column)
    positive: Sequence[str] | str | None = option(None, "comma-separated label values that are the positive class (all others negative)",
                                              commands=_READS, parse=_csv_list)
    negative: Sequence[str] | str | None = option(None, "comma-separated label values that are the negative class (all others positive)",
                                              commands=_READS, parse=_csv_list)
    n_features: int | None = option(None, "svmlight: number of features (an index beyond it is an error)", commands=_READS, parse=int)
    zero_based: bool | str = option("auto", "svmlight: indices start at 0 (yes), 1 (no) or auto", commands=_READS, parse=_tristate)
    header: bool | str = option("auto", "CSV: first row is a header: yes, no or auto", commands=_READS, parse=_tristate)
    skip_rows: int = option(0, "CSV: leading lines to skip", commands=_READS, parse=int)
    group_col: str | int | None = option(None, "column whose values define groups (kept as a feature too)", commands=_READS, parse=_column)
    weight_col: str | int | None = option(None, "column of non-negative sample weights", commands=_READS, parse=_column)
    like: str | None = option(None, "reuse this store's encoding (vocabularies, columns, label rule) so columns line up", commands=_READS)
    unseen: str = option("error", "with --like: a category absent from the training store is an error or encodes as all zeros",
                         choices=UNSEEN, commands=_READS)
    unlabeled: bool = option(False, "the source has no labels (no label column; svmlight label tokens dropped): a pool to score or to "
                             "name in churn / coverage constraints", commands=_READS, parse="flag")
    log1p: Sequence[str | int] | str | None = option(
        None, "store log1p(x) for these comma-separated features, every numeric feature (all), or the heavy-tailed ones (auto: never "
        "negative, max >= ~128 x median on 1 + x; reported per feature); one-hot indicators never", commands=_TRANSFORMS,
        metavar="COLS|auto|all")
    scale: str = option("none", "scale every numeric feature (after --log1p) to [0, 1] (minmax), to zero mean, unit variance (standard) or "
                        "by its largest |value| (maxabs: keeps zeros, the scale of sparse stores), fitted on the training rows and kept "
                        "in the manifest; --like stores and models re-apply it", choices=SCALES, commands=_TRANSFORMS)
    shard_rows: int | None = option(None, "rows per shard (default: about 64 MB of features)", commands=_WRITES, parse=int)
    read_rows: int | None = option(None, "rows per piece read from the source (default: dask config dpipe.read-rows)")
    overwrite: bool = option(False, "replace an existing destination (only a dpipe store is ever replaced)")
    layout: str = option("auto", "features stored dense or sparse (CSR); auto: sparse when at most 12.5% of the entries are non-zero "
                         "(one-hot columns and numeric zeros counted)",
                         choices=INGEST_LAYOUTS, commands=("ingest", "train"))
    hash_features: int | str | None = option(
        None, "CSV / Parquet: hash every feature column (numeric 'c' with its value, categorical 'c=v' with 1) into N signed slots, as "
        "scikit-learn's FeatureHasher does, instead of one-hot encoding; sparse; models score raw records alike", commands=("ingest", "train"),
        metavar="N|2^K")

    def keywords(self, command: str | None = None) -> dict[str, Any]:
        """The keyword arguments of :func:`dpipe.io.ingest` this stands for (only those ``command`` takes, when given)."""
        return {name: getattr(self, name) for name, (_, opt) in options_of(IngestOptions).items()
                if command is None or command in opt.commands}

    def given(self, command: str | None = None) -> list[str]:
        """The options set to something other than their default (only those ``command`` takes, when given)."""
        return [name for name, value in self.keywords(command).items() if value != options_of(IngestOptions)[name][0].default]

    def replace(self, **changes: Any) -> IngestOptions:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_arguments(cls, a: argparse.Namespace) -> IngestOptions:
        """The options of a ``dpipe`` command's parsed flags (:func:`add_ingest_arguments`)."""
        return cls(**{name: getattr(a, name) for name in options_of(cls) if hasattr(a, name)})


def ingest_defaults(names: Sequence[str] | None = None) -> dict[str, Any]:
    """``name -> default`` of the ingest options (``names``: only these), as ingest's signature must have them."""
    defaults = keyword_defaults(IngestOptions, "ingest")
    return defaults if names is None else {n: defaults[n] for n in names}


def add_ingest_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, command: str) -> None:
    """The flags of the ingest options ``command`` takes."""
    add_arguments(parser, IngestOptions, command)
