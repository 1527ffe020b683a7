"""The float64-accumulating product kernels of a shard's feature block, dense and CSR (numba, nopython, nogil).

The blocks of :mod:`._block` (``DenseBlock``: a C-contiguous float32 ``(n, d)`` array; ``CSRBlock``: a
``scipy.sparse.csr_array`` with float32 values) call these kernels from their product methods (``matvec``,
``rmatvec``, ...); nothing else does. Each costs O(n d) or O(nnz). Stores keep features in float32. ``X @ w``
and ``X.T @ g`` are accumulated in float64 without making a float64 copy of the shard (which NumPy would do, costing
twice the shard's memory and bandwidth every pass).

Every sum is taken in an order fixed by the column indices alone, so a dense and a CSR block
of the same rows give bitwise the same products (a dense zero adds a signed zero, which
changes no sum), and so do both layouts' fits. ``X.T @ g`` adds row after row. A row sum of
``X @ w`` goes to :data:`LANES` lanes by column (``k mod LANES``, each in increasing ``k``),
then the lanes add in a fixed tree: written as LLVM vector code (plain ``fmul`` / ``fadd``,
never reassociated nor contracted to FMA), so the dense product keeps SIMD speed without the
compiler's reassociation, whose order no CSR row could reproduce; a CSR row adds each stored
value to its column's lane with a masked vector add. Measured against the compiler-vectorized
(``fastmath``) kernels they replace, one thread, best of 3 x 9 runs (old and new interleaved) on a shared
2-core machine: dense ``X @ w`` 0.74-1.13x (1,333,333 x 30: 13.5 ms against 18.2; 338,983 x 118,
160 MB: 11.9 against 12.1; 10^6 x 120: 36 against 33), the pair product 0.65-1.14x; CSR
``X @ w`` 1.02-1.10x (kdd99-like, 13 values a row: 12.5 ms against 11.5 for 494,021 rows). The CSR kernels
against that masked add and NumPy-style signed indexing, one thread, best of 21 (old and new interleaved), one shard
(kdd99: 98,804 x 118, 1.36M stored values; Reuters: 7,770 x 8,315, 340k; 2,500 x 10^5, 200k): ``X @ w`` 0.89 ns a
stored value against 1.15 on kdd99 (1.21 ms against 1.56), 1.02-1.05 against 1.13-1.15 on the others; the pair
1.17-1.19 against 1.52-1.60 (2.06 against 2.04 at 10^5 columns); ``X.T @ g`` 0.65-0.85 against 1.17-1.35 (kdd99:
0.89 ms against 1.59); with the squares 0.87-1.98 against 1.73-2.99; ``rows_product`` 1.3-1.9x.
Each kernel has a plain NumPy reference in :mod:`dpipe.testing` (``X @ w``'s adds in the lanes' order: bitwise).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["LANES"]


#: lanes of a row sum ``x . w``: lane ``j`` adds the products of the columns ``k = j (mod LANES)`` in increasing
#: ``k``, then the lanes add in a fixed tree (:func:`_fold_ir`). A CSR row's stored values go to the same lanes in
#: the same order, and a dense zero adds a signed zero, which leaves a lane (never ``-0.0``) unchanged: so a dense and
#: a CSR block of the same rows give bitwise the same ``X @ w``.
LANES = 8


def _fold_ir(builder, acc, lanes):
    """The fixed tree over a vector of lane sums: halves added lane by lane (``acc[j] + acc[j + h]``) down to one."""
    i32 = ir.IntType(32)
    while lanes > 1:
        h = lanes // 2
        lo = builder.shuffle_vector(acc, acc, ir.Constant(ir.VectorType(i32, h), list(range(h))))
        hi = builder.shuffle_vector(acc, acc, ir.Constant(ir.VectorType(i32, h), list(range(h, lanes))))
        acc = builder.fadd(lo, hi)
        lanes = h
    return builder.extract_element(acc, ir.Constant(i32, 0))


def _masked_load(builder, ptr, vty, mask, align):
    """``llvm.masked.load`` of a ``vty`` vector at ``ptr`` (the lanes off ``mask`` read nothing and give +0.0)."""
    pty = vty.as_pointer()
    suffix = "p0" if getattr(pty, "is_opaque", False) else f"p0v{vty.count}{'f32' if vty.element == ir.FloatType() else 'f64'}"
    name = f"llvm.masked.load.v{vty.count}{'f32' if vty.element == ir.FloatType() else 'f64'}.{suffix}"
    fnty = ir.FunctionType(vty, [pty, ir.IntType(32), mask.type, vty])
    fn = builder.module.globals.get(name) or ir.Function(builder.module, fnty, name=name)
    return builder.call(fn, [builder.bitcast(ptr, pty), ir.Constant(ir.IntType(32), align), mask, ir.Constant(vty, None)])


def _lane_dots_ir(context, builder, x_type, x, w_types, ws):
    """LLVM IR of the row sums ``x . w`` for each ``w`` of ``ws`` in the order of :data:`LANES`: one vector of
    ``LANES`` float64 sums per ``w`` (plain ``fmul`` and ``fadd``: no reassociation, no FMA contraction)."""
    i64, i32, f64 = ir.IntType(64), ir.IntType(32), ir.DoubleType()
    xa = context.make_array(x_type)(context, builder, x)
    was = [context.make_array(t)(context, builder, a) for t, a in zip(w_types, ws)]
    xt = context.get_value_type(x_type.dtype)
    vx, vd = ir.VectorType(xt, LANES), ir.VectorType(f64, LANES)
    item = x_type.dtype.bitwidth // 8
    d = builder.extract_value(xa.shape, 0)
    full = builder.sub(d, builder.srem(d, ir.Constant(i64, LANES)))
    zero = ir.Constant(vd, None)  # +0.0 in every lane

    def widen(v):
        return v if xt == f64 else builder.fpext(v, vd)

    fn, entry = builder.function, builder.block
    head, body, tail = (fn.append_basic_block(f"lanes.{name}") for name in ("head", "body", "tail"))
    builder.branch(head)
    builder.position_at_end(head)  # the whole groups of LANES columns, one vector step each
    k = builder.phi(i64)
    accs = [builder.phi(vd) for _ in ws]
    k.add_incoming(ir.Constant(i64, 0), entry)
    for a in accs:
        a.add_incoming(zero, entry)
    builder.cbranch(builder.icmp_signed("<", k, full), body, tail)
    builder.position_at_end(body)
    xv = widen(builder.load(builder.bitcast(builder.gep(xa.data, [k]), vx.as_pointer()), align=item))
    for a, wa in zip(accs, was):
        wv = builder.load(builder.bitcast(builder.gep(wa.data, [k]), vd.as_pointer()), align=8)
        a.add_incoming(builder.fadd(a, builder.fmul(xv, wv)), body)
    k.add_incoming(builder.add(k, ir.Constant(i64, LANES)), body)
    builder.branch(head)
    # the last d mod LANES columns into lanes 0, 1, ...: masked loads, so the other lanes add 0.0 * 0.0 = +0.0
    builder.position_at_end(tail)
    rem = builder.trunc(builder.sub(d, full), i32)
    mask = builder.icmp_signed("<", ir.Constant(ir.VectorType(i32, LANES), list(range(LANES))),
                               builder.shuffle_vector(builder.insert_element(ir.Constant(ir.VectorType(i32, LANES), None), rem, ir.Constant(i32, 0)),
                                                      ir.Constant(ir.VectorType(i32, LANES), None), ir.Constant(ir.VectorType(i32, LANES), [0] * LANES)))
    xs = widen(_masked_load(builder, builder.gep(xa.data, [full]), vx, mask, item))
    parts = [builder.fmul(xs, _masked_load(builder, builder.gep(wa.data, [full]), vd, mask, 8)) for wa in was]
    return [_fold_ir(builder, builder.fadd(a, p), LANES) for a, p in zip(accs, parts)]


def _lane_dots_typing(x, ws):
    ok = isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C" and x.dtype in (types.float32, types.float64)
    return ok and all(isinstance(w, types.Array) and w.ndim == 1 and w.layout == "C" and w.dtype == types.float64 for w in ws)


@intrinsic
def _row_dot(typingctx, x, w):
    """``x . w`` for a C-contiguous float32 or float64 row ``x`` and a float64 ``w`` of its length, in lanes."""
    if not _lane_dots_typing(x, [w]):
        return None

    def codegen(context, builder, sig, args):
        return _lane_dots_ir(context, builder, sig.args[0], args[0], sig.args[1:], args[1:])[0]

    return types.float64(x, w), codegen


@intrinsic
def _row_dot_pair(typingctx, x, u, w):
    """``(x . u, x . w)`` reading ``x`` once; each as :func:`_row_dot` gives it."""
    if not _lane_dots_typing(x, [u, w]):
        return None
    ret = types.UniTuple(types.float64, 2)

    def codegen(context, builder, sig, args):
        return context.make_tuple(builder, ret, _lane_dots_ir(context, builder, sig.args[0], args[0], sig.args[1:], args[1:]))

    return ret(x, u, w), codegen


@numba.njit(nogil=True, cache=True)
def _matvec(X, w, out):
    for r in range(X.shape[0]):
        out[r] = _row_dot(X[r], w)  # type: ignore[call-arg]  # numba supplies the typing context
    return out


@numba.njit(nogil=True, cache=True)
def _matvec_pair(X, u, w, out_u, out_w):
    for r in range(X.shape[0]):
        out_u[r], out_w[r] = _row_dot_pair(X[r], u, w)  # type: ignore[call-arg]  # numba supplies the typing context


@numba.njit(nogil=True, cache=True, fastmath=False)
def _rmatvec(X, g, out):
    n, d = X.shape
    for r in range(n):
        gr = g[r]
        if gr != 0.0:
            for k in range(d):
                out[k] += gr * np.float64(X[r, k])
    return out


@numba.njit(nogil=True, cache=True, fastmath=False)
def _rmatvec_squares(X, g, c, out, out_sq):
    """``out += X^T g`` (the same sums, in the same order, as :func:`_rmatvec`) and ``out_sq += (X * X)^T c``."""
    n, d = X.shape
    for r in range(n):
        gr = g[r]
        cr = c[r]
        if gr != 0.0 or cr != 0.0:
            for k in range(d):
                x = np.float64(X[r, k])
                out[k] += gr * x
                out_sq[k] += cr * (x * x)


def _lane_bits(module):
    """The constant table ``1 << j`` (one byte each, ``j < LANES``): lane ``j``'s mask, read as ``<LANES x i1>``."""
    name = "dpipe_lane_bits"
    g = module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(ir.IntType(8), LANES)
        g = ir.GlobalVariable(module, ty, name=name)
        g.initializer = ir.Constant(ty, [1 << j for j in range(LANES)])
        g.global_constant = True
        g.linkage = "internal"
    return g


def _csr_lane_add_ir(builder, ia, da, was, accs, p):
    """``acc + x_p w[c_p]`` in the lane ``c_p mod LANES`` of each ``acc`` (one per ``w``) for the stored value ``p``:
    a masked vector add, so the other lanes add nothing.

    Bound by the vector shuffle port, not by reading: ``x_p`` and ``w[c_p]`` are splat as they load (x86: a
    broadcasting convert and a broadcast operand of the multiply, no shuffle) and the lane's mask is read from a byte
    table (:func:`_lane_bits`) instead of compared: 7 instructions a stored value instead of 10, 1.3x as fast.
    The product is the same ``fpext(x) * w`` in every lane, so the sums are bitwise those of a scalar product."""
    i64, i32, f64 = ir.IntType(64), ir.IntType(32), ir.DoubleType()
    vd, vi = ir.VectorType(f64, LANES), ir.VectorType(i32, LANES)

    def splat(v, vty):
        return builder.shuffle_vector(builder.insert_element(ir.Constant(vty, None), v, ir.Constant(i32, 0)),
                                      ir.Constant(vty, None), ir.Constant(vi, [0] * LANES))

    c = builder.load(builder.gep(ia.data, [p]))
    c = builder.sext(c, i64) if c.type.width < 64 else c
    x = builder.load(builder.gep(da.data, [p]))
    x = splat(x, ir.VectorType(x.type, LANES))
    x = builder.fpext(x, vd) if x.type != vd else x
    lane = builder.bitcast(builder.load(builder.gep(_lane_bits(builder.module), [ir.Constant(i64, 0), builder.and_(c, ir.Constant(i64, LANES - 1))])), ir.VectorType(ir.IntType(1), LANES))
    out = []
    for a, wa in zip(accs, was):
        prod = builder.fmul(x, splat(builder.load(builder.gep(wa.data, [c])), vd))
        out.append(builder.select(lane, builder.fadd(a, prod), a))
    return out


def _csr_row_dots_ir(context, builder, sig, args):
    """LLVM IR of a CSR row's sums ``x . w`` (``args``: indices, data, the ``w``, then the row's ``lo, hi`` in the
    stored values) in the lanes of :func:`_lane_dots_ir`: each stored value, in the row's (sorted) order, added to the
    lane of its column (:func:`_csr_lane_add_ir`)."""
    i64 = ir.IntType(64)
    vd = ir.VectorType(ir.DoubleType(), LANES)
    ia = context.make_array(sig.args[0])(context, builder, args[0])
    da = context.make_array(sig.args[1])(context, builder, args[1])
    was = [context.make_array(t)(context, builder, a) for t, a in zip(sig.args[2:-2], args[2:-2])]
    lo = context.cast(builder, args[-2], sig.args[-2], types.int64)
    hi = context.cast(builder, args[-1], sig.args[-1], types.int64)
    fn, entry = builder.function, builder.block
    head, body, done = (fn.append_basic_block(f"csr_lanes.{name}") for name in ("head", "body", "done"))
    builder.branch(head)
    builder.position_at_end(head)
    p = builder.phi(i64)
    accs = [builder.phi(vd) for _ in was]
    p.add_incoming(lo, entry)
    for a in accs:
        a.add_incoming(ir.Constant(vd, None), entry)
    builder.cbranch(builder.icmp_signed("<", p, hi), body, done)
    builder.position_at_end(body)
    for a, new in zip(accs, _csr_lane_add_ir(builder, ia, da, was, accs, p)):
        a.add_incoming(new, body)
    p.add_incoming(builder.add(p, ir.Constant(i64, 1)), body)
    builder.branch(head)
    builder.position_at_end(done)
    return [_fold_ir(builder, a, LANES) for a in accs]


def _csr_typing(indices, data, ws, lo, hi):
    ok = all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" for a in (indices, data, *ws))
    return (ok and isinstance(indices.dtype, types.Integer) and data.dtype in (types.float32, types.float64)
            and all(w.dtype == types.float64 for w in ws) and isinstance(lo, types.Integer) and isinstance(hi, types.Integer))


@intrinsic
def _csr_row_dot(typingctx, indices, data, w, lo, hi):
    """The sum ``x . w`` of the CSR row stored at ``lo:hi``, as :func:`_row_dot` gives it for the dense row."""
    if not _csr_typing(indices, data, [w], lo, hi):
        return None

    def codegen(context, builder, sig, args):
        return _csr_row_dots_ir(context, builder, sig, args)[0]

    return types.float64(indices, data, w, lo, hi), codegen


@intrinsic
def _csr_row_dot_pair(typingctx, indices, data, u, w, lo, hi):
    """``(x . u, x . w)`` of the CSR row stored at ``lo:hi``, each as :func:`_csr_row_dot` gives it."""
    if not _csr_typing(indices, data, [u, w], lo, hi):
        return None
    ret = types.UniTuple(types.float64, 2)

    def codegen(context, builder, sig, args):
        return context.make_tuple(builder, ret, _csr_row_dots_ir(context, builder, sig, args))

    return ret(indices, data, u, w, lo, hi), codegen


@numba.njit(nogil=True, cache=True)
def _csr_matvec(indptr, indices, data, w, out):
    for r in range(out.size):
        out[r] = _csr_row_dot(indices, data, w, indptr[r], indptr[r + 1])  # type: ignore[call-arg]  # numba supplies the typing context
    return out


@numba.njit(nogil=True, cache=True)
def _csr_matvec_pair(indptr, indices, data, u, w, out_u, out_w):
    for r in range(out_u.size):
        out_u[r], out_w[r] = _csr_row_dot_pair(indices, data, u, w, indptr[r], indptr[r + 1])  # type: ignore[call-arg]  # numba supplies the typing context


@numba.njit(nogil=True, cache=True, fastmath=False)
def _csr_rmatvec(indptr, indices, data, g, out):
    # unsigned positions and columns (a CSR block's are never negative): no wraparound test on each index
    for r in range(indptr.size - 1):
        gr = g[r]
        if gr != 0.0:
            for p in range(np.uint64(indptr[r]), np.uint64(indptr[r + 1])):
                out[np.uint64(indices[p])] += gr * np.float64(data[p])
    return out


@numba.njit(nogil=True, cache=True, fastmath=False)
def _csr_rmatvec_squares(indptr, indices, data, g, c, out, out_sq):
    for r in range(indptr.size - 1):
        gr = g[r]
        cr = c[r]
        if gr != 0.0 or cr != 0.0:
            for p in range(np.uint64(indptr[r]), np.uint64(indptr[r + 1])):  # unsigned: as in _csr_rmatvec
                x = np.float64(data[p])
                k = np.uint64(indices[p])
                out[k] += gr * x
                out_sq[k] += cr * (x * x)


@numba.njit(nogil=True, cache=True)
def _rows_product(X, rows, D, dw, db, out):
    """``out[:d] += X_A^T (D (X_A dw - db))``, ``out[d] -= sum D (X_A dw - db)`` over the rows ``A`` only."""
    d = X.shape[1]
    for k in range(rows.size):
        r = rows[k]
        u = -db
        for j in range(d):
            u += np.float64(X[r, j]) * dw[j]
        q = D[k] * u
        for j in range(d):
            out[j] += q * np.float64(X[r, j])
        out[d] -= q
    return out


@numba.njit(nogil=True, cache=True)
def _csr_rows_product(indptr, indices, data, rows, D, dw, db, out):
    d = out.size - 1
    for k in range(rows.size):
        r = rows[k]
        u = -db
        lo, hi = np.uint64(indptr[r]), np.uint64(indptr[r + 1])  # unsigned: as in _csr_rmatvec
        for p in range(lo, hi):
            u += np.float64(data[p]) * dw[np.uint64(indices[p])]
        q = D[k] * u
        for p in range(lo, hi):
            out[np.uint64(indices[p])] += q * np.float64(data[p])
        out[d] -= q
    return out
