"""Figures users would rather look at than read: ROC curves, positive rates by group, a registry's retrain history,
``lam="auto"``'s regularization paths."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["plot_demo", "plot_roc", "plot_retrain_history", "plot_lam_path"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike) -> str:
    """Write ``fig`` as a PNG marked as dpipe's (text chunk ``dpipe.format = dpipe-plot``) through a temporary sibling
    and a rename, holding the destination's lock (:func:`dpipe._locks.destination_lock`); an OS error names ``path``."""
    from ._locks import before_rename, destination_lock
    from ._modes import set_default_mode
    from ._output import write_error
    from ._written import PLOT_FORMAT
    from .exceptions import DPipeError

    path = os.fspath(path)
    parent, name = os.path.split(os.path.abspath(path))
    with destination_lock(path, "plot"):
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp-", dir=parent)
            os.close(fd)
            fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight", metadata={"dpipe.format": PLOT_FORMAT})
            set_default_mode(tmp)  # mkstemp made it 0600
            before_rename(path)  # no signal received, and the lock still this process's
            os.replace(tmp, path)
        except BaseException as exc:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            if isinstance(exc, OSError) and not isinstance(exc, DPipeError):
                raise write_error(path, "plot", exc) from exc
            raise
    return path


def plot_lam_path(paths: Mapping[str, Mapping[str, Any]], path: str | os.PathLike, title: str = "lam='auto': held-out measure along the path") -> str:
    """Write a PNG with one line per fit record ``name -> info["lam_path"]`` (a model's ``fit["info"]["lam_path"]``): how far
    each ``lam`` of the path is below the best held-out measure (0: the chosen ``lam``, a star), strong to weak from left to
    right; with several folds each fold's own measure too (thin lines, the same distance from the best mean), and the fixed
    default ``lam`` a cross where the path measured it."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, record in paths.items():
        best, lams = max(record["scores"]), record["lams"]
        folds = record.get("fold_scores") or []
        line = ax.plot(lams, [best - s for s in record["scores"]], marker="o", label=f"{name}: {record['chosen']:.3g}"
                       + (f" ({len(folds[0])} folds)" if folds and len(folds[0]) > 1 else ""))[0]
        if folds and len(folds[0]) > 1:
            for j in range(len(folds[0])):
                ax.plot(lams, [best - f[j] for f in folds], color=line.get_color(), lw=0.6, alpha=0.4)
        ax.plot([record["chosen"]], [best - record["chosen_score"]], marker="*", ms=13, color=line.get_color(), ls="none")
        if record.get("fixed_default") in lams:
            i = lams.index(record["fixed_default"])
            ax.plot([lams[i]], [best - record["scores"][i]], marker="x", ms=10, mew=2, color=line.get_color(), ls="none")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.invert_xaxis()
    ax.set(xlabel="lam (strong to weak: the path's order)", ylabel="best held-out measure - held-out measure",
           title=title + "\n(star: chosen; cross: the fixed default lam; thin: each fold)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


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



def plot_demo(curves: Mapping[str, tuple[np.ndarray, np.ndarray, float, float | None, float | None]], ratios: Mapping[str, float],
              path: str | os.PathLike, title: str = "dpipe demo", ratio: float = 0.8, fpr_bound: float | None = None) -> str:
    """Write a PNG with the models' test ROC curves and operating points (``name -> (fpr, tpr, auc, point's fpr, point's
    tpr)``, a point None when undefined; ``fpr_bound``: a Neyman-Pearson bound's vertical line) and, when ``ratios`` has any, a second panel of each model's group ratio (``name ->
    lowest group's positive rate over the highest's``) against the ``ratio`` rule's line. The legends sit below the axes,
    so they hide no curve and no bar."""
    plt = _pyplot()
    panels = 2 if ratios else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.6 * panels, 6.2), squeeze=False)
    ax = axes[0][0]
    colors = {name: f"C{i}" for i, name in enumerate(curves)}
    for name, (fpr, tpr, auc, x, y) in curves.items():
        ax.plot(fpr, tpr, lw=1.4, color=colors[name], label=f"{name} (AUC {auc:.3f})")
        if x is not None and y is not None:
            ax.plot([x], [y], "o", ms=7, color=colors[name], markeredgecolor="black")
    if fpr_bound is not None:
        ax.axvline(fpr_bound, color="grey", ls=":", lw=1.2, label=f"false-positive bound {fpr_bound:g}")
    ax.plot([], [], "o", color="white", markeredgecolor="black", label="each model's threshold")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title="test ROC and operating points", xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    if ratios:
        ax = axes[0][1]
        names = list(ratios)
        where = np.arange(len(names))
        values = [ratios[m] for m in names]
        bars = ax.bar(where, values, 0.6, color=[colors.get(m, "C0") for m in names])
        for bar, v in zip(bars, values):
            ax.annotate(f"{v:.2f}", (bar.get_x() + bar.get_width() / 2, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=9)
        ax.axhline(ratio, color="firebrick", ls="--", lw=1.4, label=f"the {ratio:.0%} rule: ratio >= {ratio:g}")
        ax.set_xticks(where, names, fontsize=8, rotation=15)
        ax.set(ylabel="lowest group's positive rate / highest's (test)", title="fairness between groups", ylim=(0, 1.12))
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, frameon=False)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_retrain_history(history: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "retrains") -> str:
    """Write a PNG of a registry's retrains: holdout metric of champion and challenger, and churn, per retrain.

    Parameters
    ----------
    history : sequence of dict
        The registry's history records (:meth:`dpipe.registry.Registry.history`); only
        ``promoted`` and ``kept`` decisions are drawn, in order.
    path : str or os.PathLike
        The PNG to write (through a temporary name).
    title : str
        The figure's title.
    """
    runs = [r for r in history if r.get("action") in ("promoted", "kept")]
    if not runs:
        raise ValueError("plot_retrain_history: the history holds no retrain decision")
    plt = _pyplot()
    metric = runs[-1].get("metric", "roc_auc")
    x = np.arange(1, len(runs) + 1)
    challenger = [r["challenger"].get(metric, np.nan) for r in runs]
    champion = [np.nan if not r.get("champion") else r["champion"].get(metric, np.nan) for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4))
    left.plot(x, champion, marker="s", label="champion (before the decision)")
    left.plot(x, challenger, marker="o", label="challenger")
    for xi, r, c in zip(x, runs, challenger):
        left.annotate(r["action"], (xi, c), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8,
                      color="green" if r["action"] == "promoted" else "firebrick")
    left.set(xlabel="retrain", ylabel=f"{metric} on the holdout", title=f"{metric}: champion vs challenger")
    churn = [np.nan if r.get("holdout_churn") is None else 100 * r["holdout_churn"] for r in runs]
    right.bar(x, churn, color=["green" if r["action"] == "promoted" else "firebrick" for r in runs], alpha=0.7, label="challenger vs champion")
    targets = [r.get("churn_target") for r in runs]
    if any(t is not None for t in targets):
        right.plot(x, [np.nan if t is None else 100 * t for t in targets], "r--", marker="_", label="churn target")
    right.set(xlabel="retrain", ylabel="churn on the holdout (%)", title="churn (decisions that flip)")
    for ax in (left, right):
        ax.set_xticks(x, [f"{i}\n{r['version']}" for i, r in zip(x, runs)])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
