"""Sampling-pillar (Care) figures: actual NFE, temperature curves, the strategy x temperature interaction and its
gap, the PPL-MAUVE frontier, token churn, dose-response."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.report.figures.base import (
    _bars,
    _figure,
    _groups,
    _legend,
    _need,
    _num,
    _se_bars,
    _title,
    colors_for,
    legend_outside,
)


def nfe_vs_steps(df: pd.DataFrame) -> Any:
    """Actual NFE per sample against nominal steps, one line per strategy (bars: min-max over samples); the
    dashed line is NFE = steps."""
    df = _need(df, ["strategy", "steps", "nfe"], "NFE plot")
    panels = _groups(df, ["model"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        cmap = colors_for(g["strategy"])
        for strat, h in g.groupby("strategy", sort=False):
            h = h.sort_values("steps")
            x, y = _num(h["steps"]), _num(h["nfe"])
            if "nfe_min" in h.columns and "nfe_max" in h.columns:
                err = np.vstack([y - _num(h["nfe_min"]), _num(h["nfe_max"]) - y])
                ax.errorbar(
                    x,
                    y,
                    yerr=np.clip(err, 0, None),
                    marker="o",
                    ms=3,
                    capsize=2,
                    color=cmap[strat],
                    label=str(strat),
                )
            else:
                ax.plot(x, y, marker="o", ms=3, color=cmap[strat], label=str(strat))
        s = _num(g["steps"])
        s = s[np.isfinite(s)]
        if s.size:
            ax.plot(
                [s.min(), s.max()],
                [s.min(), s.max()],
                "--",
                color="#555555",
                linewidth=0.8,
                label="NFE = steps",
            )
        ax.set_xlabel("nominal steps", fontsize=8)
        ax.set_ylabel("actual NFE / sample", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def temperature_curves(quality: pd.DataFrame, metrics: Sequence[str] = ("mauve", "ppl")) -> Any:
    """MAUVE and PPL across unmask temperatures, one line per strategy (line style: nominal steps), error bars
    +- 1 SE over seeds; one row of panels per (model, prefix source)."""
    metrics = [m for m in metrics if m in quality.columns]
    df = _need(quality, ["strategy", "temperature", *metrics] if metrics else ["mauve"], "temperature curves")
    rows = _groups(df, ["model", "source"])[:4]
    fig, axes = _figure(len(rows) * len(metrics), ncols=len(metrics))
    styles = ["-", "--", ":", "-."]
    for r, (key, g) in enumerate(rows):
        cmap = colors_for(g["strategy"])
        steps = sorted(g["steps"].dropna().unique()) if "steps" in g.columns else [None]
        for j, metric in enumerate(metrics):
            ax = axes[r * len(metrics) + j]
            for strat, h in g.groupby("strategy", sort=False):
                for si, st in enumerate(steps):
                    hh = h if st is None else h[np.isclose(_num(h["steps"]), float(st))]
                    hh = hh.sort_values("temperature")
                    if hh.empty:
                        continue
                    x, y = _num(hh["temperature"]), _num(hh[metric])
                    lab = str(strat) if st is None or len(steps) == 1 else f"{strat}, {int(st)} steps"
                    ax.errorbar(
                        x,
                        y,
                        yerr=_se_bars(hh, f"{metric}_se"),
                        marker="o",
                        ms=3,
                        capsize=2,
                        linestyle=styles[si % len(styles)],
                        color=cmap[strat],
                        label=lab,
                    )
            ax.set_xlabel("unmask temperature t", fontsize=8)
            ax.set_ylabel({"mauve": "MAUVE", "ppl": "PPL (external AR)"}.get(metric, metric), fontsize=8)
            ax.set_title(_title(key), fontsize=8)
            if j == 0:
                _legend(ax)
    return fig


def _temperature_lines(ax, groups, y: str, colors: dict, *, label=str, ms: int = 3, capsize: int = 2) -> None:
    """One line of ``y`` (+- 1 SE from ``<y>_se`` where present) against the unmask temperature per ``(name,
    rows)`` of ``groups``, coloured ``colors[name]`` (a name without a colour: the first default colour)."""
    for name, h in groups:
        h = h.sort_values("temperature")
        ax.errorbar(
            _num(h["temperature"]),
            _num(h[y]),
            yerr=_se_bars(h, f"{y}_se"),
            marker="o",
            ms=ms,
            capsize=capsize,
            color=colors.get(name, "#1f77b4"),
            label=label(name),
        )


def interaction_plot(
    mauve_temperature: pd.DataFrame,
    *,
    steps: float | None = None,
    baseline: str | None = None,
    strategy: str | None = None,
) -> Any:
    """The strategy x temperature interaction: MAUVE against unmask temperature, one line per strategy, at one
    nominal step count (``steps``; default: the largest), error bars +- 1 SE over seeds."""
    df = _need(mauve_temperature, ["strategy", "temperature", "mauve"], "interaction plot")
    if "steps" in df.columns and df["steps"].notna().any():
        st = float(steps) if steps is not None else float(np.nanmax(_num(df["steps"])))
        df = df[np.isclose(_num(df["steps"]), st)]
        if df.empty:
            raise InputError(f"interaction plot: no rows at {st:g} steps")
    else:
        st = None
    if baseline and strategy:
        df = (
            df[df["strategy"].isin([baseline, strategy])]
            if df["strategy"].isin([baseline, strategy]).any()
            else df
        )
    panels = _groups(df, ["model", "source"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        _temperature_lines(
            ax, g.groupby("strategy", sort=False), "mauve", colors_for(g["strategy"]), ms=4, capsize=3
        )
        ax.set_xlabel("unmask temperature t", fontsize=8)
        ax.set_ylabel("MAUVE", fontsize=8)
        ax.set_title(_title(key) + (f" · {int(st)} steps" if st is not None else ""), fontsize=8)
        _legend(ax)
    return fig


def gap_plot(gap: pd.DataFrame) -> Any:
    """The MAUVE gap baseline - strategy against temperature, one line per nominal step count, +- 1 paired SE."""
    df = _need(gap, ["temperature", "gap"], "gap plot")
    panels = _groups(df, ["model", "source"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        steps = g["steps"] if "steps" in g.columns else pd.Series([np.nan] * len(g), index=g.index)
        _temperature_lines(
            ax,
            g.groupby(steps, sort=True, dropna=False),
            "gap",
            colors_for(sorted(steps.dropna().unique())),
            label=lambda st: (
                f"{int(st)} steps" if isinstance(st, float | int) and not math.isnan(st) else "all"
            ),
        )
        ax.axhline(0, color="#555555", linewidth=0.7)
        base = str(g["baseline"].iat[0]) if "baseline" in g.columns else "baseline"
        strat = str(g["strategy"].iat[0]) if "strategy" in g.columns else "strategy"
        ax.set_ylabel(f"MAUVE({base}) - MAUVE({strat})", fontsize=7)
        ax.set_xlabel("unmask temperature t", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def pareto_front(ppl: np.ndarray, mauve: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both lower PPL and higher MAUVE, by increasing PPL."""
    ok = np.flatnonzero(np.isfinite(ppl) & np.isfinite(mauve))
    order = ok[np.lexsort((-mauve[ok], ppl[ok]))]
    front, best = [], -np.inf
    for i in order:
        if mauve[i] > best:
            front.append(int(i))
            best = mauve[i]
    return np.asarray(front, dtype=int)


def ppl_mauve_frontier(quality: pd.DataFrame) -> Any:
    """PPL against MAUVE for every (strategy, steps, temperature) configuration: marker = strategy, colour =
    temperature; the line joins the Pareto-optimal configurations (lower PPL, higher MAUVE)."""
    df = _need(quality, ["strategy", "ppl", "mauve"], "PPL-MAUVE frontier")
    panels = _groups(df, ["model", "source"])
    fig, axes = _figure(len(panels), w=4.0, h=3.0)
    markers = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
    for ax, (key, g) in zip(axes, panels):
        strategies = list(dict.fromkeys(g["strategy"]))
        temps = _num(g["temperature"]) if "temperature" in g.columns else np.zeros(len(g))
        ppl, mv = _num(g["ppl"]), _num(g["mauve"])
        sc = None
        for si, strat in enumerate(strategies):
            m = (g["strategy"] == strat).to_numpy()
            sc = ax.scatter(
                ppl[m],
                mv[m],
                c=temps[m],
                cmap="viridis",
                vmin=np.nanmin(temps) if np.isfinite(temps).any() else 0,
                vmax=np.nanmax(temps) if np.isfinite(temps).any() else 1,
                marker=markers[si % len(markers)],
                s=26,
                edgecolors="#333333",
                linewidths=0.4,
                label=str(strat),
            )
        front = pareto_front(ppl, mv)
        if front.size:
            ax.plot(
                ppl[front], mv[front], "-", color="#333333", linewidth=0.9, alpha=0.7, label="Pareto frontier"
            )
        if np.isfinite(ppl).any() and np.nanmax(ppl) / max(np.nanmin(ppl), 1e-9) > 20:
            ax.set_xscale("log")
        ax.set_xlabel("PPL (external AR, lower is better)", fontsize=8)
        ax.set_ylabel("MAUVE (higher is better)", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        if sc is not None and "temperature" in g.columns:
            fig.colorbar(sc, ax=ax, label="unmask temperature t")
    legend_outside(fig, axes)  # right of the figure: a panel's right side holds its colour bar
    return fig


def churn_plot(df: pd.DataFrame) -> Any:
    """Token churn: the share of the generation replaced per step (and re-masks per sample) against the step
    (per-step table) or the nominal step budget (per-cell records), one line per strategy."""
    x = "step" if "step" in df.columns else "steps"
    ys = [c for c in ("replacement_rate", "remasks") if c in df.columns]
    df = _need(df, ["strategy", x, *ys] if ys else ["replacement_rate"], "churn plot")
    panels = _groups(df, ["model"])
    fig, axes = _figure(len(panels) * len(ys), ncols=len(ys))
    for r, (key, g) in enumerate(panels):
        cmap = colors_for(g["strategy"])
        for j, y in enumerate(ys):
            ax = axes[r * len(ys) + j]
            for strat, h in g.groupby("strategy", sort=False):
                agg = h.groupby(x)[y].agg(["mean", "std", "count"]).reset_index().sort_values(x)
                se = (agg["std"] / np.sqrt(agg["count"])).to_numpy(dtype=float)
                ax.errorbar(
                    _num(agg[x]),
                    _num(agg["mean"]),
                    yerr=_bars(se),
                    marker="o",
                    ms=3,
                    capsize=2,
                    color=cmap[strat],
                    label=str(strat),
                )
            ax.set_xlabel("denoising step" if x == "step" else "nominal steps", fontsize=8)
            ax.set_ylabel(
                {"replacement_rate": "tokens replaced / step (share)", "remasks": "re-masks / sample"}[y],
                fontsize=8,
            )
            ax.set_title(_title(key), fontsize=8)
            if j == 0:
                _legend(ax)
    return fig


def dose_response(df: pd.DataFrame) -> Any:
    """MAUVE (+- SE) and re-masks per sample across remask fractions."""
    df = _need(df, ["fraction", "mauve"], "dose-response plot")
    panels = _groups(df, ["model", "source"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        g = g.sort_values("fraction")
        ax.errorbar(
            _num(g["fraction"]),
            _num(g["mauve"]),
            yerr=_se_bars(g, "mauve_se"),
            marker="o",
            ms=4,
            capsize=2,
            color="#d62728",
            label="MAUVE",
        )
        ax.set_xlabel("remask fraction", fontsize=8)
        ax.set_ylabel("MAUVE", fontsize=8)
        if "remasks_per_sample" in g.columns:
            ax2 = ax.twinx()
            ax2.plot(
                _num(g["fraction"]),
                _num(g["remasks_per_sample"]),
                "s--",
                ms=3,
                color="#555555",
                label="re-masks / sample",
            )
            ax2.set_ylabel("re-masks / sample", fontsize=8)
            ax2.tick_params(labelsize=8)
        ax.set_title(_title(key), fontsize=8)
    return fig
