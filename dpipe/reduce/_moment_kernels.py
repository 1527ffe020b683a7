"""The column-moment kernels of a feature block, one per layout (numba, nopython, nogil).

:func:`dpipe.reduce._moments.column_weighted_moments` calls them through the block
(:meth:`dpipe.reduce._block.FeatureBlock.column_sums`); see its docstring for the sums and their order.
"""

from __future__ import annotations

import numba
import numpy as np

__all__: list[str] = []


# A dense zero adds v * 0 = +-0.0 to a sum (never -0.0) and +0.0 to the others: bitwise nothing, as a CSR block's
# missing value. Every sum is taken row after row (vectorized across the columns, never reassociated). One kernel per
# layout, both passes in it (a kernel costs numba a compile: one at the first run).
@numba.njit(nogil=True, cache=True)
def _moments(X, v, total, mean, m2):
    n, d = X.shape
    for r in range(n):
        vr = v[r]
        for k in range(d):
            x = np.float64(X[r, k])
            mean[k] += vr * x
            m2[k] += vr if x != 0.0 else 0.0
    for k in range(mean.size):  # the sums become the mean, the non-zero values' weight the zeros' part
        mean[k] /= total
        m2[k] = (total - m2[k]) * (mean[k] * mean[k])
    for r in range(n):
        vr = v[r]
        for k in range(d):
            x = np.float64(X[r, k])
            t = x - mean[k]
            m2[k] += vr * (t * t) if x != 0.0 else 0.0


@numba.njit(nogil=True, cache=True)
def _csr_moments(indptr, indices, data, v, total, mean, m2):
    for r in range(indptr.size - 1):
        vr = v[r]
        for p in range(indptr[r], indptr[r + 1]):
            x = np.float64(data[p])
            if x != 0.0:
                mean[indices[p]] += vr * x
                m2[indices[p]] += vr
    for k in range(mean.size):  # the sums become the mean, the non-zero values' weight the zeros' part
        mean[k] /= total
        m2[k] = (total - m2[k]) * (mean[k] * mean[k])
    for r in range(indptr.size - 1):
        vr = v[r]
        for p in range(indptr[r], indptr[r + 1]):
            x = np.float64(data[p])
            if x != 0.0:
                t = x - mean[indices[p]]
                m2[indices[p]] += vr * (t * t)
