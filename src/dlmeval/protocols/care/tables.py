"""The Care tables as pure functions of stored cell results (so a resumed sweep gives identical tables).

Input: ``cells``, one row per finished generation cell, with the columns of :data:`CELL_COLUMNS`
(``model, source, strategy, steps, nfe_budget, temperature, fraction, seed`` identify the cell; ``steps`` is NaN for
a compute-matched cell, ``nfe_budget`` NaN for a nominal-steps cell) and, for downstream tasks, ``down`` with the
columns of :data:`DOWN_COLUMNS`. Every function returns a long-format DataFrame of numbers (no formatted strings);
:func:`markdown` renders one for people, pivoting the temperature grids the way the paper prints them.

=================  =========================================================  =============
table              what                                                       paper
=================  =========================================================  =============
nfe                actual NFE per sample at each nominal step count, ratio    Table 3
mechanism          replacement rate per step, re-masks, stable token-step     Section 4.4 / C.3
compute_matched    PPL / MAUVE at equal actual NFE budgets, delta vs baseline Table 4
quality            PPL, MAUVE, Self-BLEU, Distinct-3, NFE per strategy x steps Table 5 (+C.10)
mauve_temperature  MAUVE mean +- SE over seeds across temperatures            Table 6 / 13
gap                baseline - strategy MAUVE, paired SE, paired t-test        Table 7
anova              three-way ANOVA (temperature x strategy x steps), eta_p^2  Table 8
headline           the headline gap with its 10k-resample bootstrap CI        Section 4.4
dose_response      MAUVE / PPL / Distinct-3 / remasks across remask fractions Table 9
acceptance         English-filter acceptance rate (%)                         Tables 19/20
downstream         HumanEval pass@1, GSM8K exact match per configuration      Tables 11/18
arc                log-likelihood accuracy: HellaSwag, BBH (+ ARC, ours)     Section 4.6
leaderboard        per model: baseline and strategy MAUVE/PPL, the gap        Table 12/21
=================  =========================================================  =============

Standard errors are over seeds: SD (ddof=1) / sqrt(n) (:func:`dlmeval.stats.mean_se`), NaN with one seed. The gap
SE is the SE of the seed-wise paired differences; its t-test is :func:`dlmeval.stats.paired_ttest` (df = n - 1).

Every generation table carries the spec's NFE ``accounting`` (``paper``, or ``refill``: one pass per nominal
step) and ``same_as``: the cell whose generations a provably identical cell reuses (run once, e.g. ``none`` at 256
steps with 128 tokens is ``none`` at 128).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dlmeval.protocols.care.comparisons import (
    ANOVA_FACTORS,
    table_anova,
    table_gap,
    table_headline,
    table_leaderboard,
)
from dlmeval.protocols.care.frames import (
    CELL_COLUMNS,
    DOWN_COLUMNS,
    _group,
    _int_cols,
    _isin,
    _ms,
    cells_frame,
    down_frame,
    sweep_cells,
)
from dlmeval.protocols.care.spec import LOGLIK_TASKS, CareSpec

TABLE_ORDER = (
    "nfe",
    "mechanism",
    "compute_matched",
    "quality",
    "mauve_temperature",
    "gap",
    "anova",
    "headline",
    "dose_response",
    "acceptance",
    "downstream",
    "arc",
    "leaderboard",
    "published",
)
TITLES = {
    "nfe": "Actual NFE per sample at nominal steps (Table 3)",
    "mechanism": "Churn per strategy: tokens replaced per step, re-masks and stable token-step cells (C.3)",
    "compute_matched": "Compute-matched quality at equal actual NFE (Table 4)",
    "quality": "PPL, MAUVE and diversity per strategy and step budget (Table 5)",
    "mauve_temperature": "MAUVE across unmask temperatures, mean +- SE over seeds (Table 6)",
    "gap": "MAUVE gap baseline - strategy, paired SE and paired t-test (Table 7)",
    "anova": "Three-way ANOVA on MAUVE with partial eta squared (Table 8)",
    "headline": "Headline interaction gap with bootstrap CI (Section 4.4)",
    "dose_response": "Remask-fraction dose-response (Table 9)",
    "acceptance": "English-filter acceptance rate, % (Tables 19/20)",
    "downstream": "Downstream generation tasks: HumanEval pass@1, GSM8K exact match (Tables 11/18)",
    "arc": "Log-likelihood accuracy, sampling-invariant: HellaSwag and BBH (the paper's Section 4.6 checks), ARC (ours)",
    "leaderboard": "Care leaderboard: interaction gap per model (Tables 12/21)",
    "published": "Measured vs published: every cell the spec carries a paper value for (diff in seed SEs)",
}


# ------------------------------------------------------------------------------------------------ tables
def table_nfe(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 3: actual NFE per sample per (model, strategy, nominal steps), over every sweep cell; ratio to the
    baseline strategy at the same steps."""
    sw = sweep_cells(cells, spec)

    def f(g):
        return {
            "nfe": float(g["nfe"].mean()),
            "nfe_min": float(g["nfe_min"].min()),
            "nfe_max": float(g["nfe_max"].max()),
            "n_cells": len(g),
            "same_as": _same_as(g),
        }

    out = _group(sw, ["model", "strategy", "steps"], f)
    if out.empty:
        return out
    base = out[out["strategy"] == spec.headline.baseline].set_index(["model", "steps"])["nfe"]
    out[f"ratio_vs_{spec.headline.baseline}"] = [
        r.nfe / base.get((r.model, r.steps), float("nan")) for r in out.itertuples()
    ]
    out["accounting"] = spec.generation.accounting
    return _int_cols(out, ["steps"])


def _same_as(g: pd.DataFrame) -> str | None:
    """The cell (``strategy@steps``) whose generations every cell of the group reuses, if they all reuse the
    same one (cell keys differ by temperature and seed; the label names strategy and steps)."""
    if g["same_as"].isna().any():
        return None
    labels = set()
    for key in g["same_as"]:
        parts = str(key).split("|")  # source|strategy|s<steps>|t..|f..|seed..
        labels.add(f"{parts[1]}@{parts[2].removeprefix('s')}")
    return labels.pop() if len(labels) == 1 else None


def table_mechanism(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """C.3 / Section 4.4's mechanism: per (model, strategy, nominal steps) over the sweep cells, the share of the
    generation replaced per forwarded step (%), re-masks per sample, stable token-step cells per sample and the
    actual NFE."""
    sw = sweep_cells(cells, spec)

    def f(g):
        return {
            "n_cells": len(g),
            "nfe": float(g["nfe"].mean()),
            "replaced_per_step_pct": 100.0 * float(g["replacement_rate"].mean()),
            "remasks_per_sample": float(g["remasks"].mean()),
            "stable_cells": float(g["stable_cells"].mean()),
            "same_as": _same_as(g),
        }

    out = _group(sw, ["model", "strategy", "steps"], f)
    if out.empty:
        return out
    out["accounting"] = spec.generation.accounting
    return _int_cols(out, ["steps"])


def table_compute_matched(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 4: cells run at an actual-NFE budget; MAUVE delta = strategy mean - baseline mean (same budget)."""
    c = spec.compute_matched
    sel = cells[
        cells["nfe_budget"].notna()
        & _isin(cells["nfe_budget"].fillna(-1), c.nfe or [-2])
        & cells["strategy"].isin(c.strategies)
        & _isin(cells["temperature"], c.temperatures)
        & _isin(cells["seed"], c.seeds)
    ]

    def f(g):
        mm, ms = _ms(g["mauve"])
        pm, ps = _ms(g["ppl"])
        budget = float(g["nfe_budget"].iloc[0])
        nfe = float(g["nfe"].mean())
        return {
            "n_seeds": len(g),
            "steps": float(g["resolved_steps"].mean()),
            "nfe": nfe,
            # a budget out of the strategy's reach (none cannot spend more than gen_tokens passes) is flagged,
            # not silently spent lower; rows that stop at EOS spend less than the count rules predict
            "nfe_predicted": float(g["nfe_predicted"].mean()),
            "reached": bool(np.isclose(g["nfe_predicted"].to_numpy(dtype=float), budget).all()),
            "ppl": pm,
            "ppl_se": ps,
            "mauve": mm,
            "mauve_se": ms,
            "same_as": _same_as(g),
        }

    out = _group(sel, ["model", "source", "temperature", "nfe_budget", "strategy"], f)
    if out.empty:
        return out
    out["accounting"] = spec.generation.accounting
    base = out[out["strategy"] == spec.headline.baseline].set_index(
        ["model", "source", "temperature", "nfe_budget"]
    )["mauve"]
    out[f"delta_mauve_vs_{spec.headline.baseline}"] = [
        r.mauve - base.get((r.model, r.source, r.temperature, r.nfe_budget), float("nan"))
        for r in out.itertuples()
    ]
    return _int_cols(out, ["nfe_budget"])


def table_quality(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 5: every metric per (model, source, temperature, strategy, steps), means over seeds."""
    sw = sweep_cells(cells, spec)

    def f(g):
        pm, ps = _ms(g["ppl"])
        mm, ms = _ms(g["mauve"])
        return {
            "n_seeds": len(g),
            "nfe": float(g["nfe"].mean()),
            "ppl": pm,
            "ppl_se": ps,
            "mauve": mm,
            "mauve_se": ms,
            "self_bleu": float(g["self_bleu"].mean()),
            "distinct3": float(g["distinct3"].mean()),
            "acceptance": float(g["acceptance"].mean()),
            "same_as": _same_as(g),
        }

    out = _group(sw, ["model", "source", "temperature", "strategy", "steps"], f)
    if len(out):
        out["accounting"] = spec.generation.accounting
    return _int_cols(out, ["steps"])


def table_mauve_temperature(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 6: MAUVE mean +- SE over seeds per (model, source, strategy, steps, temperature)."""
    sw = sweep_cells(cells, spec)

    def f(g):
        m, s = _ms(g["mauve"])
        return {"n_seeds": len(g), "mauve": m, "mauve_se": s}

    return _int_cols(_group(sw, ["model", "source", "strategy", "steps", "temperature"], f), ["steps"])


def table_dose_response(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 9: the dose strategy at its steps and temperature across remask fractions, means over seeds."""
    d = spec.dose_response
    if not d.fractions:
        return pd.DataFrame(columns=["model", "source", "fraction"])
    sel = cells[
        (cells["strategy"] == d.strategy)
        & cells["steps"].notna()
        & _isin(cells["steps"].fillna(-1), [d.steps])
        & _isin(cells["temperature"], [d.temperature])
        & _isin(cells["fraction"], d.fractions)
        & _isin(cells["seed"], d.seeds)
    ]

    def f(g):
        mm, ms = _ms(g["mauve"])
        return {
            "strategy": d.strategy,
            "steps": d.steps,
            "temperature": d.temperature,
            "n_seeds": len(g),
            "mauve": mm,
            "mauve_se": ms,
            "ppl": float(g["ppl"].mean()),
            "distinct3": float(g["distinct3"].mean()),
            "remasks_per_sample": float(g["remasks"].mean()),
            "nfe": float(g["nfe"].mean()),
        }

    return _group(sel, ["model", "source", "fraction"], f)


def table_acceptance(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Tables 19/20: English-filter acceptance (%) per (model, source, strategy, steps, temperature)."""
    sw = sweep_cells(cells, spec)

    def f(g):
        acc = 100.0 * g["acceptance"]
        return {
            "n_seeds": len(g),
            "acceptance_pct": float(acc.mean()),
            "min_pct": float(acc.min()),
            "max_pct": float(acc.max()),
            "n_generated": int(g["n"].sum()),
            "n_accepted": int(g["n_accepted"].sum()),
        }

    return _int_cols(_group(sw, ["model", "source", "strategy", "steps", "temperature"], f), ["steps"])


def table_downstream(down: pd.DataFrame) -> pd.DataFrame:
    """Tables 11/18: accuracy (pass@1 / exact match) per configuration, mean +- SE over seeds, with the binomial SE
    of one seed's accuracy (sqrt(p (1 - p) / n)) beside it."""
    gen = down[~down["task"].isin(LOGLIK_TASKS)]

    def f(g):
        m, s = _ms(g["accuracy"])
        n = float(g["n"].mean())
        where = sorted({x for v in g["sandbox"].dropna() for x in str(v).split(",") if x})
        return {
            "sandbox": ",".join(where) or None,
            "n_seeds": len(g),
            "n_items": int(round(n)),
            "nfe": float(g["nfe"].mean()),
            "accuracy": m,
            "accuracy_se_seeds": s,
            "binomial_se": math.sqrt(m * (1 - m) / n) if n > 0 and math.isfinite(m) else np.nan,
        }

    out = _group(gen, ["model", "task", "strategy", "steps", "nfe_budget", "temperature"], f)
    return _int_cols(out, ["steps", "nfe_budget"])


def table_arc(down: pd.DataFrame) -> pd.DataFrame:
    """The log-likelihood checks (ARC-Challenge, HellaSwag, BBH): accuracy per model and task."""
    arc = down[down["task"].isin(LOGLIK_TASKS)]
    rows = []
    for (model, task), g in arc.groupby(["model", "task"], sort=True):
        n = float(g["n"].iloc[0])
        acc = float(g["accuracy"].iloc[0])
        rows.append(
            {
                "model": model,
                "task": task,
                "n_items": int(n),
                "accuracy": acc,
                "binomial_se": math.sqrt(acc * (1 - acc) / n) if n > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=["model", "task", "n_items", "accuracy", "binomial_se"])


def all_tables(cells: pd.DataFrame, down: pd.DataFrame, spec: CareSpec) -> dict[str, pd.DataFrame]:
    """Every table, in :data:`TABLE_ORDER`; tables with no rows are left out."""
    tables = {
        "nfe": table_nfe(cells, spec),
        "mechanism": table_mechanism(cells, spec),
        "compute_matched": table_compute_matched(cells, spec),
        "quality": table_quality(cells, spec),
        "mauve_temperature": table_mauve_temperature(cells, spec),
        "gap": table_gap(cells, spec),
        "anova": table_anova(cells, spec),
        "headline": table_headline(cells, spec),
        "dose_response": table_dose_response(cells, spec),
        "acceptance": table_acceptance(cells, spec),
        "downstream": table_downstream(down),
        "arc": table_arc(down),
        "leaderboard": table_leaderboard(cells, down, spec),
    }
    tables = {k: v for k, v in tables.items() if len(v)}
    if spec.published:
        tables["published"] = table_published(tables, spec)
    return tables


def table_published(tables: dict[str, pd.DataFrame], spec: CareSpec) -> pd.DataFrame:
    """The paper's value of every cell the spec carries one for, beside the measured one; a row that names no
    ``source`` is read from the spec's first source (the main tables' corpus), and the column ``data`` says
    where that corpus came from."""
    from dlmeval.protocols.published import compare, frame

    src = spec.generation.sources[0] if spec.generation.sources else None
    out = frame(compare(spec.published, tables, defaults={"source": src} if src else None))
    if src is not None:
        out["data"] = f"{src}: {spec.corpus(src).describe()}"
    return out


__all__ = [
    "ANOVA_FACTORS",
    "CELL_COLUMNS",
    "DOWN_COLUMNS",
    "TABLE_ORDER",
    "TITLES",
    "all_tables",
    "cells_frame",
    "down_frame",
    "sweep_cells",
    "table_acceptance",
    "table_anova",
    "table_arc",
    "table_compute_matched",
    "table_downstream",
    "table_dose_response",
    "table_gap",
    "table_headline",
    "table_mechanism",
    "table_leaderboard",
    "table_mauve_temperature",
    "table_nfe",
    "table_published",
    "table_quality",
]
