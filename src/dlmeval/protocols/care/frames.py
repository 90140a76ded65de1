"""The Care cell records as frames, and the selection helpers every Care table uses (:mod:`.tables`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from dlmeval.protocols.care.spec import CareSpec
from dlmeval.stats import mean_se

CELL_COLUMNS = (
    "model",
    "source",
    "strategy",
    "steps",
    "nfe_budget",
    "temperature",
    "fraction",
    "seed",
    "n",
    "n_accepted",
    "acceptance",
    "nfe",
    "nfe_min",
    "nfe_max",
    "remasks",
    "ppl",
    "mauve",
    "self_bleu",
    "distinct3",
    "resolved_steps",
    "nfe_predicted",
    "replacement_rate",
    "stable_cells",
    "same_as",
)
#: cell columns that hold text (the rest after the first three are numbers)
_TEXT_COLUMNS = ("model", "source", "strategy", "same_as")
DOWN_COLUMNS = (
    "model",
    "task",
    "strategy",
    "steps",
    "nfe_budget",
    "temperature",
    "seed",
    "n",
    "accuracy",
    "nfe",
    "sandbox",  # executed checks (HumanEval): the sandbox's isolation label, ``...+unsafe`` for an unsafe run
)


def cells_frame(records: list[dict]) -> pd.DataFrame:
    """Cell records (dicts) as a frame with exactly :data:`CELL_COLUMNS` (missing values NaN), sorted."""
    df = pd.DataFrame.from_records(records, columns=list(CELL_COLUMNS)) if records else _empty(CELL_COLUMNS)
    for c in CELL_COLUMNS:
        if c not in _TEXT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["same_as"] = df["same_as"].astype(object).where(df["same_as"].notna(), None)
    return _sorted(
        df, ["model", "source", "strategy", "steps", "nfe_budget", "temperature", "fraction", "seed"]
    )


def down_frame(records: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(records, columns=list(DOWN_COLUMNS)) if records else _empty(DOWN_COLUMNS)
    for c in DOWN_COLUMNS[3:]:
        if c != "sandbox":
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["sandbox"] = df["sandbox"].astype(object).where(df["sandbox"].notna(), None)
    return _sorted(df, ["model", "task", "strategy", "steps", "nfe_budget", "temperature", "seed"])


def _empty(cols) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if i < 3 else float) for i, c in enumerate(cols)})


def _sorted(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return df.sort_values(by, kind="mergesort", na_position="first").reset_index(drop=True)


def _isin(s: pd.Series, values) -> pd.Series:
    vals = np.asarray(list(values), dtype=float)
    x = s.to_numpy(dtype=float)
    return pd.Series(np.isclose(x[:, None], vals[None, :], rtol=0, atol=1e-9).any(axis=1), index=s.index)


def _ms(x) -> tuple[float, float]:
    x = [v for v in x if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not x:
        return float("nan"), float("nan")
    return mean_se(x)


def _int_cols(df: pd.DataFrame, cols) -> pd.DataFrame:
    """Integer-valued columns as int64 when they have no missing value (kept float with NaN otherwise, which the
    store's JSON tables round-trip)."""
    for c in cols:
        if c in df.columns and len(df) and df[c].notna().all():
            df[c] = df[c].astype(np.int64)
    return df


def sweep_cells(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """The full-factorial sweep cells (nominal steps, the sweep's remask fraction)."""
    s = spec.sweep
    m = (
        cells["steps"].notna()
        & cells["strategy"].isin(s.strategies)
        & _isin(cells["steps"].fillna(-1), s.steps)
        & _isin(cells["temperature"], s.temperatures)
        & _isin(cells["seed"], s.seeds)
        & _isin(cells["fraction"], [s.remask_fraction])
    )
    return cells[m]


def _group(df: pd.DataFrame, keys: list[str], fn: Callable[[pd.DataFrame], dict]) -> pd.DataFrame:
    rows = []
    for k, g in df.groupby(keys, sort=True, dropna=False):
        k = k if isinstance(k, tuple) else (k,)
        rows.append({**dict(zip(keys, k)), **fn(g)})
    return pd.DataFrame(rows, columns=None) if rows else pd.DataFrame(columns=keys)


__all__ = ["CELL_COLUMNS", "DOWN_COLUMNS", "cells_frame", "down_frame", "sweep_cells"]
