"""The bundled datasets as files the examples use: ``adult.csv`` / ``adult-test.csv`` (a header, the test labels without
their trailing period), ``a9a.svm`` / ``a9a-test.svm``, ``w8a.svm`` / ``w8a-test.svm``, written from the compressed
originals of the shared data folder (``$DPIPE_SHARED_DATA``, else ``../shared/data``).

``dpipe datasets`` runs :func:`write_datasets`; the demo reads adult from the same folder (:func:`find_shared_data`).
"""

from __future__ import annotations

import bz2
import dataclasses
import filecmp
import gzip
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO

from ..exceptions import OutputError, ParameterError

__all__ = ["BUNDLED", "Bundled", "find_shared_data", "write_datasets", "ADULT_COLUMNS", "SHARED_DATA_ENV"]

log = logging.getLogger("dpipe")

#: the environment variable naming the shared data folder
SHARED_DATA_ENV = "DPIPE_SHARED_DATA"
#: adult's 15 columns, as its UCI description names them (the last one is the label)
ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation", "relationship", "race",
                 "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income")


def _adult_lines(lines: Iterable[str]) -> Iterator[str]:
    """adult's rows as CSV with a header: fields without their padding, ``>50K.`` as ``>50K`` (the test file's spelling),
    the test file's first line (``|1x3 Cross validator``) and blank lines dropped."""
    yield ",".join(ADULT_COLUMNS) + "\n"
    for line in lines:
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        fields[-1] = fields[-1].rstrip(".")
        yield ",".join(fields) + "\n"


def _as_is(lines: Iterable[str]) -> Iterator[str]:
    yield from lines


@dataclasses.dataclass(frozen=True)
class Bundled:
    """One dataset: the files written (name -> the shared data file it comes from) and how its lines are rewritten."""

    name: str
    files: tuple[tuple[str, str], ...]
    rewrite: Callable[[Iterable[str]], Iterator[str]]
    about: str


#: the datasets ``dpipe datasets`` writes, by name
BUNDLED = {
    b.name: b for b in (
        Bundled("adult", (("adult.csv", "adult.data.gz"), ("adult-test.csv", "adult.test.gz")), _adult_lines,
                "UCI adult (census income): 14 raw columns, 8 of them strings; label column 'income', '>50K' positive (24 %)"),
        Bundled("a9a", (("a9a.svm", "a9a.gz"), ("a9a-test.svm", "a9a.t.gz")), _as_is,
                "LIBSVM a9a (adult, 123 binary features), svmlight, labels +1/-1"),
        Bundled("w8a", (("w8a.svm", "w8a.gz"), ("w8a-test.svm", "w8a.t.gz")), _as_is,
                "LIBSVM w8a (300 binary features, 3 % positive), svmlight, labels +1/-1"),
    )
}


def find_shared_data(folder: str | os.PathLike | None = None) -> str | None:
    """The shared data folder: ``folder`` when given, else ``$DPIPE_SHARED_DATA``, else ``../shared/data`` (from the working
    directory); None when none of them is a folder."""
    candidates = [folder] if folder is not None else [os.environ.get(SHARED_DATA_ENV) or None, os.path.join("..", "shared", "data")]
    for c in candidates:
        if c is not None and os.path.isdir(c):
            return os.path.abspath(c)
    return None


def _open_text(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    if path.endswith(".bz2"):
        return bz2.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def write_datasets(names: Sequence[str], dest: str | os.PathLike = ".", *, source: str | os.PathLike | None = None,
                   overwrite: bool = False) -> list[tuple[str, str]]:
    """Write the files of the bundled datasets ``names`` into the folder ``dest``.

    Parameters
    ----------
    names : sequence of str
        Keys of :data:`BUNDLED` (``adult``, ``a9a``, ``w8a``).
    dest : path
        The folder to write into (made when missing).
    source : path, optional
        The shared data folder (default: :func:`find_shared_data`).
    overwrite : bool
        Replace a file of the same name whose content differs. A file that already holds exactly
        what would be written is kept either way (so running the command twice is harmless).

    Returns
    -------
    list of (path, state)
        Every file with ``"written"``, ``"replaced"`` or ``"up to date"``.

    Raises
    ------
    ParameterError
        An unknown name, or no shared data folder.
    OutputError
        A file of the same name with other content, without ``overwrite``.
    """
    unknown = [n for n in names if n not in BUNDLED]
    if unknown:
        raise ParameterError(f"no bundled dataset {unknown[0]!r} (datasets: {', '.join(BUNDLED)})")
    folder = find_shared_data(source)
    if folder is None:
        where = os.fspath(source) if source is not None else f"${SHARED_DATA_ENV} or ../shared/data"
        raise ParameterError(f"no shared data folder at {where}: set {SHARED_DATA_ENV} to the folder holding adult.data.gz, a9a.gz, ...")
    os.makedirs(dest, exist_ok=True)
    done = []
    for name in names:
        b = BUNDLED[name]
        for out_name, src_name in b.files:
            src, out = os.path.join(folder, src_name), os.path.normpath(os.path.join(os.fspath(dest), out_name))
            if not os.path.isfile(src):
                raise ParameterError(f"{src}: missing from the shared data folder (dataset {name})")
            tmp = os.path.join(os.path.dirname(out) or ".", f".{out_name}.tmp-{os.getpid()}")
            try:
                with _open_text(src) as f, open(tmp, "w", encoding="utf-8", newline="") as g:
                    g.writelines(b.rewrite(f))
                if os.path.exists(out) and filecmp.cmp(tmp, out, shallow=False):
                    state = "up to date"
                elif os.path.exists(out) and not overwrite:
                    raise OutputError(f"{out} exists with other content; pass overwrite=True to replace it")
                else:
                    state = "replaced" if os.path.exists(out) else "written"
                    os.replace(tmp, out)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
            log.debug("%s: %s from %s", out, state, src)
            done.append((out, state))
    return done
