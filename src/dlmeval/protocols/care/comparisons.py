"""The Care tables that compare the baseline with the strategy: the seed-paired gap (Table 7), the ANOVA
(Table 8), the headline gap with its bootstrap CI (Section 4.4) and the leaderboard (Tables 12/21). Pure functions
of the cell records, like :mod:`.tables` (which lists them all)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.care.frames import _group, _int_cols, _isin, sweep_cells
from dlmeval.protocols.care.spec import CareSpec
from dlmeval.seeding import derive_seed
from dlmeval.stats import anova, paired_bootstrap_ci, paired_ttest


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
    r = paired_ttest(a, b, alternative="two-sided")  # Care's paired t-test is two-sided
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


def _headline_cells(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """The sweep cells at the headline configuration (headline steps and temperature)."""
    sw = sweep_cells(cells, spec)
    return sw[
        _isin(sw["steps"], [spec.headline_steps]) & _isin(sw["temperature"], [spec.headline_temperature])
    ]


def table_headline(cells: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """The headline gap at (headline steps, headline temperature): paired t-test and a percentile bootstrap CI
    (``bootstrap_resamples`` resamples of the seed pairs, seeded from the run seed, model and source)."""
    h = spec.headline
    steps, temp = spec.headline_steps, spec.headline_temperature
    sel = _headline_cells(cells, spec)
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


def _longest(down: pd.DataFrame, task: str) -> str:
    """The task's rows to report: ``task`` itself, or of its lengths (``humaneval@128``, ``humaneval@512``) the
    longest (where Table 11's compute-matched ``none*`` at NFE 437 is reachable)."""
    names = [t for t in dict.fromkeys(down["task"]) if t == task or str(t).startswith(task + "@")]
    if task in names or not names:
        return task
    return max(names, key=lambda t: int(str(t).rsplit("@", 1)[1]))


def table_leaderboard(cells: pd.DataFrame, down: pd.DataFrame, spec: CareSpec) -> pd.DataFrame:
    """Tables 12/21: per model and source, PPL and MAUVE of the baseline and the strategy at the headline
    configuration (means over seeds), the interaction gap with its paired SE and p, and the downstream scores:
    HumanEval pass@1 / GSM8K of the baseline at its lowest temperature and largest compute-matched NFE budget
    (Table 12's HE column is Table 11's compute-matched ``none*`` at NFE 437), else its largest nominal step
    count, with the cell named in ``<task>_cell``; ARC."""
    h = spec.headline
    steps, temp = spec.headline_steps, spec.headline_temperature
    sel = _headline_cells(cells, spec)
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
            d = down[
                (down["model"] == model)
                & (down["task"] == _longest(down, task))
                & (down["strategy"] == h.baseline)
            ]
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
            if task == "humaneval" and "sandbox" in d:  # where its code ran (``+unsafe``: the plain launcher)
                labels = sorted({x for v in d["sandbox"].dropna() for x in str(v).split(",") if x})
                row["humaneval_sandbox"] = ",".join(labels) or None
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


__all__ = ["ANOVA_FACTORS", "table_anova", "table_gap", "table_headline", "table_leaderboard"]
