"""Plots a person would rather look at than read: prevalence per behavior and their co-occurrence, length distributions."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from curate.behaviors import BEHAVIOR_NAMES
from curate.files import atomic_path


def _save(figure, path: Path, dpi: int) -> Path:
    """Writes the figure to PATH whole (the format named: a .partial name would hide it from matplotlib) and closes it."""
    try:
        with atomic_path(path) as partial:
            figure.savefig(partial, dpi=dpi, format="png")
    finally:
        plt.close(figure)
    return path


def plot_prevalence(stats: list, path: str | Path) -> Path:
    """stats: BehaviorStats per classifier. Left: prevalence bars; right: co-occurrence heat map (first classifier)."""
    path = Path(path)
    fig, (bars, heat) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.2, 1]})
    width = 0.8 / max(len(stats), 1)
    labels = [b.replace("_", "\n") for b in BEHAVIOR_NAMES]
    for k, s in enumerate(stats):
        xs = [i + k * width for i in range(len(BEHAVIOR_NAMES))]
        values = [100 * s.prevalence[b] for b in BEHAVIOR_NAMES]
        bars.bar(xs, values, width=width, label=f"{s.classifier} (n={s.documents:,})")
        for x, v in zip(xs, values):
            bars.text(x, v + 0.5, f"{v:.1f}", ha="center", fontsize=8)
    bars.set_xticks([i + width * (len(stats) - 1) / 2 for i in range(len(BEHAVIOR_NAMES))], labels)
    bars.set_ylabel("% of documents")
    bars.set_title("Prevalence")
    bars.legend(fontsize=8)
    if stats:
        first = stats[0]
        matrix = [[first.cooccurrence[a][b] for b in BEHAVIOR_NAMES] for a in BEHAVIOR_NAMES]
        image = heat.imshow(matrix, cmap="Blues")
        heat.set_xticks(range(len(BEHAVIOR_NAMES)), labels, fontsize=8)
        heat.set_yticks(range(len(BEHAVIOR_NAMES)), labels, fontsize=8)
        peak = max(max(r) for r in matrix) or 1
        for i, row in enumerate(matrix):
            for j, value in enumerate(row):
                heat.text(j, i, f"{value:,}", ha="center", va="center", color="white" if value > peak / 2 else "black", fontsize=8)
        heat.set_title(f"Co-occurrence (documents, {first.classifier})")
        fig.colorbar(image, ax=heat, shrink=0.8)
    fig.tight_layout()
    return _save(fig, path, dpi=120)


def plot_length_histograms(lengths: dict[str, list[int]], path: str | Path, unit: str) -> Path:
    """One step histogram of log10 length per named set, so that two sets meant to match can be compared by eye."""
    path = Path(path)
    figure, axis = plt.subplots(figsize=(6, 3.5))
    for name, values in lengths.items():
        if values:
            axis.hist(np.log10(np.maximum(values, 1)), bins=30, histtype="step", label=f"{name} ({len(values):,})")
    axis.set_xlabel(f"log10 {unit}")
    axis.set_ylabel("documents")
    if any(lengths.values()):
        axis.legend()
    figure.tight_layout()
    return _save(figure, path, dpi=100)


def plot_behaviors_over_steps(steps: list[int], series: dict[str, dict[str, list]], accuracy: list, path: str | Path,
                              title: str = "") -> Path:
    """The reference study's figure for a training run: per behavior, the share of responses showing it and its
    mean count per response, and the accuracy, against the training step (None: not measured at that step)."""
    path = Path(path)
    figure, (share, mean, acc) = plt.subplots(1, 3, figsize=(14, 3.8))
    as_float = lambda values: [np.nan if v is None else v for v in values]
    for behavior in BEHAVIOR_NAMES:
        share.plot(steps, [100 * v for v in as_float(series[behavior]["rate"])], marker="o", label=behavior)
        mean.plot(steps, as_float(series[behavior]["mean_count"]), marker="o", label=behavior)
    acc.plot(steps, [100 * v for v in as_float(accuracy)], marker="o", color="black")
    for axis, label in ((share, "% of responses showing it"), (mean, "mean count per response"), (acc, "accuracy (%)")):
        axis.set_xlabel("training step")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    share.set_title("Behavior presence")
    mean.set_title("Behavior count")
    acc.set_title("Accuracy")
    share.legend(fontsize=8)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return _save(figure, path, dpi=110)
