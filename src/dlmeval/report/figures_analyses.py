"""Figures of the DiffScore profile analyses (paper Fig. 6 and Fig. 7): learned timestep weights and quality-tier
profile curves. Same conventions as :mod:`dlmeval.report.figures` (matplotlib Figure objects, no pyplot state)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dlmeval.report.figures import _figure, _groups, _legend, _need, _num, _title, colors_for


def tier_curves(df: pd.DataFrame) -> Any:
    """Mean S(t) per human-score tier against the masking rate (band: +- 1 SEM), one panel per benchmark and
    configuration (table ``tier_profiles``)."""
    df = _need(df, ["config", "tier", "rate", "mean"], "quality-tier profile curves")
    panels = _groups(df, ["benchmark", "config"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        label_col = "tier_label" if "tier_label" in g.columns else "tier"
        cmap = colors_for(g[label_col].drop_duplicates())
        for lab, h in g.sort_values("tier").groupby(label_col, sort=False):
            h = h.sort_values("rate")
            x, y = _num(h["rate"]), _num(h["mean"])
            ax.plot(x, y, marker="o", ms=3, color=cmap[lab], label=str(lab))
            if "sem" in h.columns:
                s = np.nan_to_num(_num(h["sem"]))
                ax.fill_between(x, y - s, y + s, color=cmap[lab], alpha=0.15)
        ax.set_xlabel("masking rate t", fontsize=8)
        ax.set_ylabel("mean S(t) (mean log p)", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax, loc="lower left")
    return fig


def weight_bars(df: pd.DataFrame) -> Any:
    """Learned timestep weights (mean over folds, error bar: SD), one panel per benchmark, one bar group per
    dimension (table ``learned_weights_by_rate``)."""
    df = _need(df, ["dimension_tag", "rate", "weight_mean"], "learned timestep weights")
    panels = _groups(df, ["benchmark"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        dims = list(dict.fromkeys(g["dimension_tag"]))
        cmap = colors_for(dims)
        rates = sorted(set(_num(g["rate"])))
        width = 0.8 / max(1, len(dims))
        pos = np.arange(len(rates))
        for j, d in enumerate(dims):
            h = g[g["dimension_tag"] == d].set_index("rate").reindex(rates)
            err = np.nan_to_num(_num(h["weight_sd"])) if "weight_sd" in h.columns else None
            ax.bar(pos + j * width, _num(h["weight_mean"]), width, yerr=err, color=cmap[d], label=str(d))
        ax.set_xticks(pos + 0.4 - width / 2, [f"{t:.2g}" for t in rates], fontsize=7)
        ax.set_xlabel("masking rate t", fontsize=8)
        ax.set_ylabel("share of the weight", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax, loc="upper left")
    return fig
