"""The report's figures as functions of stored tables: each takes DataFrames (as ``run.get_table(name)`` returns
them) and returns a :class:`matplotlib.figure.Figure`, for notebooks as well as for the HTML report.

Usage (not run here: it reads a stored run)::

    from dlmeval.store import RunStore
    from dlmeval.report import figures
    run = RunStore().get_run("3f2a")
    figures.interaction_plot(run.get_table("mauve_temperature"), steps=16)      # a Figure; .savefig(...)


Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state, safe in threads and servers).
Every function raises :class:`dlmeval.errors.InputError` when its table lacks a column it needs or has no rows.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError

PANEL_W, PANEL_H = 3.6, 2.7
MAX_PANELS = 9
_PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: fixed colours for the Care strategies, so a strategy has one colour in every figure
STRATEGY_COLORS = {
    "none": "#1f77b4",
    "high_entropy": "#d62728",
    "random": "#2ca02c",
    "low_confidence": "#ff7f0e",
    "running_confidence": "#9467bd",
    "conf_entropy": "#8c564b",
    "agreement": "#e377c2",
    "origin": "#7f7f7f",
    "entropy": "#bcbd22",
    "maskgit": "#17becf",
}


# ------------------------------------------------------------------------------------------------ helpers
def _need(df: pd.DataFrame | None, cols: Iterable[str], what: str) -> pd.DataFrame:
    if df is None or len(df) == 0:
        raise InputError(f"{what}: the table has no rows")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(
            f"{what}: the table lacks column(s) {', '.join(missing)} (has {', '.join(map(str, df.columns))})"
        )
    return df


def colors_for(labels: Iterable[Any]) -> dict[Any, str]:
    """A stable colour per label: Care strategies keep their fixed colour, others take the palette in order."""
    out: dict[Any, str] = {}
    free = [c for c in _PALETTE]
    labels = list(dict.fromkeys(labels))
    for lab in labels:
        if str(lab) in STRATEGY_COLORS:
            out[lab] = STRATEGY_COLORS[str(lab)]
    i = 0
    for lab in labels:
        if lab not in out:
            out[lab] = free[i % len(free)]
            i += 1
    return out


def _figure(
    n: int, ncols: int | None = None, *, w: float = PANEL_W, h: float = PANEL_H, sharey: bool = False
):
    from matplotlib.figure import Figure

    n = max(1, n)
    ncols = ncols or min(n, 3)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(w * ncols + 0.4, h * nrows + 0.5), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes:
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.25, linewidth=0.6)
    return fig, list(axes[:n])


def _groups(df: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple, pd.DataFrame]]:
    keys = [k for k in keys if k in df.columns]
    if not keys:
        return [((), df)]
    out = []
    for k, g in df.groupby(keys, sort=False, dropna=False):
        out.append((k if isinstance(k, tuple) else (k,), g))
    return out[:MAX_PANELS]


def _panel_keys(
    df: pd.DataFrame, base: Sequence[str] = ("model",), extra: Sequence[str] = ("task", "mode")
) -> list[str]:
    """``base`` plus the ``extra`` columns that take more than one value (one panel per combination)."""
    return [c for c in base if c in df.columns] + [
        c for c in extra if c in df.columns and df[c].nunique() > 1
    ]


def _title(keys: tuple, names: Sequence[str] = ()) -> str:
    parts = [str(k) for k in keys if not (isinstance(k, float) and math.isnan(k))]
    return " · ".join(parts)


def _legend(ax, **kw) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        # a fixed corner: loc="best" searches over every data point, slow on large figures
        kw.setdefault("loc", "upper left")
        ax.legend(fontsize=7, framealpha=0.75, edgecolor="none", **kw)


def _num(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def _bars(se: np.ndarray | None) -> np.ndarray | None:
    """``yerr`` of an error bar from standard errors: a NaN one as a zero bar; None (no bars) when none is finite."""
    return None if se is None or not np.isfinite(se).any() else np.nan_to_num(se)


def _se_bars(df: pd.DataFrame, col: str) -> np.ndarray | None:
    """:func:`_bars` of the column ``col`` of ``df`` (None without the column)."""
    return _bars(_num(df[col]) if col in df.columns else None)


def figure_svg(fig, *, salt: str = "dlmeval") -> str:
    """The figure as an inline ``<svg>`` element (text as paths, so it renders the same without any font; ids
    salted so several figures can share one HTML page)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    start = text.find("<svg")
    # the RDF metadata block only names vocabularies (purl.org, creativecommons.org): not needed in a page
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", text[start:], flags=re.S)
    svg = re.sub(r'\s+xmlns:(dc|cc|rdf)="[^"]*"', "", svg)
    # a unique prefix for every id of this figure (glyph and clip-path ids would collide across figures)
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", salt) + "-"
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if ids:
        svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
        svg = re.sub(
            r'(xlink:href|href)="#([^"]+)"',
            lambda m: f'{m.group(1)}="#{prefix}{m.group(2)}"' if m.group(2) in ids else m.group(0),
            svg,
        )
        svg = re.sub(
            r"url\(#([^)]+)\)",
            lambda m: f"url(#{prefix}{m.group(1)})" if m.group(1) in ids else m.group(0),
            svg,
        )
    return svg


def figure_png(fig, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------ scoring
def is_diffscore_row(df: pd.DataFrame) -> pd.Series:
    """The rows of a meta-evaluation ``results`` table that are DiffScore (zero-shot or fine-tuned), chosen by
    their role (the ``family`` column: ``diffscore`` / ``ft``), else by label."""
    if "family" in df.columns:
        return df["family"].astype(str).str.lower().isin(("diffscore", "ft"))
    return df["label"].astype(str).str.lower().str.startswith("diffscore")


def meta_eval_ci(results: pd.DataFrame, *, max_metrics: int = 12) -> Any:
    """Primary-protocol correlation of every metric with its bootstrap CI, one panel per benchmark dimension
    (``results`` table of a ``meta-eval`` run). Each panel keeps every DiffScore row (red) and fills up to
    ``max_metrics`` rows with the other metrics of highest correlation; labels are shown in full."""
    df = _need(results, ["benchmark", "dimension", "label", "value"], "meta-evaluation CI plot")
    if "primary" in df.columns:
        df = df[df["primary"].astype(bool)]
    panels = _groups(df, ["benchmark", "dimension_tag" if "dimension_tag" in df.columns else "dimension"])
    chosen = []
    for key, g in panels:
        g = g.drop_duplicates("label")
        ds = is_diffscore_row(g)
        others = (
            g[~ds].assign(_v=_num(g.loc[~ds, "value"])).sort_values("_v", ascending=False, na_position="last")
        )
        keep = pd.concat([g[ds], others.drop(columns="_v").head(max(0, max_metrics - int(ds.sum())))])
        chosen.append((key, keep, len(g)))
    n_rows = max((len(k) for _, k, _ in chosen), default=1)
    longest = max((len(str(lab)) for _, k, _ in chosen for lab in k["label"]), default=10)
    fig, axes = _figure(
        len(chosen), ncols=min(len(chosen), 2), w=2.6 + 0.055 * longest, h=0.22 * n_rows + 1.0
    )
    for ax, (key, g, total) in zip(axes, chosen):
        y = np.arange(len(g))[::-1]
        v = _num(g["value"])
        ds = is_diffscore_row(g).to_numpy()
        colors = np.where(ds, "#d62728", "#1f77b4")
        if "ci_lo" in g.columns and "ci_hi" in g.columns:
            lo, hi = _num(g["ci_lo"]), _num(g["ci_hi"])
            ok = np.isfinite(lo) & np.isfinite(hi)
            ax.hlines(y[ok], lo[ok], hi[ok], color="#999999", linewidth=1.2)
        ax.scatter(v, y, c=list(colors), s=14, zorder=3)
        ax.set_yticks(y)
        ax.set_yticklabels([str(s) for s in g["label"]], fontsize=6.5)
        for tick, red in zip(ax.get_yticklabels(), ds):
            if red:
                tick.set_color("#d62728")
        proto = str(g["protocol_label"].iat[0]) if "protocol_label" in g.columns else "correlation"
        ax.set_xlabel(proto, fontsize=7)
        more = f" ({len(g)} of {total} metrics)" if total > len(g) else ""
        ax.set_title(_title(key) + more, fontsize=8)
    return fig


def profile_correlation(df: pd.DataFrame) -> Any:
    """Per-timestep correlation profiles: correlation of the per-rate score S(t) with the human judgements, one
    line per quality dimension, one panel per benchmark (table ``profile_correlation``)."""
    df = _need(df, ["benchmark", "dimension", "rate", "value"], "per-timestep correlation profile")
    panels = _groups(
        df, ["benchmark"] + (["metric"] if "metric" in df.columns and df["metric"].nunique() > 1 else [])
    )
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        cmap = colors_for(g["dimension"])
        for dim, h in g.groupby("dimension", sort=False):
            h = h.sort_values("rate")
            ax.plot(_num(h["rate"]), _num(h["value"]), marker="o", ms=3, color=cmap[dim], label=str(dim))
            if "ci_lo" in h.columns and "ci_hi" in h.columns:
                ax.fill_between(
                    _num(h["rate"]), _num(h["ci_lo"]), _num(h["ci_hi"]), color=cmap[dim], alpha=0.12
                )
        ax.axhline(0, color="#555555", linewidth=0.6)
        ax.set_xlabel("masking rate t", fontsize=8)
        proto = str(g["protocol"].iat[0]) if "protocol" in g.columns else "correlation"
        ax.set_ylabel(f"correlation of S(t) ({proto})", fontsize=7)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def pmi_scatter(items: pd.DataFrame) -> Any:
    """The PMI decomposition: conditional against marginal score per item, coloured by condition (original,
    fluent-irrelevant, disfluent-relevant), one panel per model; the dashed line is PMI = 0."""
    df = _need(items, ["model", "condition", "cond", "mar"], "PMI scatter")
    panels = _groups(df, ["model"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        cmap = colors_for(g["condition"])
        for cond, h in g.groupby("condition", sort=False):
            ax.scatter(_num(h["mar"]), _num(h["cond"]), s=12, alpha=0.8, color=cmap[cond], label=str(cond))
        both = np.concatenate([_num(g["mar"]), _num(g["cond"])])
        both = both[np.isfinite(both)]
        if both.size:
            lo, hi = float(both.min()), float(both.max())
            ax.plot([lo, hi], [lo, hi], "--", color="#555555", linewidth=0.8)
        ax.set_xlabel("marginal (mean log p)", fontsize=8)
        ax.set_ylabel("conditional (mean log p)", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def token_heatmap(
    record: dict, *, rates: Sequence[float] | None = None, item_id: str = "", direction: str | None = None
):
    """Token x masking-rate heat map of one stored DiffScore item (a result scored with ``token_scores=True``);
    drawn by :func:`dlmeval.scoring.diagnostics.plot_token_heatmap`."""
    from dlmeval.scoring.diagnostics import plot_token_heatmap

    keys = [k for k in record if k.startswith("tokens")]
    if not keys:
        raise InputError("token heat map: the item has no token scores (score with token_scores=True)")
    row = {k: v for k, v in record.items()}
    row.setdefault("item_id", item_id or "item")
    row.setdefault("config", row.get("config", ""))
    row.setdefault("score", float("nan"))
    frame = pd.DataFrame([row])
    if rates:
        frame.attrs["rates"] = list(rates)
    return plot_token_heatmap(frame, 0, direction=direction)


def positional_curves(df: pd.DataFrame) -> Any:
    """Positional bias: mean token score by position (band: +- 1 SD across texts) and the SD by position, one
    line per scorer (DiffScore against AR)."""
    df = _need(df, ["model", "position", "mean"], "positional-bias curves")
    has_std = "std" in df.columns
    fig, axes = _figure(2 if has_std else 1)
    cmap = colors_for(df["model"])
    for model, g in df.groupby("model", sort=False):
        g = g.sort_values("position")
        x, m = _num(g["position"]), _num(g["mean"])
        axes[0].plot(x, m, color=cmap[model], label=str(model), linewidth=1.2)
        if has_std:
            s = _num(g["std"])
            axes[0].fill_between(x, m - s, m + s, color=cmap[model], alpha=0.12)
            axes[1].plot(x, s, color=cmap[model], label=str(model), linewidth=1.2)
    axes[0].set_xlabel("token position in the candidate", fontsize=8)
    axes[0].set_ylabel("mean token log p", fontsize=8)
    axes[0].set_title("mean score by position", fontsize=8)
    _legend(axes[0])
    if has_std:
        axes[1].set_xlabel("token position in the candidate", fontsize=8)
        axes[1].set_ylabel("SD across texts", fontsize=8)
        axes[1].set_title("spread by position", fontsize=8)
    return fig


def directional_scatter(pairs: pd.DataFrame) -> Any:
    """Directional consistency: forward against reverse score per sentence pair, one panel per scorer."""
    scorers = [
        c[: -len("_forward")]
        for c in pairs.columns
        if str(c).endswith("_forward") and f"{c[:-8]}_reverse" in pairs.columns
    ]
    if not scorers:
        raise InputError("directional scatter: the table has no <scorer>_forward / <scorer>_reverse columns")
    fig, axes = _figure(len(scorers))
    for ax, s in zip(axes, scorers):
        f, r = _num(pairs[f"{s}_forward"]), _num(pairs[f"{s}_reverse"])
        ax.scatter(f, r, s=10, alpha=0.7, color=colors_for([s])[s])
        both = np.concatenate([f, r])
        both = both[np.isfinite(both)]
        if both.size:
            ax.plot([both.min(), both.max()], [both.min(), both.max()], "--", color="#555555", linewidth=0.8)
        ax.set_xlabel("forward sentence (mean log p)", fontsize=8)
        ax.set_ylabel("reversed sentence (mean log p)", fontsize=8)
        ax.set_title({"dlm": "DiffScore", "ar": "AR"}.get(s, s), fontsize=8)
    return fig


# ------------------------------------------------------------------------------------------------ sampling
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
        cmap = colors_for(g["strategy"])
        for strat, h in g.groupby("strategy", sort=False):
            h = h.sort_values("temperature")
            ax.errorbar(
                _num(h["temperature"]),
                _num(h["mauve"]),
                yerr=_se_bars(h, "mauve_se"),
                marker="o",
                ms=4,
                capsize=3,
                color=cmap[strat],
                label=str(strat),
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
        cmap = colors_for(sorted(steps.dropna().unique()))
        for st, h in g.groupby(steps, sort=True, dropna=False):
            h = h.sort_values("temperature")
            ax.errorbar(
                _num(h["temperature"]),
                _num(h["gap"]),
                yerr=_se_bars(h, "gap_se"),
                marker="o",
                ms=3,
                capsize=2,
                color=cmap.get(st, "#1f77b4"),
                label=f"{int(st)} steps" if isinstance(st, float | int) and not math.isnan(st) else "all",
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
        _legend(ax)
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


# ------------------------------------------------------------------------------------------------ robustness
def _type_col(df: pd.DataFrame) -> str:
    for c in ("type", "type_key", "perturbation"):
        if c in df.columns:
            return c
    raise InputError("the table has no perturbation type column (type / type_key)")


def accuracy_vs_rate(conditions: pd.DataFrame, clean: pd.DataFrame | None = None) -> Any:
    """Accuracy against perturbation rate, one panel per perturbation type, one line per model (and task);
    rate 0 is the clean accuracy when ``clean`` (model, clean_accuracy) is given. Merge task / mode into the model
    label first when the table mixes them."""
    df = _need(conditions, ["model", "rate", "accuracy"], "accuracy-vs-rate curves")
    tcol = _type_col(df)
    types = list(dict.fromkeys(df[tcol]))[:MAX_PANELS]
    fig, axes = _figure(len(types), sharey=True, w=3.0, h=2.4)
    cmap = colors_for(df["model"])
    for ax, t in zip(axes, types):
        sub = df[df[tcol] == t]
        for model, h in sub.groupby("model", sort=False):
            h = h.groupby("rate", as_index=False)["accuracy"].mean().sort_values("rate")
            x, y = list(_num(h["rate"])), list(_num(h["accuracy"]))
            if clean is not None and {"model", "clean_accuracy"} <= set(clean.columns):
                c = clean[clean["model"] == model]
                if len(c):
                    x, y = [0.0, *x], [float(c["clean_accuracy"].iat[0]), *y]
            ax.plot(x, y, marker="o", ms=3, color=cmap[model], label=str(model))
        ax.set_title(str(t), fontsize=8)
        ax.set_xlabel("perturbation rate r", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
    _legend(axes[0])
    return fig


def rdi_heatmap(conditions: pd.DataFrame) -> Any:
    """RDI per perturbation type (rows) and rate (columns), one panel per model (and task); 0 = no degradation,
    red = accuracy lost, blue = accuracy gained."""
    df = _need(conditions, ["model", "rate", "rdi"], "RDI heat map")
    tcol = _type_col(df)
    panels = _groups(df, _panel_keys(df))
    rates = sorted({round(float(r), 6) for r in _num(df["rate"]) if np.isfinite(r)})
    types = list(dict.fromkeys(df[tcol]))
    fig, axes = _figure(len(panels), w=0.55 * len(rates) + 2.4, h=0.28 * len(types) + 1.2)
    v = _num(df["rdi"])
    lim = max(0.05, float(np.nanmax(np.abs(v))) if np.isfinite(v).any() else 1.0)
    im = None
    for ax, (key, g) in zip(axes, panels):
        mat = np.full((len(types), len(rates)), np.nan)
        for r in g.itertuples(index=False):
            d = r._asdict()
            i = types.index(d[tcol])
            j = rates.index(round(float(d["rate"]), 6))
            mat[i, j] = float(d["rdi"])
        im = ax.imshow(np.ma.masked_invalid(mat), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        for i in range(len(types)):
            for j in range(len(rates)):
                if np.isfinite(mat[i, j]):
                    ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=6, color="black")
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"{r:g}" for r in rates], fontsize=7)
        ax.set_yticks(range(len(types)))
        ax.set_yticklabels([str(t) for t in types], fontsize=7)
        ax.set_xlabel("rate r", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        ax.grid(False)
    if im is not None:
        fig.colorbar(im, ax=axes, label="RDI", shrink=0.8)
    return fig


def reliability_diagram(bins: pd.DataFrame) -> Any:
    """Reliability diagrams: accuracy against mean confidence per bin (marker area ~ items), one panel per model
    (and task), one line per condition; the diagonal is perfect calibration."""
    df = _need(bins, ["model", "confidence", "accuracy"], "reliability diagram")
    panels = _groups(df, _panel_keys(df))
    fig, axes = _figure(len(panels), w=3.0, h=2.9)
    for ax, (key, g) in zip(axes, panels):
        cond = g["condition"] if "condition" in g.columns else pd.Series(["all"] * len(g), index=g.index)
        cmap = colors_for(cond)
        for c, h in g.groupby(cond, sort=False):
            h = h[np.isfinite(_num(h["confidence"])) & np.isfinite(_num(h["accuracy"]))]
            if "count" in h.columns:
                h = h[_num(h["count"]) > 0]
            h = h.sort_values("confidence")
            size = (
                8 + 60 * _num(h["count"]) / max(float(np.nansum(_num(h["count"]))), 1)
                if "count" in h.columns
                else 12
            )
            ax.plot(_num(h["confidence"]), _num(h["accuracy"]), "-", color=cmap[c], linewidth=1, alpha=0.8)
            ax.scatter(
                _num(h["confidence"]), _num(h["accuracy"]), s=size, color=cmap[c], label=str(c), zorder=3
            )
        ax.plot([0, 1], [0, 1], "--", color="#555555", linewidth=0.8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax, loc="upper left")
    return fig


def ipm_comparison(ipm: pd.DataFrame, *, baseline: str | None = None) -> Any:
    """Input prompt masking: accuracy of every IPM variant per condition (bars), the noisy baseline as a dashed
    line (variant named ``noisy`` / ``none`` / ``baseline``, or ``baseline``)."""
    df = _need(ipm, ["variant", "accuracy"], "IPM comparison")
    cond_col = "condition" if "condition" in df.columns else None
    panels = _groups(df, _panel_keys(df))
    fig, axes = _figure(len(panels), w=4.2, h=2.8)
    base_names = [baseline] if baseline else ["noisy", "none", "baseline", "noisy baseline"]
    for ax, (key, g) in zip(axes, panels):
        conds = list(dict.fromkeys(g[cond_col])) if cond_col else ["all"]
        is_base = g["variant"].astype(str).str.lower().isin([b.lower() for b in base_names])
        variants = list(dict.fromkeys(g.loc[~is_base, "variant"]))
        cmap = colors_for(variants)
        width = 0.8 / max(len(variants), 1)
        for vi, var in enumerate(variants):
            ys = []
            for c in conds:
                h = g[(g["variant"] == var) & ((g[cond_col] == c) if cond_col else True)]
                ys.append(float(_num(h["accuracy"]).mean()) if len(h) else np.nan)
            ax.bar(
                np.arange(len(conds)) + (vi - (len(variants) - 1) / 2) * width,
                ys,
                width,
                color=cmap[var],
                label=str(var),
            )
        for ci, c in enumerate(conds):
            h = g[is_base & ((g[cond_col] == c) if cond_col else True)]
            if len(h):
                ax.hlines(
                    float(_num(h["accuracy"]).mean()),
                    ci - 0.45,
                    ci + 0.45,
                    colors="#111111",
                    linestyles="--",
                    linewidth=1.0,
                    label="noisy baseline" if ci == 0 else None,
                )
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels([str(c) for c in conds], fontsize=7, rotation=20)
        ax.set_ylabel("accuracy", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def dgcg_trajectories(df: pd.DataFrame) -> Any:
    """D-GCG / GCG loss across optimization steps: mean over items (band: +- 1 SD), one line per model, one
    panel per suffix length."""
    df = _need(df, ["model", "step", "loss"], "D-GCG loss trajectories")
    panels = _groups(df, ["suffix_length"] if "suffix_length" in df.columns else [])
    fig, axes = _figure(len(panels))
    cmap = colors_for(df["model"])
    for ax, (key, g) in zip(axes, panels):
        for model, h in g.groupby("model", sort=False):
            agg = h.groupby("step")["loss"].agg(["mean", "std"]).reset_index().sort_values("step")
            x, m, s = _num(agg["step"]), _num(agg["mean"]), _num(agg["std"])
            ax.plot(x, m, color=cmap[model], label=str(model), linewidth=1.2)
            if np.isfinite(s).any():
                ax.fill_between(x, m - np.nan_to_num(s), m + np.nan_to_num(s), color=cmap[model], alpha=0.12)
        ax.set_xlabel("optimization step", fontsize=8)
        ax.set_ylabel("target loss", fontsize=8)
        ax.set_title(f"suffix length {key[0]}" if key else "", fontsize=8)
        _legend(ax)
    return fig


def _seq(v: Any) -> list | None:
    """A per-layer sequence stored as a list or as a space-separated string (the robust ``probes`` table)."""
    if isinstance(v, list | tuple | np.ndarray):
        return list(v)
    if isinstance(v, str) and v.strip():
        try:
            return [float(x) for x in v.split()]
        except ValueError:
            return None
    return None


def probe_long(probes: pd.DataFrame) -> pd.DataFrame:
    """Long (model, task, condition, layer, accuracy, auroc) rows from a probe table: one row per layer already,
    or one row per (model, condition) with per-layer ``layers`` and ``accuracy`` / ``accuracy_by_layer`` (lists,
    or space-separated strings as the robustness protocol stores them)."""
    if probes is None or "layer" in probes.columns:
        return probes
    rows = []
    for r in probes.to_dict("records"):
        layers = _seq(r.get("layers"))
        acc = _seq(r.get("accuracy_by_layer", r.get("accuracy")))
        if layers is None or acc is None or len(layers) != len(acc):
            continue
        auc = _seq(r.get("auroc_by_layer", r.get("auroc"))) or [np.nan] * len(layers)
        if len(auc) != len(layers):
            auc = [np.nan] * len(layers)
        for la, a, u in zip(layers, acc, auc):
            rec = {"model": r.get("model", "?"), "condition": r.get("condition", r.get("type", "all"))}
            if "task" in r:
                rec["task"] = r["task"]
            rec.update({"layer": int(la), "accuracy": float(a), "auroc": float(u)})
            rows.append(rec)
    cols = [
        "model",
        *(["task"] if "task" in probes.columns else []),
        "condition",
        "layer",
        "accuracy",
        "auroc",
    ]
    return pd.DataFrame(rows, columns=cols)


def probe_layers(df: pd.DataFrame) -> Any:
    """Linear-probe accuracy (clean vs perturbed hidden states) by layer, one line per model, one panel per
    condition."""
    df = _need(probe_long(df), ["model", "layer", "accuracy"], "probe accuracy by layer")
    panels = _groups(df, _panel_keys(df, base=("condition",), extra=("task",)))
    fig, axes = _figure(len(panels), sharey=True)
    cmap = colors_for(df["model"])
    for ax, (key, g) in zip(axes, panels):
        for model, h in g.groupby("model", sort=False):
            h = h.groupby("layer", as_index=False)["accuracy"].mean().sort_values("layer")
            ax.plot(
                _num(h["layer"]), _num(h["accuracy"]), marker="o", ms=3, color=cmap[model], label=str(model)
            )
        ax.axhline(0.5, color="#555555", linewidth=0.7, linestyle=":")
        ax.set_xlabel("layer (0 = embeddings)", fontsize=8)
        ax.set_ylabel("probe accuracy", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


# ------------------------------------------------------------------------------------------------ checks
def _data_lines(ax) -> list:
    """The axes' lines drawn in data coordinates (not axhline / axvline reference lines)."""
    return [ln for ln in ax.get_lines() if ln.get_transform() == ax.transData and ln.get_visible()]


def _finite(a) -> np.ndarray:
    a = np.ma.filled(np.ma.asarray(a, dtype=float), np.nan).ravel()
    return a[np.isfinite(a)]


def empty_reason(fig) -> str | None:
    """Why a figure is not worth showing, or None: ``nothing to draw`` when no line, marker, band or image holds a
    finite value and no bar has a finite non-zero height (error bars and reference lines alone are not data);
    ``one level`` when every data line has a single x value (a factor with one level: the section's table says
    it better than one point on a padded axis)."""
    from matplotlib.collections import LineCollection
    from matplotlib.image import AxesImage
    from matplotlib.patches import Rectangle

    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    has_data = False
    xs_per_line = []
    for ax in axes:
        for ln in _data_lines(ax):
            y = np.asarray(ln.get_ydata(), dtype=float)
            x = np.asarray(ln.get_xdata(), dtype=float)
            ok = np.isfinite(x) & np.isfinite(y)
            if ok.any():
                has_data = True
                xs_per_line.append(len(np.unique(x[ok])))
        for c in ax.collections:
            if isinstance(c, LineCollection):
                continue  # error bars and reference lines alone are not data
            if _finite(c.get_offsets()).size or any(_finite(p.vertices).size for p in c.get_paths()):
                has_data = True
                xs_per_line.append(2)  # scatter / bands: not a single-level line plot
        for p in ax.patches:
            if isinstance(p, Rectangle) and np.isfinite(p.get_height()) and p.get_height() != 0:
                has_data = True
                xs_per_line.append(2)
        for im in ax.images:
            if isinstance(im, AxesImage) and _finite(im.get_array()).size:
                has_data = True
                xs_per_line.append(2)
    if not has_data:
        return "nothing to draw (every value is missing, or zero)"
    if xs_per_line and max(xs_per_line) <= 1:
        return "one level of the factor on the x axis (one point per line); the table shows the values"
    return None


__all__ = [
    "STRATEGY_COLORS",
    "empty_reason",
    "is_diffscore_row",
    "probe_long",
    "accuracy_vs_rate",
    "churn_plot",
    "colors_for",
    "dgcg_trajectories",
    "directional_scatter",
    "dose_response",
    "figure_png",
    "figure_svg",
    "gap_plot",
    "interaction_plot",
    "ipm_comparison",
    "meta_eval_ci",
    "nfe_vs_steps",
    "pareto_front",
    "pmi_scatter",
    "positional_curves",
    "ppl_mauve_frontier",
    "probe_layers",
    "profile_correlation",
    "rdi_heatmap",
    "reliability_diagram",
    "temperature_curves",
    "token_heatmap",
]
