"""Sampling-pillar sections: the Care tables and figures (actual NFE, temperature curves, the strategy x
temperature interaction, the PPL-MAUVE frontier, churn, dose-response, downstream, leaderboard)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dlmeval.report import figures as F
from dlmeval.report.fmt import TableView, fmt_p, fmt_value
from dlmeval.report.registry import ITEMS, Context, Omit, Section, register

CARE = ("care", "care-sweep")


def headline(ctx: Context) -> dict[str, Any]:
    """Headline baseline, strategy, steps and temperature of a Care run (its ``headline`` table, else its
    config)."""
    cfg = ctx.run.signature.config
    h = dict(cfg.get("headline") or {})
    sweep = cfg.get("sweep") or {}
    out = {
        "baseline": h.get("baseline", "none"),
        "strategy": h.get("strategy", "high_entropy"),
        "steps": h.get("steps") if h.get("steps") is not None else max(sweep.get("steps") or [0]) or None,
        "temperature": h.get("temperature")
        if h.get("temperature") is not None
        else max(sweep.get("temperatures") or [0]),
    }
    tab = ctx.table("headline")
    if tab is not None and len(tab):
        for k in ("baseline", "strategy", "steps", "temperature"):
            if k in tab.columns and pd.notna(tab[k].iat[0]):
                out[k] = tab[k].iat[0]
    return out


def _grid(
    df: pd.DataFrame, rows: list[str], value: str, se: str | None = None, p: str | None = None
) -> pd.DataFrame:
    """Long table -> rows x temperature columns with formatted ``mean ± se`` cells (as the paper prints them)."""
    rows = [r for r in rows if r in df.columns]
    temps = sorted(pd.to_numeric(df["temperature"], errors="coerce").dropna().unique())
    out = []
    for key, g in df.groupby(rows, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rec: dict[str, Any] = {r: fmt_value(k, r) for r, k in zip(rows, key)}
        for t in temps:
            sub = g[np.isclose(pd.to_numeric(g["temperature"], errors="coerce"), t)]
            if sub.empty:
                rec[f"t={t:g}"] = "–"
                continue
            r0 = sub.iloc[0]
            cell = fmt_value(r0[value], value)
            if se and se in sub.columns and pd.notna(r0[se]):
                cell += f" ± {fmt_value(r0[se], value)}"
            if p and p in sub.columns and pd.notna(r0[p]):
                cell += f" (p={fmt_p(r0[p])})"
            rec[f"t={t:g}"] = cell
        out.append(rec)
    return pd.DataFrame(out)


@register(
    "care/nfe",
    pillar="sampling",
    kinds=CARE,
    table="nfe",
    title="Actual NFE",
    columns=("strategy", "steps", "nfe"),
    optional=("model", "nfe_min", "nfe_max", "n_cells", "ratio_vs_<baseline>", "same_as", "accounting"),
    n_figures=1,
)
def _nfe(ctx: Context) -> Section:
    s = Section("Actual NFE (forward passes per sample)")
    s.table(
        TableView(
            ctx.df,
            caption="Actual NFE per sample at each nominal step count (counted from model.nfe), over every sweep "
            "cell; ratio to the baseline strategy at the same steps",
            name=ctx.name,
        )
    )
    s.figure(
        "Actual NFE against nominal steps: a strategy that re-masks spends forward passes the nominal step count "
        "does not show (bars: min-max over samples).",
        F.nfe_vs_steps(ctx.df),
    )
    return s


_QUALITY_COLS = (
    "model",
    "source",
    "strategy",
    "steps",
    "temperature",
    "n_seeds",
    "nfe",
    "ppl",
    "ppl_se",
    "mauve",
    "mauve_se",
    "self_bleu",
    "distinct3",
    "acceptance",
)


@register(
    "care/temperature",
    pillar="sampling",
    kinds=CARE,
    table="quality",
    title="MAUVE and PPL across temperatures",
    columns=("strategy", "temperature", "mauve"),
    optional=(
        "model",
        "source",
        "steps",
        "mauve_se",
        "ppl",
        "ppl_se",
        "nfe",
        "self_bleu",
        "distinct3",
        "acceptance",
    ),
    n_figures=1,
)
def _temperature(ctx: Context) -> Section:
    df = ctx.df
    s = Section("MAUVE and PPL across unmask temperatures")
    s.figure(
        "MAUVE (higher is better) and PPL by the external AR model (lower is better) across unmask temperatures, "
        "per strategy and nominal step budget; bars: +- 1 SE over seeds.",
        F.temperature_curves(df),
    )
    keep = [c for c in _QUALITY_COLS if c in df.columns]
    s.table(
        TableView(
            df[keep],
            caption="Quality per strategy, steps and temperature (means over seeds; PPL and MAUVE on English-filtered generations)",
            name=ctx.name,
            best={"mauve": "max", "ppl": "min", "distinct3": "max", "self_bleu": "min"},
            note="Bold: best value per column.",
            more_hint=ctx.more_hint(),
        )
    )
    return s


@register(
    "care/interaction",
    pillar="sampling",
    kinds=CARE,
    table="mauve_temperature",
    title="Strategy x temperature interaction",
    columns=("strategy", "temperature", "mauve"),
    optional=("model", "source", "steps", "mauve_se", "n_seeds"),
    uses=("headline",),
    n_figures=1,
)
def _interaction(ctx: Context) -> Section:
    h = headline(ctx)
    s = Section("The strategy x temperature interaction")
    steps = h["steps"]
    try:
        fig = F.interaction_plot(ctx.df, steps=steps, baseline=h["baseline"], strategy=h["strategy"])
    except Exception:
        fig = F.interaction_plot(ctx.df)
    s.figure(
        f"MAUVE against unmask temperature per strategy at {fmt_value(steps, 'steps')} nominal steps (the headline "
        "budget); bars: +- 1 SE over seeds. Lines that cross or diverge are the interaction.",
        fig,
    )
    s.table(
        TableView(
            _grid(ctx.df, ["model", "source", "strategy", "steps"], "mauve", "mauve_se"),
            caption="MAUVE mean ± SE over seeds, per unmask temperature",
            name=ctx.name,
        )
    )
    hl = ctx.table("headline")
    if hl is not None and len(hl):
        keep = [
            c
            for c in (
                "model",
                "source",
                "steps",
                "temperature",
                "baseline",
                "strategy",
                "mauve_baseline",
                "mauve_strategy",
                "n_seeds",
                "gap",
                "gap_se",
                "t",
                "p",
                "ci_lo",
                "ci_hi",
                "confidence",
                "n_resamples",
            )
            if c in hl.columns
        ]
        s.table(
            TableView(
                hl[keep],
                caption="Headline interaction gap MAUVE(baseline) - MAUVE(strategy): paired t-test over seeds and "
                "percentile bootstrap CI",
                name="headline",
            )
        )
    return s


@register(
    "care/frontier",
    pillar="sampling",
    kinds=CARE,
    table="quality",
    title="PPL-MAUVE frontier",
    columns=("strategy", "ppl", "mauve"),
    optional=("model", "source", "steps", "temperature"),
    n_figures=1,
)
def _frontier(ctx: Context) -> Section:
    df = ctx.df
    s = Section("The PPL-MAUVE frontier")
    s.figure(
        "Every (strategy, steps, temperature) configuration in the PPL-MAUVE plane; the line joins the Pareto-"
        "optimal ones. Overlapping clouds hide the interaction that the temperature decomposition shows.",
        F.ppl_mauve_frontier(df),
    )
    rows = []
    groups = (
        df.groupby([c for c in ("model", "source") if c in df.columns], sort=False)
        if any(c in df.columns for c in ("model", "source"))
        else [((), df)]
    )
    for _, g in groups:
        g = g.reset_index(drop=True)
        front = F.pareto_front(
            pd.to_numeric(g["ppl"], errors="coerce").to_numpy(float),
            pd.to_numeric(g["mauve"], errors="coerce").to_numpy(float),
        )
        rows.append(g.iloc[front])
    front_df = pd.concat(rows) if rows else df.iloc[:0]
    keep = [
        c
        for c in ("model", "source", "strategy", "steps", "temperature", "nfe", "ppl", "mauve")
        if c in front_df.columns
    ]
    s.table(
        TableView(
            front_df[keep], caption="Pareto-optimal configurations (lower PPL, higher MAUVE)", name="frontier"
        )
    )
    return s


@register(
    "care/gap",
    pillar="sampling",
    kinds=CARE,
    table="gap",
    title="Interaction gap by temperature",
    columns=("temperature", "gap"),
    optional=("model", "source", "steps", "baseline", "strategy", "n_seeds", "gap_se", "t", "df", "p"),
    n_figures=1,
)
def _gap(ctx: Context) -> Section:
    df = ctx.df
    s = Section("MAUVE gap baseline - strategy by temperature")
    s.figure(
        "The paired MAUVE gap per nominal step budget; bars: +- 1 paired SE over seeds; above 0: the baseline wins.",
        F.gap_plot(df),
    )
    multi = "n_seeds" in df.columns and (pd.to_numeric(df["n_seeds"], errors="coerce") > 1).any()
    s.table(
        TableView(
            _grid(df, ["model", "source", "steps"], "gap", "gap_se", "p" if multi else None),
            caption="Gap ± paired SE (p: paired t-test over seeds)",
            name=ctx.name,
        )
    )
    return s


def _simple(
    key: str, table: str, title: str, caption: str, columns=(), optional=(), best=None, note: str = ""
):
    def fn(ctx: Context) -> Section:
        return Section(title).table(
            TableView(
                ctx.df,
                caption=caption,
                name=ctx.name,
                best=dict(best or {}),
                note=note,
                more_hint=ctx.more_hint(),
            )
        )

    register(
        key, pillar="sampling", kinds=CARE, table=table, title=title, columns=columns, optional=optional
    )(fn)


_simple(
    "care/anova",
    "anova",
    "Three-way ANOVA",
    "ANOVA of MAUVE on temperature x strategy x steps (Type II sums of squares), partial η²",
    columns=("factor", "F", "p"),
    optional=("model", "source", "df", "sum_sq", "partial_eta_sq", "n_cells", "note"),
)
_simple(
    "care/compute_matched",
    "compute_matched",
    "Compute-matched comparison",
    "PPL and MAUVE at equal actual-NFE budgets; delta: strategy - baseline MAUVE at the same budget",
    columns=("strategy", "nfe_budget", "mauve"),
    optional=(
        "model",
        "source",
        "temperature",
        "n_seeds",
        "nfe",
        "ppl",
        "ppl_se",
        "mauve_se",
        "delta_mauve_vs_<baseline>",
        "steps",
        "nfe_predicted",
        "reached",
        "same_as",
        "accounting",
    ),
    best={"mauve": "max", "ppl": "min"},
    note="reached = False: the budget is out of the strategy's reach (none spends at most one pass per "
    "generated token); the cell ran at the closest budget below. same_as: the nominal-steps cell whose "
    "generations it is (run once).",
)
_simple(
    "care/mechanism",
    "mechanism",
    "Churn mechanism (C.3)",
    "Per strategy and nominal steps: share of the generation replaced per forwarded step (%), re-masks per "
    "sample, stable token-step cells per sample, actual NFE",
    columns=("strategy", "steps", "remasks_per_sample"),
    optional=("model", "n_cells", "nfe", "replaced_per_step_pct", "stable_cells", "same_as", "accounting"),
)
_simple(
    "care/acceptance",
    "acceptance",
    "English-filter acceptance",
    "Share of generations the English filter accepts (%), per configuration",
    columns=("strategy", "acceptance_pct"),
    optional=("model", "source", "steps", "temperature", "min_pct", "max_pct", "n_generated", "n_accepted"),
)
_simple(
    "care/downstream",
    "downstream",
    "Downstream tasks",
    "HumanEval pass@1 and GSM8K exact match per configuration (± SE over seeds; binomial SE of one seed)",
    columns=("task", "strategy", "accuracy"),
    optional=(
        "model",
        "steps",
        "nfe_budget",
        "temperature",
        "n_seeds",
        "n_items",
        "nfe",
        "accuracy_se_seeds",
        "binomial_se",
    ),
    best={"accuracy": "max"},
)
_simple(
    "care/arc",
    "arc",
    "ARC-Challenge (sampling-invariant check)",
    "ARC-Challenge accuracy by log-likelihood: no sampling setting can change it",
    columns=("model", "accuracy"),
    optional=("n_items", "binomial_se"),
)
_simple(
    "care/leaderboard",
    "leaderboard",
    "Care leaderboard (this sweep)",
    "Per model: baseline and strategy PPL / MAUVE at the headline configuration, the interaction gap, downstream",
    columns=("model", "gap"),
    optional=(
        "source",
        "steps",
        "temperature",
        "ppl_<strategy>",
        "mauve_<strategy>",
        "gap_se",
        "p",
        "n_seeds",
        "humaneval_pass1",
        "humaneval_cell",
        "gsm8k_em",
        "gsm8k_cell",
        "arc_acc",
    ),
)


@register(
    "care/dose_response",
    pillar="sampling",
    kinds=CARE,
    table="dose_response",
    title="Remask-fraction dose-response",
    columns=("fraction", "mauve"),
    optional=(
        "model",
        "source",
        "strategy",
        "steps",
        "temperature",
        "n_seeds",
        "mauve_se",
        "ppl",
        "distinct3",
        "remasks_per_sample",
        "nfe",
    ),
    n_figures=1,
)
def _dose(ctx: Context) -> Section:
    s = Section("Remask-fraction dose-response")
    s.figure(
        "MAUVE (± SE) and re-masks per sample across remask fractions at a fixed strategy, steps and temperature.",
        F.dose_response(ctx.df),
    )
    s.table(
        TableView(ctx.df, caption="Dose-response: the dose strategy across remask fractions", name=ctx.name)
    )
    return s


# ------------------------------------------------------------------------------------------------ churn
CELL_FIELDS = (
    "source",
    "strategy",
    "steps",
    "nfe_budget",
    "temperature",
    "fraction",
    "seed",
    "replacement_rate",
    "remasks",
    "stable_cells",
    "nfe",
)


def cell_records(runs) -> pd.DataFrame:
    """The per-cell records (``cell/<key>`` items) of Care runs, one row per cell, with the model name."""
    from dlmeval.report.registry import results_with_prefix

    rows = []
    for run in runs:
        model = run.signature.config.get("model") or (
            run.signature.models[0].get("name") if run.signature.models else ""
        )
        for rec in results_with_prefix(run, "cell/").values():
            if isinstance(rec, dict):
                rows.append({"model": model, **{k: rec.get(k) for k in CELL_FIELDS}})
    df = pd.DataFrame(rows, columns=["model", *CELL_FIELDS])
    for c in CELL_FIELDS[2:]:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


@register(
    "care/churn",
    pillar="sampling",
    kinds=CARE,
    table=ITEMS,
    title="Churn over steps",
    columns=(),
    optional=("cell/<key> items: strategy, steps, fraction, replacement_rate, remasks, stable_cells",),
    n_figures=1,
    description="per-cell records of the care runs (folded into their sweep)",
)
def _churn(ctx: Context) -> Section:
    step_table = ctx.table("churn")
    s = Section("Churn over steps")
    if step_table is not None and {"strategy", "step", "replacement_rate"} <= set(step_table.columns):
        s.figure(
            "Share of the generation replaced at each denoising step, per strategy.", F.churn_plot(step_table)
        )
        s.table(
            TableView(
                step_table,
                caption="Churn per denoising step",
                name="churn",
                max_rows=20,
                more_hint=ctx.more_hint("churn"),
            )
        )
        return s
    cells = cell_records(ctx.item_runs())
    cells = cells[cells["steps"].notna()]
    if cells.empty:
        raise Omit("no per-cell records with nominal steps in the run (items cell/<key>)")
    fr = cells["fraction"].mode()
    if len(fr):
        cells = cells[np.isclose(cells["fraction"], fr.iat[0])]
    s.figure(
        "Token churn against the nominal step budget: the share of the generation replaced per forward step and "
        "the re-masks per sample (means over temperatures, seeds and prompts; bars: +- 1 SE over cells).",
        F.churn_plot(cells),
    )
    agg = (
        cells.groupby(["model", "strategy", "steps"], sort=False)
        .agg(
            replacement_rate=("replacement_rate", "mean"),
            remasks=("remasks", "mean"),
            stable_cells=("stable_cells", "mean"),
            nfe=("nfe", "mean"),
            n_cells=("seed", "size"),
        )
        .reset_index()
    )
    s.table(
        TableView(
            agg,
            caption="Churn per strategy and nominal steps (replaced / step: share of generated tokens replaced per forwarded step; stable: token-step cells left unchanged)",
            name="churn",
        )
    )
    return s
