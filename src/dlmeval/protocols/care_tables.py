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
arc                ARC-Challenge log-likelihood accuracy (sampling-invariant) Section 4.6
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
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.care_spec import CareSpec
from dlmeval.seeding import derive_seed
from dlmeval.stats import anova, mean_se, paired_bootstrap_ci, paired_ttest

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
)
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
    "arc": "ARC-Challenge log-likelihood accuracy: sampling-invariant sanity check",
    "leaderboard": "Care leaderboard: interaction gap per model (Tables 12/21)",
}


# ------------------------------------------------------------------------------------------------ helpers
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
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
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


def _paired(sw: pd.DataFrame, baseline: str, strategy: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    a = sw[sw["strategy"] == baseline].set_index("seed")["mauve"].dropna()
    b = sw[sw["strategy"] == strategy].set_index("seed")["mauve"].dropna()
    seeds = sorted(set(a.index) & set(b.index))
    return a.loc[seeds].to_numpy(float), b.loc[seeds].to_numpy(float), [int(s) for s in seeds]


def _gap_stats(a: np.ndarray, b: np.ndarray) -> dict:
    n = len(a)
    if n == 0:
        return {"n_seeds": 0, "gap": np.nan, "gap_se": np.nan, "t": np.nan, "df": np.nan, "p": np.nan}
    if n == 1:
        return {
            "n_seeds": 1,
            "gap": float(a[0] - b[0]),
            "gap_se": np.nan,
            "t": np.nan,
            "df": np.nan,
            "p": np.nan,
        }
    r = paired_ttest(a, b)
    return {"n_seeds": n, "gap": r.mean_diff, "gap_se": r.se, "t": r.t, "df": float(r.df), "p": r.p}


def table_gap(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 7: MAUVE(baseline) - MAUVE(strategy) per (model, source, steps, temperature), paired by seed."""
    sw = sweep_cells(cells, spec)
    h = spec.headline

    def f(g):
        a, b, _ = _paired(g, h.baseline, h.strategy)
        return {"baseline": h.baseline, "strategy": h.strategy, **_gap_stats(a, b)}

    return _int_cols(_group(sw, ["model", "source", "steps", "temperature"], f), ["steps"])


ANOVA_FACTORS = ("temperature", "strategy", "steps")


def table_anova(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Table 8: ANOVA of MAUVE on temperature x strategy x steps (all interactions; Type II sums of squares;
    statsmodels) over the seed-level cells of the headline pair, per (model, source).

    A factor with one level in the sweep is left out (noted); without replicates (one seed) the full factorial
    leaves no residual, so main effects only are fitted (noted).
    """
    sw = sweep_cells(cells, spec)
    sw = sw[sw["strategy"].isin([spec.headline.baseline, spec.headline.strategy]) & sw["mauve"].notna()]
    rows = []
    for (model, source), g in sw.groupby(["model", "source"], sort=True):
        factors = [f for f in ANOVA_FACTORS if g[f].nunique() > 1]
        notes = [f"{f} has one level" for f in ANOVA_FACTORS if f not in factors]
        if not factors:
            continue
        try:
            tab = anova(g, "mauve", factors, interactions=True)
        except InputError as e:
            if "residual degrees of freedom" not in str(e):
                raise
            notes.append("no replicates per cell: main effects only")
            try:
                tab = anova(g, "mauve", factors, interactions=False)
            except InputError:
                continue
        note = "; ".join(notes)
        for term, r in tab.iterrows():
            rows.append(
                {
                    "model": model,
                    "source": source,
                    "factor": str(term).replace(":", " x "),
                    "df": float(r["df"]),
                    "sum_sq": float(r["sum_sq"]),
                    "F": float(r["F"]),
                    "p": float(r["PR(>F)"]),
                    "partial_eta_sq": float(r["partial_eta_sq"]),
                    "n_cells": len(g),
                    "note": note,
                }
            )
    cols = ["model", "source", "factor", "df", "sum_sq", "F", "p", "partial_eta_sq", "n_cells", "note"]
    return pd.DataFrame(rows, columns=cols)


def table_headline(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """The headline gap at (headline steps, headline temperature): paired t-test and a percentile bootstrap CI
    (``bootstrap_resamples`` resamples of the seed pairs, seeded from the run seed, model and source)."""
    sw = sweep_cells(cells, spec)
    h = spec.headline
    steps, temp = spec.headline_steps, spec.headline_temperature
    sel = sw[_isin(sw["steps"], [steps]) & _isin(sw["temperature"], [temp])]
    rows = []
    for (model, source), g in sel.groupby(["model", "source"], sort=True):
        a, b, seeds = _paired(g, h.baseline, h.strategy)
        row = {
            "model": model,
            "source": source,
            "steps": steps,
            "temperature": temp,
            "baseline": h.baseline,
            "strategy": h.strategy,
            "mauve_baseline": float(np.mean(a)) if len(a) else np.nan,
            "mauve_strategy": float(np.mean(b)) if len(b) else np.nan,
            **_gap_stats(a, b),
            "ci_lo": np.nan,
            "ci_hi": np.nan,
            "confidence": h.confidence,
            "n_resamples": h.bootstrap_resamples,
            "bootstrap_seed": derive_seed(spec.seed, "care-bootstrap", model, source),
            "seeds": ",".join(map(str, seeds)),
        }
        if len(a) >= 2:
            with warnings.catch_warnings():
                # scipy warns when all resampled statistics are equal (identical gaps): the CI is that value
                warnings.simplefilter("ignore", RuntimeWarning)
                ci = paired_bootstrap_ci(
                    a,
                    b,
                    n_resamples=h.bootstrap_resamples,
                    confidence=h.confidence,
                    seed=row["bootstrap_seed"],
                )
            row["ci_lo"], row["ci_hi"] = (ci.lo, ci.hi) if math.isfinite(ci.lo) else (row["gap"], row["gap"])
        rows.append(row)
    cols = [
        "model", "source", "steps", "temperature", "baseline", "strategy", "mauve_baseline", "mauve_strategy",
        "n_seeds", "gap", "gap_se", "t", "df", "p", "ci_lo", "ci_hi", "confidence", "n_resamples",
        "bootstrap_seed", "seeds",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


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
    gen = down[down["task"] != "arc"]

    def f(g):
        m, s = _ms(g["accuracy"])
        n = float(g["n"].mean())
        return {
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
    arc = down[down["task"] == "arc"]
    rows = []
    for model, g in arc.groupby("model", sort=True):
        n = float(g["n"].iloc[0])
        acc = float(g["accuracy"].iloc[0])
        rows.append(
            {
                "model": model,
                "n_items": int(n),
                "accuracy": acc,
                "binomial_se": math.sqrt(acc * (1 - acc) / n) if n > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=["model", "n_items", "accuracy", "binomial_se"])


def table_leaderboard(cells: pd.DataFrame, down: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Tables 12/21: per model and source, PPL and MAUVE of the baseline and the strategy at the headline
    configuration (means over seeds), the interaction gap with its paired SE and p, and the downstream scores:
    HumanEval pass@1 / GSM8K of the baseline at its lowest temperature and largest compute-matched NFE budget
    (Table 12's HE column is Table 11's compute-matched ``none*`` at NFE 437), else its largest nominal step
    count, with the cell named in ``<task>_cell``; ARC."""
    sw = sweep_cells(cells, spec)
    h = spec.headline
    steps, temp = spec.headline_steps, spec.headline_temperature
    sel = sw[_isin(sw["steps"], [steps]) & _isin(sw["temperature"], [temp])]
    rows = []
    for (model, source), g in sel.groupby(["model", "source"], sort=False):
        a, b, _ = _paired(g, h.baseline, h.strategy)
        gs = _gap_stats(a, b)
        base, strat = g[g["strategy"] == h.baseline], g[g["strategy"] == h.strategy]
        row = {
            "model": model,
            "source": source,
            "steps": steps,
            "temperature": temp,
            f"ppl_{h.baseline}": float(base["ppl"].mean()),
            f"mauve_{h.baseline}": float(base["mauve"].mean()),
            f"ppl_{h.strategy}": float(strat["ppl"].mean()),
            f"mauve_{h.strategy}": float(strat["mauve"].mean()),
            "gap": float(base["mauve"].mean() - strat["mauve"].mean()),
            "gap_se": gs["gap_se"],
            "p": gs["p"],
            "n_seeds": gs["n_seeds"],
        }
        for task, col in (("humaneval", "humaneval_pass1"), ("gsm8k", "gsm8k_em")):
            d = down[(down["model"] == model) & (down["task"] == task) & (down["strategy"] == h.baseline)]
            row[col], row[f"{task}_cell"] = np.nan, None
            if not len(d):
                continue
            d = d[_isin(d["temperature"], [d["temperature"].min()])]
            matched = d[d["nfe_budget"].notna()]
            if len(matched):
                d = matched[_isin(matched["nfe_budget"], [matched["nfe_budget"].max()])]
                where = f"nfe{int(d['nfe_budget'].iloc[0])}"
            else:
                d = d[_isin(d["steps"], [d["steps"].max()])]
                where = f"s{int(d['steps'].iloc[0])}"
            row[col] = float(d["accuracy"].mean())
            row[f"{task}_cell"] = f"{h.baseline}@{where} t={float(d['temperature'].iloc[0]):g}"
        arc = down[(down["model"] == model) & (down["task"] == "arc")]
        row["arc_acc"] = float(arc["accuracy"].iloc[0]) if len(arc) else np.nan
        rows.append(row)
    order = {m: i for i, m in enumerate(spec.models)}
    out = pd.DataFrame(rows)
    if not out.empty:
        out = out.sort_values(
            ["model", "source"], key=lambda s: s.map(order).fillna(len(order)) if s.name == "model" else s
        ).reset_index(drop=True)
    return out


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
    return {k: v for k, v in tables.items() if len(v)}


__all__ = [
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
    "table_quality",
]
