"""Calibration of confidences against correctness: ECE, reliability-diagram bins, selective-prediction AUROC."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from dlmeval.errors import InputError


def _inputs(confidences, correct) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(confidences, dtype=np.float64)
    y = np.asarray(correct)
    if c.ndim != 1 or y.ndim != 1 or c.size != y.size:
        raise InputError(f"confidences and correct must be 1-D of equal length, got {c.shape} and {y.shape}")
    if c.size == 0:
        raise InputError("no predictions to score")
    if not np.all(np.isfinite(c)) or c.min() < 0 or c.max() > 1:
        raise InputError("confidences must be finite probabilities in [0, 1]")
    if y.dtype != bool:
        if not np.all(np.isin(y, (0, 1))):
            raise InputError("correct must be booleans or 0/1 values")
    return c, y.astype(np.float64)


@dataclass(frozen=True)
class ReliabilityBins:
    """Equal-width bins over [0, 1]: bin b holds confidences in ``(lower[b], upper[b]]`` (bin 0 also holds 0).

    ``confidence`` and ``accuracy`` are per-bin means (NaN for an empty bin), ``count`` the items per bin.
    """

    lower: np.ndarray
    upper: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray

    @property
    def ece(self) -> float:
        n = self.count.sum()
        keep = self.count > 0
        gap = np.abs(self.accuracy[keep] - self.confidence[keep])
        return float(np.sum(self.count[keep] / n * gap))


def reliability_bins(confidences, correct, n_bins: int = 15) -> ReliabilityBins:
    """Per-bin mean confidence, accuracy and count for a reliability diagram (equal-width bins).

    Bin edges are ``np.linspace(0, 1, n_bins + 1)``; a bin is open below and closed above, ``(lo, hi]``, as in
    Guo et al. (2017)'s reference code, and a confidence of exactly 0 goes to the first bin (Guo's code drops it).
    Written by hand: sklearn's ``calibration_curve`` drops empty bins, returns no counts and closes bins below.
    """
    if int(n_bins) != n_bins or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer, got {n_bins!r}")
    c, y = _inputs(confidences, correct)
    edges = np.linspace(0.0, 1.0, int(n_bins) + 1)
    idx = np.clip(np.searchsorted(edges, c, side="left") - 1, 0, int(n_bins) - 1)
    count = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(idx, weights=c, minlength=n_bins) / count
        acc = np.bincount(idx, weights=y, minlength=n_bins) / count
    return ReliabilityBins(edges[:-1], edges[1:], conf, acc, count)


def ece(confidences, correct, n_bins: int = 15) -> float:
    """Expected calibration error: ``sum_b (n_b / N) * |accuracy_b - confidence_b|`` over equal-width bins
    (15 as in the robustness paper; edges as in :func:`reliability_bins`)."""
    return reliability_bins(confidences, correct, n_bins).ece


def selective_auroc(confidences, correct) -> float:
    """AUROC of confidence as a predictor of correctness (sklearn ``roc_auc_score``, trapezoidal, ties averaged).

    0.5 = confidence does not separate right from wrong answers. NaN (with a warning saying why) when every
    answer is right or every answer is wrong: AUROC is undefined with one class.
    """
    from sklearn.metrics import roc_auc_score

    c, y = _inputs(confidences, correct)
    if np.unique(y).size < 2:
        warnings.warn(
            f"selective AUROC is undefined: all {y.size} answers are {'correct' if y[0] else 'wrong'}; returning NaN",
            RuntimeWarning,
            stacklevel=2,
        )
        return float("nan")
    return float(roc_auc_score(y, c))
