"""svmlight / LIBSVM text parsing: a numba kernel and a plain-Python reference.

Grammar of one line (bytes; whitespace is space, tab, CR, VT, FF)::

    line    := [label (feature)*] [# comment]
    label   := number
    feature := index ":" number
    index   := digit+                      (at most 2**31 - 1)
    number  := [+-] (digit+ [. digit*] | . digit+) [(e|E) [+-] digit+]

* ``#`` starts a comment anywhere; blank and comment-only lines are skipped;
  a line holding only a label is a row without nonzeros.
* Indices must be strictly increasing within a line (as scikit-learn requires).
* ``qid:`` fields are refused ("qid is not supported").
* Values and labels must be finite (``1e999`` is refused).

:func:`parse_block` runs the numba kernel (nopython, nogil) over a block of whole
lines and returns CSR arrays; the kernel reports an error code and the line of the
first malformed token, and :func:`parse_block` raises an
:class:`~dpipe.exceptions.InputError` naming the file and 1-based line.
:func:`dpipe.testing.parse_block_reference` does the same in plain Python (regular
expressions and :func:`float`); the test-suite checks that both agree.

Numbers are converted exactly: the kernel uses the exact fast path (at most 15
significant digits and a decimal exponent in [-22, 22], one correctly rounded
multiplication or division) and hands every other token back to Python's
:func:`float`, so the result is bit-identical to ``float(token)``.
"""

from __future__ import annotations

import dataclasses
import re

import numba
import numpy as np

from ..exceptions import InputError
from ._values import float32_problem

__all__ = ["SvmBlock", "parse_block", "looks_like_svmlight", "MAX_INDEX"]

MAX_INDEX = 2**31 - 1

OK, FULL, ERR_LABEL, ERR_FEATURE, ERR_VALUE, ERR_QID, ERR_ORDER, ERR_BIG = range(8)

_POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)


@dataclasses.dataclass
class SvmBlock:
    """Rows of one parsed block, in CSR form.

    Attributes
    ----------
    labels : ndarray of float64, shape (n,)
    indptr : ndarray of int64, shape (n + 1,)
    indices : ndarray of int32
        Feature indices as written in the source (zero- or one-based).
    values : ndarray of float64
    lines : ndarray of int64, shape (n,)
        1-based line number of every row in its file.
    """

    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    lines: np.ndarray

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.labels.shape[0])


# ---------------------------------------------------------------------------------
# numba kernel
# ---------------------------------------------------------------------------------
@numba.njit(nogil=True, cache=True)
def _is_ws(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(nogil=True, cache=True)
def _parse_number(buf, s, e):
    """Parse ``buf[s:e]``; return (status, value): 0 exact, 1 needs Python, -1 malformed."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    m = 0
    nsig = 0
    ndig = 0
    dropped = 0
    exp10 = 0
    while i < e and buf[i] >= 48 and buf[i] <= 57:
        d = buf[i] - 48
        ndig += 1
        if nsig > 0 or d != 0:
            if nsig < 18:
                m = m * 10 + d
                nsig += 1
            else:
                dropped += 1
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and buf[i] >= 48 and buf[i] <= 57:
            d = buf[i] - 48
            ndig += 1
            if nsig > 0 or d != 0:
                if nsig < 18:
                    m = m * 10 + d
                    nsig += 1
                    exp10 -= 1
                else:
                    dropped += 1
            else:
                exp10 -= 1
            i += 1
    if ndig == 0:
        return -1, 0.0
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        nexp = 0
        ev = 0
        while i < e and buf[i] >= 48 and buf[i] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[i] - 48)
            nexp += 1
            i += 1
        if nexp == 0:
            return -1, 0.0
        exp10 += -ev if eneg else ev
    if i != e:
        return -1, 0.0
    if m == 0 and dropped == 0:
        return 0, -0.0 if neg else 0.0
    if dropped > 0 or nsig > 15 or exp10 < -22 or exp10 > 22:
        return 1, 0.0
    v = float(m)
    if exp10 >= 0:
        v = v * _POW10[exp10]
    else:
        v = v / _POW10[-exp10]
    return 0, -v if neg else v


@numba.njit(nogil=True, cache=True)
def _count_bytes(buf):
    """(number of newlines, number of colons) in ``buf``."""
    nl = 0
    col = 0
    for k in range(buf.shape[0]):
        c = buf[k]
        if c == 10:
            nl += 1
        elif c == 58:
            col += 1
    return nl, col


@numba.njit(nogil=True, cache=True)
def _svm_kernel(buf, pos, row, nnz, line, labels, indptr, indices, values, row_line, slow_target, slow_start, slow_end):
    """Parse whole lines of ``buf`` from byte ``pos``.

    Returns (status, pos, row, nnz, line, nslow). ``status`` FULL means the
    slow-token buffer filled up: the caller converts the recorded slow tokens and
    calls again from ``pos`` (the start of the unfinished line). On an error,
    ``pos`` is the byte offset of the offending token and ``line`` its 0-based line
    within the block.
    """
    n = buf.shape[0]
    cap = slow_target.shape[0]
    nslow = 0
    i = pos
    while i < n:
        line_pos = i
        nnz0 = nnz
        nslow0 = nslow
        while i < n and _is_ws(buf[i]):
            i += 1
        if i >= n:
            break
        c = buf[i]
        if c == 10:
            i += 1
            line += 1
            continue
        if c == 35:
            while i < n and buf[i] != 10:
                i += 1
            i += 1
            line += 1
            continue
        s = i
        while i < n and not _is_ws(buf[i]) and buf[i] != 10 and buf[i] != 35:
            i += 1
        st, v = _parse_number(buf, s, i)
        if st < 0:
            return ERR_LABEL, s, row, nnz, line, nslow
        if st == 1:
            if nslow == cap:
                return FULL, line_pos, row, nnz0, line, nslow0
            slow_target[nslow] = -(row + 1)
            slow_start[nslow] = s
            slow_end[nslow] = i
            nslow += 1
        labels[row] = v
        prev = -1
        while True:
            while i < n and _is_ws(buf[i]):
                i += 1
            if i >= n or buf[i] == 10:
                i += 1
                break
            if buf[i] == 35:
                while i < n and buf[i] != 10:
                    i += 1
                i += 1
                break
            s = i
            while i < n and not _is_ws(buf[i]) and buf[i] != 10 and buf[i] != 35:
                i += 1
            if i - s >= 4 and buf[s] == 113 and buf[s + 1] == 105 and buf[s + 2] == 100 and buf[s + 3] == 58:
                return ERR_QID, s, row, nnz, line, nslow
            j = s
            idx = 0
            big = False
            while j < i and buf[j] >= 48 and buf[j] <= 57:
                if not big:
                    idx = idx * 10 + (buf[j] - 48)
                    if idx > 2147483647:
                        big = True
                j += 1
            if j == s or j >= i or buf[j] != 58:
                return ERR_FEATURE, s, row, nnz, line, nslow
            if big:
                return ERR_BIG, s, row, nnz, line, nslow
            st, v = _parse_number(buf, j + 1, i)
            if st < 0:
                return ERR_VALUE, s, row, nnz, line, nslow
            if idx <= prev:
                return ERR_ORDER, s, row, nnz, line, nslow
            if st == 1:
                if nslow == cap:
                    return FULL, line_pos, row, nnz0, line, nslow0
                slow_target[nslow] = nnz
                slow_start[nslow] = j + 1
                slow_end[nslow] = i
                nslow += 1
            indices[nnz] = idx
            values[nnz] = v
            nnz += 1
            prev = idx
        row_line[row] = line
        row += 1
        indptr[row] = nnz
        line += 1
    return OK, i, row, nnz, line, nslow


# ---------------------------------------------------------------------------------
# errors shared by both parsers
# ---------------------------------------------------------------------------------
def _show_token(tok: bytes) -> str:
    s = tok.decode("utf-8", "replace")
    return s if len(s) <= 60 else s[:57] + "..."


def _error(code: int, path: str, line: int, tok: bytes) -> InputError:
    t = _show_token(tok)
    if code == ERR_LABEL:
        msg = f"malformed label {t!r} (expected a number)"
    elif code == ERR_FEATURE:
        msg = f"malformed token {t!r} (expected index:value)"
    elif code == ERR_VALUE:
        msg = f"malformed value in token {t!r} (expected index:value with a numeric value)"
    elif code == ERR_QID:
        msg = f"qid is not supported (token {t!r}); remove the qid: fields"
    elif code == ERR_ORDER:
        msg = f"feature indices must be strictly increasing within a line (token {t!r})"
    elif code == ERR_BIG:
        msg = f"feature index too large in token {t!r} (at most {MAX_INDEX})"
    else:  # pragma: no cover - internal
        msg = f"cannot parse token {t!r} (error {code})"
    return InputError(msg, path=path, line=line)


def _check_finite(block: SvmBlock, path: str) -> None:
    """Refuse infinite labels / values (numbers too large for float64)."""
    bad_lab = np.flatnonzero(~np.isfinite(block.labels))
    bad_val = np.flatnonzero(~np.isfinite(block.values))
    rows = []
    if bad_lab.size:
        rows.append((int(bad_lab[0]), "label"))
    if bad_val.size:
        r = int(np.searchsorted(block.indptr, bad_val[0], side="right") - 1)
        rows.append((r, f"value of feature {int(block.indices[bad_val[0]])}"))
    if rows:
        r, what = min(rows)
        raise InputError(f"the {what} is out of the range of float64 (not finite)", path=path, line=int(block.lines[r]))


def _check_float32(block: SvmBlock, path: str) -> None:
    """Refuse feature values that float32 cannot hold (1e39 would be stored as inf, 1e-50 as 0)."""
    problem = float32_problem(block.values)
    if problem is not None:
        k, reason = problem
        r = int(np.searchsorted(block.indptr, k, side="right") - 1)
        raise InputError(f"the value {float(block.values[k])!r} of feature {int(block.indices[k])} {reason}", path=path, line=int(block.lines[r]))


_TOKEN_END = re.compile(rb"[^ \t\r\x0b\x0c\n#]*")


def parse_block(data: bytes, first_line: int = 1, path: str = "<bytes>", float32: bool = False) -> SvmBlock:
    """Parse a block of whole svmlight lines with the numba kernel.

    Parameters
    ----------
    data : bytes
        Whole lines (a missing final newline is added).
    first_line : int
        1-based line number of the first line of ``data`` in its file.
    path : str
        File name for error messages.
    float32 : bool
        Also refuse a value that float32 cannot hold (beyond its range, or non-zero
        but below its smallest subnormal): what ingest, which stores float32, asks for.

    Returns
    -------
    SvmBlock

    Raises
    ------
    InputError
        A malformed line; the message names ``path`` and the line.
    """
    if data and not data.endswith(b"\n"):
        data = bytes(data) + b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    n_lines, n_colons = _count_bytes(buf)
    labels = np.empty(n_lines, dtype=np.float64)
    indptr = np.zeros(n_lines + 1, dtype=np.int64)
    indices = np.empty(n_colons, dtype=np.int32)
    values = np.empty(n_colons, dtype=np.float64)
    row_line = np.empty(n_lines, dtype=np.int64)
    cap = 1024
    pos = row = nnz = line = 0
    while True:
        slow_target = np.empty(cap, dtype=np.int64)
        slow_start = np.empty(cap, dtype=np.int64)
        slow_end = np.empty(cap, dtype=np.int64)
        status, pos2, row2, nnz2, line2, nslow = _svm_kernel(
            buf, pos, row, nnz, line, labels, indptr, indices, values, row_line, slow_target, slow_start, slow_end
        )
        for k in range(nslow):
            v = float(data[slow_start[k] : slow_end[k]])
            t = slow_target[k]
            if t >= 0:
                values[t] = v
            else:
                labels[-t - 1] = v
        if status == OK:
            row, nnz = row2, nnz2
            break
        if status == FULL:
            if row2 == row:  # a single line holds more slow tokens than the buffer
                cap *= 4
            pos, row, nnz, line = pos2, row2, nnz2, line2
            continue
        m = _TOKEN_END.match(data, int(pos2))
        raise _error(int(status), path, first_line + int(line2), m.group(0) if m else b"")
    block = SvmBlock(labels[:row], indptr[: row + 1], indices[:nnz], values[:nnz], row_line[:row] + first_line)
    _check_finite(block, path)
    if float32:
        _check_float32(block, path)
    return block


_NUM = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


_SVM_LINE = re.compile(rb"\s*[+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?(?:\s+(?:\d+|qid):\S+)+\s*")


def looks_like_svmlight(line: bytes) -> bool | None:
    """Whether a source line looks like svmlight: True, False, or None (cannot tell).

    A line with ``index:value`` tokens after a numeric label and no comma is
    svmlight; a line with a comma is not; a bare label or an empty line cannot tell.
    """
    body = line.split(b"#", 1)[0]
    if b"," in body:
        return False
    if not body.strip():
        return None
    if _SVM_LINE.fullmatch(body):
        return True
    if _NUM.fullmatch(body.strip()):
        return None
    return False
