"""Figures users would rather look at than read: ROC curves."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["plot_roc"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike) -> str:
    path = os.fspath(path)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    os.replace(tmp, path)
    return path


def plot_roc(curves: Mapping[str, tuple[np.ndarray, np.ndarray, float]], path: str | os.PathLike, title: str = "ROC curve") -> str:
    """Write a PNG with one ROC curve per entry ``name -> (fpr, tpr, auc)``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5))
    for name, (fpr, tpr, auc) in curves.items():
        ax.plot(fpr, tpr, lw=1.6, label=f"{name} (AUC {auc:.4f})")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title=title, xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(alpha=0.3)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)

