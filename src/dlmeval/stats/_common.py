"""Input checks shared by the statistics functions."""

from __future__ import annotations

import numpy as np

from dlmeval.errors import InputError


def as_1d(x, name: str = "x", *, min_n: int = 1) -> np.ndarray:
    """A finite 1-D float64 array with at least ``min_n`` values, or an :class:`InputError` saying what is wrong."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise InputError(f"{name} must be a 1-dimensional sequence of numbers, got shape {a.shape}")
    if a.size < min_n:
        raise InputError(f"{name} needs at least {min_n} values, got {a.size}")
    if not np.all(np.isfinite(a)):
        bad = int(np.sum(~np.isfinite(a)))
        raise InputError(f"{name} holds {bad} NaN/inf value(s); drop or impute them first")
    return a


def as_pair(a, b, names: tuple[str, str] = ("a", "b"), *, min_n: int = 1) -> tuple[np.ndarray, np.ndarray]:
    x = as_1d(a, names[0], min_n=min_n)
    y = as_1d(b, names[1], min_n=min_n)
    if x.size != y.size:
        raise InputError(f"{names[0]} and {names[1]} must be paired (same length), got {x.size} and {y.size}")
    return x, y
