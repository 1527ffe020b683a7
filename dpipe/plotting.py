"""Figures users would rather look at than read: ROC curves and convergence curves."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["plot_roc", "plot_convergence"]


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


def plot_convergence(histories: Mapping[str, Sequence[Mapping[str, Any]]], path: str | os.PathLike, key: str = "fun", title: str = "convergence") -> str:
    """Write a PNG of ``key`` against wall time, one line per named fit history."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, hist in histories.items():
        if not hist:
            continue
        t = [h["seconds"] for h in hist]
        v = [h[key] for h in hist]
        ax.plot(t, v, marker=".", lw=1.2, label=name)
    ax.set(xlabel="seconds", ylabel=key, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
