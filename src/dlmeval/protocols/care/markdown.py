"""The Care tables for people: GitHub Markdown with the temperature grids pivoted as the paper prints them
(:func:`markdown`); the tables themselves are :mod:`dlmeval.protocols.care.tables`."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from dlmeval.protocols.care.tables import TITLES
from dlmeval.protocols.common import with_data_note


def _num(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "-"
    if isinstance(x, int | np.integer):
        return str(int(x))
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e6:
        return f"{x:.3g}"
    return f"{x:.{digits}f}"


def _pm(m, s, digits: int = 3, sign: bool = False) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "-"
    core = f"{m:+.{digits}f}" if sign else f"{m:.{digits}f}"
    return core if s is None or (isinstance(s, float) and math.isnan(s)) else f"{core} ± {s:.{digits}f}"


def _p(p) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _grid(df: pd.DataFrame, rows: list[str], cell: Callable[[pd.Series], str]) -> pd.DataFrame:
    """Pivot a long table to rows x temperature columns with formatted cells."""
    temps = sorted(df["temperature"].unique())
    out = []
    for key, g in df.groupby(rows, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        r = {k: (str(v) if not isinstance(v, float) else _num(v, 0)) for k, v in zip(rows, key)}
        for t in temps:
            sub = g[np.isclose(g["temperature"].astype(float), t)]
            r[f"t={t:g}"] = cell(sub.iloc[0]) if len(sub) else "-"
        out.append(r)
    return pd.DataFrame(out)


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object or pd.api.types.is_string_dtype(out[c]):
            # text columns (same_as, the cell names): a missing value is "-"
            out[c] = [
                "-" if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v
                for v in out[c]
            ]
            continue
        if c in ("p",) or c.endswith("_p"):
            out[c] = [_p(v) for v in out[c]]
        elif pd.api.types.is_float_dtype(out[c]):
            if c in ("temperature", "fraction", "confidence"):
                out[c] = ["-" if v is None or math.isnan(v) else f"{v:g}" for v in out[c]]
                continue
            if c in ("df", "n_seeds", "n_cells"):
                digits = 0
            elif (
                c.startswith("ppl")
                or c.endswith("_pct")
                or c in ("nfe", "nfe_min", "nfe_max", "F", "remasks_per_sample", "stable_cells", "steps")
            ):
                digits = 1 if c != "F" else 2
            else:
                digits = 3
            out[c] = [_num(v, digits) for v in out[c]]
    return out


def table_markdown(name: str, df: pd.DataFrame) -> str:
    """One table as GitHub Markdown with a title; temperature grids are pivoted as in the paper."""
    if name == "mauve_temperature" and len(df):
        view = _grid(df, ["model", "source", "strategy", "steps"], lambda r: _pm(r["mauve"], r["mauve_se"]))
    elif name == "gap" and len(df):
        view = _grid(
            df,
            ["model", "source", "steps"],
            lambda r: (
                _pm(r["gap"], r["gap_se"], sign=True) + (f" (p={_p(r['p'])})" if r["n_seeds"] > 1 else "")
            ),
        )
    elif name == "acceptance" and len(df):
        view = _grid(df, ["model", "source", "strategy", "steps"], lambda r: f"{r['acceptance_pct']:.1f}")
    elif name == "headline" and len(df):
        view = pd.DataFrame(
            {
                "model": df["model"],
                "source": df["source"],
                "steps": df["steps"],
                "t": [f"{t:g}" for t in df["temperature"]],
                "MAUVE baseline": [f"{b} {_num(v)}" for b, v in zip(df["baseline"], df["mauve_baseline"])],
                "MAUVE strategy": [f"{b} {_num(v)}" for b, v in zip(df["strategy"], df["mauve_strategy"])],
                "gap ± paired SE": [_pm(g, s, sign=True) for g, s in zip(df["gap"], df["gap_se"])],
                "t-stat (df)": [
                    "-" if math.isnan(t) else f"{t:.2f} ({int(d)})" for t, d in zip(df["t"], df["df"])
                ],
                "p": [_p(p) for p in df["p"]],
                "bootstrap CI": [
                    "-" if math.isnan(lo) else f"{c:.0%} [{lo:.3f}, {hi:.3f}] ({n} resamples)"
                    for lo, hi, c, n in zip(df["ci_lo"], df["ci_hi"], df["confidence"], df["n_resamples"])
                ],
                "seeds": df["seeds"],
            }
        )
    elif name == "published" and len(df):
        from dlmeval.protocols.published import markdown_of_frame

        data = f"\n\nData: {df['data'].iloc[0]}" if "data" in df.columns else ""
        return f"### {TITLES.get(name, name)}\n\n{markdown_of_frame(df)}{data}\n"
    elif name == "leaderboard" and len(df):
        view = _plain(df.drop(columns=["gap_se", "p"]))
        view["gap"] = [_pm(g, s, sign=True) for g, s in zip(df["gap"], df["gap_se"])]
        view.insert(list(view.columns).index("gap") + 1, "p", [_p(p) for p in df["p"]])
    else:
        view = _plain(df)
    body = view.to_markdown(index=False, disable_numparse=True) if len(view) else "(no rows)"
    return f"### {TITLES.get(name, name)}\n\n{body}\n"


#: a table's Markdown with the line ``Data: SOURCE`` under it, SOURCE its ``data_source`` column (``published``
#: names its data itself)
markdown = with_data_note(table_markdown, skip=("published",))

__all__ = ["markdown", "table_markdown"]
