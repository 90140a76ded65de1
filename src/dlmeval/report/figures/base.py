"""The figure home's building blocks: palette and colours, the panel grid, the one legend rule, table checks, and
the figure as SVG / PNG. Every figure of dlmeval (report sections, robustness PNGs) is drawn with these."""

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


#: THE legend rule of every figure: outside the plotted area, so no legend covers a line, a marker or a bar. A
#: panel's own legend sits right of the panel (its top edge level with the panel's top); a legend the panels share
#: sits once right of the figure. The constrained layout makes room for it.
LEGEND_STYLE = {"fontsize": 7, "frameon": False}


def _legend(ax, **kw) -> None:
    """The panel's legend, outside it on the right (:data:`LEGEND_STYLE`); nothing when nothing is labelled.
    ``kw`` is passed to :meth:`~matplotlib.axes.Axes.legend` (e.g. ``ncols``); the placement is not negotiable."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            **{**LEGEND_STYLE, **kw},
        )


def legend_outside(fig, axes: Sequence | None = None, **kw) -> None:
    """One legend for every panel of ``fig`` (labels of ``axes``, each once, in order of appearance), right of the
    figure, outside every panel; the form of :func:`_legend` for a legend the panels share."""
    seen: dict[str, Any] = {}
    for ax in axes if axes is not None else fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab and not lab.startswith("_") and lab not in seen:
                seen[lab] = h
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside right upper", **{**LEGEND_STYLE, **kw})


def grouped_bars(
    ax,
    frame: pd.DataFrame,
    *,
    x: str,
    group: str,
    value: str,
    lo: str | None = None,
    hi: str | None = None,
    colors: dict | None = None,
    nan_as_zero: bool = False,
) -> None:
    """Bars of ``value`` per category ``x`` (in order of appearance), one bar per ``group`` side by side, with the
    interval ``[lo, hi]`` as error bars when given; a legend entry per group. ``nan_as_zero`` draws a missing value
    as a zero bar (the robustness tables' ``n/m``) instead of leaving its place empty."""
    cats = list(dict.fromkeys(frame[x]))
    groups = list(dict.fromkeys(frame[group]))
    cmap = colors or colors_for(groups)
    w = 0.8 / max(len(groups), 1)
    pos = np.arange(len(cats))
    for j, gname in enumerate(groups):
        g = frame[frame[group] == gname].drop_duplicates(x).set_index(x).reindex(cats)
        y = _num(g[value])
        err = None
        if lo is not None and hi is not None:
            err = np.vstack([y - _num(g[lo]), _num(g[hi]) - y])
            err = np.nan_to_num(err) if nan_as_zero else err
        ax.bar(
            pos + (j - (len(groups) - 1) / 2) * w,
            np.nan_to_num(y) if nan_as_zero else y,
            w,
            yerr=err,
            capsize=3 if err is not None else 0,
            color=cmap[gname],
            label=str(gname),
        )
    ax.set_xticks(pos, [str(c) for c in cats], fontsize=7)


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


def save_png(fig, path, out: list | None = None, *, dpi: int = 110):
    """Write ``fig`` as a PNG file at ``path`` (appended to ``out`` when given); returns the path."""
    from pathlib import Path

    path = Path(path)
    fig.savefig(path, format="png", dpi=dpi)
    if out is not None:
        out.append(path)
    return path


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


def legend_overlaps(fig) -> list[str]:
    """The check of the legend rule: every legend (a panel's or the figure's) whose box overlaps the plotting area
    of a visible panel, named by its first labels and the panel's title (an empty list when the rule holds)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a Figure built without pyplot has no renderer of its own
    canvas.draw()
    r = canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    legends = [lg for lg in [*(ax.get_legend() for ax in axes), *fig.legends] if lg is not None]
    bad = []
    for lg in legends:
        box = lg.get_window_extent(r)
        for ax in axes:
            a = ax.get_window_extent(r)
            if box.x0 < a.x1 - 1 and box.x1 > a.x0 + 1 and box.y0 < a.y1 - 1 and box.y1 > a.y0 + 1:
                bad.append(f"{[t.get_text() for t in lg.get_texts()][:3]} over {ax.get_title()!r}")
    return bad
