"""The job configs of `curate review`, `curate calibrate` and `curate adapt` (light: --help imports them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.options import INPUT, OUTPUT_PANEL, group, option

if TYPE_CHECKING:  # it imports datatrove
    from curate.pipelines.readers import InputSpec


@dataclass(frozen=True, kw_only=True)
class ReviewJob:
    """Draw a stratified sample of tagged documents and serve a page, on 127.0.0.1 only, to label them."""

    tags: Path = option("One classifier's attribute shards (e.g. tags/cues_ngram_v1).")
    output: Path = option("Review folder: the sample (sample.jsonl, design.json) and your labels (labels.jsonl); "
                          "reopening it resumes.", "--output", "-o", default=Path("review"), panel=OUTPUT_PANEL)
    sample: int = option("Documents to draw (rare predicted behaviors and uncertain scores oversampled).", default=200,
                         min=1)
    seed: int = option("Seed of the sample.", default=0)
    port: int = option("Port on 127.0.0.1 (0: any free port).", default=8765, min=0, max=65535)
    max_chars: int = option("Show at most this many characters of a document (its spans past them are listed).",
                            default=20000, min=200)
    corpus: InputSpec = group(INPUT)


@dataclass(frozen=True, kw_only=True)
class CalibrateJob:
    """Precision, recall and F1 with 95 % intervals per behavior from labels read on your corpus."""

    labels: Path = option("Labels (JSON lines: id, labels {behavior: 0/1}; what `curate review` writes).")
    tags: Path = option("The attribute shards the labeled documents were tagged into (e.g. tags/cues_ngram_v1).")
    output: Path = option("Folder for calibration.json and pr_curve.png.", "--output", "-o", panel=OUTPUT_PANEL)
    card: Path | None = option("A dataset built from these tags: its card (README.md) gets the figures.", default=None,
                               panel=OUTPUT_PANEL)
    resamples: int = option("Bootstrap resamples for the weighted and F1 intervals.", default=2000, min=100)
    seed: int = option("Seed of the bootstrap.", default=0)


@dataclass(frozen=True, kw_only=True)
class AdaptJob:
    """Refit the n-gram heads (or only their thresholds) on your labels plus the shipped training labels, score the
    refit by cross-validation on your labels, and save it as a new versioned classifier in your model folder."""

    labels: Path = option("Your labels (JSON lines with id and labels, e.g. review/labels.jsonl).")
    models: Path = option("Your model folder; the adapted classifier is written to a new MODELS/NAME_vN/.",
                          "--models", default=Path("models"), panel=OUTPUT_PANEL)
    base: str = option("Shipped n-gram classifier to start from.", default="cues_ngram_v1")
    refit: str = option("heads (refit the logistic heads) or thresholds (keep the heads, move each threshold).",
                        default="heads")
    shipped_labels: Path | None = option("Folder of the shipped training labels (a curate checkout's evals/); "
                                         "without it, only your labels train the heads.", default=None)
    user_weight: float = option("Weight of one of your labels against one shipped training label.", default=5.0,
                                min=0.01)
    folds: int = option("Cross-validation folds over your labels.", default=5, min=2)
    name: str = option("Name of the adapted classifier family (versions are numbered).", default="adapted_ngram")
    seed: int = option("Seed of the folds.", default=0)
    corpus: InputSpec = group(INPUT)
