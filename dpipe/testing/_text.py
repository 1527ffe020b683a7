"""Generated text-like data: Zipf-distributed term frequencies, TF-IDF-scaled rows, a planted noisy linear signal."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["tfidf_text_data"]


def tfidf_text_data(rows: int = 10_000, features: int = 100_000, per_row: int = 80, seed: int = 0, zipf: float = 1.1,
                    signal_terms: int = 2_000, noise: float = 1.0, positive_rate: float = 0.1) -> tuple[Any, np.ndarray]:
    """A CSR matrix of TF-IDF rows (as scikit-learn's ``TfidfTransformer``: ``(1 + log tf) * log((1 + n) / (1 + df)) + 1``,
    unit-length rows) and labels in {-1, +1}.

    Each row draws about ``per_row`` tokens (Poisson) from a Zipf(``zipf``) law over ``features`` term ranks (scattered
    over the columns by a seeded permutation), so few terms are in most rows and most terms in few: the shape of text,
    where the store is as wide as it is long or wider. A row is positive when a planted sparse linear score over
    ``signal_terms`` mid-frequency terms, plus Gaussian noise of ``noise`` times its spread, is in the top
    ``positive_rate``: learnable, not separable, and a weak ridge overfits the rare terms.
    """
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    perm = rng.permutation(features)  # term rank -> column
    lengths = rng.poisson(per_row, rows).clip(1)
    ranks = (rng.zipf(zipf, int(lengths.sum())) - 1) % features
    row_of = np.repeat(np.arange(rows), lengths)
    counts = sp.csr_matrix((np.ones(ranks.size), (row_of, perm[ranks])), shape=(rows, features))
    counts.sum_duplicates()
    df = np.bincount(counts.indices, minlength=features)
    idf = np.log((1.0 + rows) / (1.0 + df)) + 1.0
    X = counts.copy()
    X.data = (1.0 + np.log(X.data)) * idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X
    signal = np.zeros(features)
    hot = perm[rng.choice(np.arange(10, min(features, 50 * signal_terms)), size=min(features - 10, signal_terms), replace=False)]
    signal[hot] = rng.normal(size=hot.size)
    score = X @ signal
    score = score + noise * score.std() * rng.normal(size=rows)
    y = np.where(score > np.quantile(score, 1.0 - positive_rate), 1, -1).astype(np.int8)
    return X.tocsr().astype(np.float32), y
