"""The headline and verdict of each `dlmeval demo` stage (#36): pure functions of the rows the protocols return,
so that what the demo says can be tested without running a model.

Each ``*_headline`` returns ``{"lines": [...], "verdict": str, ...numbers}``: the lines the demo prints (one headline
with its uncertainty, a verdict line, and, where the embedded models are too small to show the paper's finding, one
sentence naming the command that runs the paper's scale) and the numbers the demo's JSON output carries.
"""

from __future__ import annotations

# the rows the headline compares: DiffScore as the paper maps it, ROUGE-L F1 and BERTScore-F
META_HEADLINE = ("diffscore:mapped", "rougeL", "bertscore_f")
# the command that runs each pillar at the paper's scale (one sentence in the verdict when the embedded models
# are too small to show the paper's finding)
PAPER_COMMANDS = {
    "meta-eval": "dlmeval meta-eval --dlm llada:PATH --trust-remote-code",
    "care": "dlmeval care care-paper",
    "robust": "dlmeval robust robust-paper",
}


def longest_run(ids) -> int:
    """The longest run of one token id back to back (readable samples have none of 4 or more: #36)."""
    best = cur = 1 if len(ids) else 0
    for a, b in zip(ids, ids[1:]):
        cur = cur + 1 if a == b else 1
        best = max(best, cur)
    return best


def ci_text(value: float, lo: float, hi: float) -> str:
    """``0.25 [0.02, 0.45]``."""
    return f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def excludes_zero(lo: float, hi: float) -> bool:
    """Whether a CI lies wholly on one side of zero (NaN bounds: no)."""
    return bool(lo > 0 or hi < 0)


def correlation_verdict(
    label: str, value: float, lo: float, hi: float, best_baseline: tuple[str, float]
) -> str:
    """The meta-evaluation verdict: the sign DiffScore's CI supports, and how it stands against the best baseline
    on the same items (the paper: DiffScore correlates positively, and better than ROUGE / BERTScore)."""
    name, b = best_baseline
    if lo > 0:
        sign = "positive (its 95% CI excludes zero)"
    elif hi < 0:
        sign = "negative (its 95% CI excludes zero: the opposite of the paper's sign)"
    else:
        sign = "not distinguishable from zero (its 95% CI includes zero)"
    rel = "above" if value > b else "below"
    return f"{label}'s correlation with the human judgments is {sign}, and {rel} {name} ({b:+.3f}) on the same items"


def meta_headline(results) -> dict:
    """The stage's headline from the suite's result rows: per headline metric its Spearman correlation and CI on
    the benchmark's first dimension, the other dimensions in brief, and the verdict line."""
    import math

    res = results[results["primary"] & results["value"].notna()] if len(results) else results
    if not len(res):
        return {"lines": ["  no correlations: the benchmark gave no rows"], "verdict": "no result"}
    benchmark = str(res["benchmark"].iloc[0])
    dims = list(dict.fromkeys(res["dimension"]))
    dim = dims[0]
    rows = {r["metric"]: r for _, r in res[res["dimension"] == dim].iterrows()}
    n = int(next(iter(rows.values()))["n"])
    proto = next(iter(rows.values()))["protocol"]
    lines = [
        f"  {benchmark} {dim}, {n} outputs: {proto} correlation with the human scores [95% bootstrap CI]"
    ]
    got = {}
    for metric in META_HEADLINE:
        r = rows.get(metric)
        if r is None:
            continue
        got[metric] = (r["label"], float(r["value"]), float(r["ci_lo"]), float(r["ci_hi"]))
        lines.append(f"    {r['label'][:60]:<60} {ci_text(*got[metric][1:])}")
    others = [d for d in dims[1:]]
    if "diffscore:mapped" in got and others:
        brief = []
        for d in others:
            sub = res[(res["dimension"] == d) & (res["metric"].isin(META_HEADLINE))].set_index("metric")[
                "value"
            ]
            brief.append(
                f"{d} " + " / ".join(f"{float(sub[m]):+.2f}" for m in META_HEADLINE if m in sub.index)
            )
        lines.append(f"    other dimensions (same order): {'; '.join(brief)}")
    out: dict = {"benchmark": benchmark, "dimension": dim, "n": n}
    if "diffscore:mapped" not in got:
        out["verdict"] = "DiffScore gave no correlation on these items"
        lines.append(f"  verdict: {out['verdict']}")
        out["lines"] = lines
        return out
    label, v, lo, hi = got["diffscore:mapped"]
    base = [(lab.split(" [")[0], val) for m, (lab, val, _, _) in got.items() if m != "diffscore:mapped"]
    best = max(base, key=lambda t: t[1]) if base else ("no baseline", math.nan)
    out.update(diffscore=v, ci_lo=lo, ci_hi=hi, ci_excludes_zero=excludes_zero(lo, hi))
    out["verdict"] = correlation_verdict("DiffScore", v, lo, hi, best)
    lines.append(f"  verdict: {out['verdict']}.")
    if not (lo > 0 and v > best[1]):
        lines.append(
            "  The embedded 22M-parameter model is too small to show the paper's finding (DiffScore above the "
            f"baselines, with 7-8B diffusion models): `{PAPER_COMMANDS['meta-eval']}` runs it at the paper's scale."
        )
    out["lines"] = lines
    return out


def _cells(items):
    """The cell records of a Care model run (one per strategy x budget x temperature x seed)."""
    if items is None or "key" not in items.columns:
        return None
    c = items[items["key"].astype(str).str.startswith("cell/")]
    need = {"strategy", "seed", "mauve", "nfe"}
    return c if len(c) and need <= set(c.columns) else None


def care_headline(items, spec, matched_table=None) -> dict:
    """MAUVE of the headline pair at the spec's nominal steps (the sweep: the strategy spends more passes) and at
    an equal actual-NFE budget (``[compute_matched]``: each strategy's cell at the nominal steps that spend the
    budget, as the protocol's ``compute_matched`` table resolved them; a cell provably the same as a sweep cell is
    stored once, under its nominal steps), each a paired t-test over the seeds; and the verdict on Care's
    reversal."""
    import numpy as np
    import pandas as pd

    from dlmeval.stats import paired_ttest

    h = spec.headline
    lines: list[str] = []
    out: dict = {"baseline": h.baseline, "strategy": h.strategy}
    cells = _cells(items)
    budgets = list(spec.compute_matched.nfe)
    if cells is None or not budgets:
        out["verdict"] = "no compute-matched cells"
        return {**out, "lines": [f"  verdict: {out['verdict']}"]}
    budget = budgets[0]
    temp, temp_m = spec.headline_temperature, spec.compute_matched.temperatures[0]
    src = spec.generation.sources[0] if spec.generation.sources else None

    def sel(temperature: float, *, steps: float | None = None, nfe: float | None = None):
        """Sweep cells (the sweep's remask fraction: dose-response cells left out) at ``steps`` nominal steps,
        or compute-matched cells at ``nfe`` actual passes."""
        c = cells[np.isclose(cells["temperature"].astype(float), temperature)]
        if src is not None and "source" in c.columns:
            c = c[c["source"].isna() | (c["source"] == src)]
        if "fraction" in c.columns:
            f = c["fraction"].astype(float)
            c = c[f.isna() | np.isclose(f.fillna(-1), spec.sweep.remask_fraction)]
        budget_col = c["nfe_budget"].astype(float) if "nfe_budget" in c.columns else c["seed"] * np.nan
        if nfe is None:
            return c[budget_col.isna() & np.isclose(c["steps"].astype(float).fillna(-1), steps)]
        return c[np.isclose(budget_col.fillna(-1), nfe)]

    def at_budget(strategy: str):
        """The strategy's cells that spend the budget: stored under the budget, or under the nominal steps the
        compute_matched table resolved it to."""
        got = [sel(temp_m, nfe=budget)]
        if matched_table is not None and len(matched_table):
            m = matched_table[
                (matched_table["strategy"] == strategy)
                & np.isclose(matched_table["nfe_budget"].astype(float), budget)
                & np.isclose(matched_table["temperature"].astype(float), temp_m)
            ]
            if len(m):
                got.append(sel(temp_m, steps=float(m["steps"].iloc[0])))
        elif strategy == h.baseline:
            got.append(sel(temp_m, steps=budget))  # the baseline decodes one token per pass
        c = pd.concat(got)
        return c[c["strategy"] == strategy]

    nominal = sel(temp, steps=spec.headline_steps)
    base_matched, strat_matched = at_budget(h.baseline), at_budget(h.strategy)

    def pair(a_rows, b_rows):
        a = a_rows[a_rows["strategy"] == h.baseline].drop_duplicates("seed").set_index("seed")
        b = b_rows[b_rows["strategy"] == h.strategy].drop_duplicates("seed").set_index("seed")
        seeds = sorted(set(a.index) & set(b.index))
        return a.loc[seeds], b.loc[seeds], seeds

    def compare(name, a, b, seeds) -> dict | None:
        if len(seeds) < 2:
            return None
        t = paired_ttest(b["mauve"].to_numpy(float), a["mauve"].to_numpy(float))
        row = {
            "mauve_baseline": float(a["mauve"].mean()),
            "mauve_strategy": float(b["mauve"].mean()),
            "nfe_baseline": float(a["nfe"].mean()),
            "nfe_strategy": float(b["nfe"].mean()),
            "diff": t.mean_diff,
            "p": t.p,
            "n_seeds": len(seeds),
        }
        lines.append(
            f"  {name}: MAUVE {h.baseline} {row['mauve_baseline']:.3f} ({row['nfe_baseline']:.1f} passes) vs "
            f"{h.strategy} {row['mauve_strategy']:.3f} ({row['nfe_strategy']:.1f} passes); "
            f"{h.strategy} - {h.baseline} = {row['diff']:+.3f} +- {t.se:.3f}, paired t-test over "
            f"{len(seeds)} seeds p = {row['p']:.3g}"
        )
        return row

    n_prompts = spec.generation.n_prompts
    lines.append(f"  {n_prompts} prompts per cell, seeds paired, unmask temperature {temp}:")
    nom = compare(f"at {spec.headline_steps} nominal steps", *pair(nominal, nominal))
    mat = compare(f"at {budget} actual passes (compute-matched)", *pair(base_matched, strat_matched))
    out.update(nominal=nom, matched=mat, alpha=0.05)
    if nom is None or mat is None:
        out["verdict"] = "too few seeds for a paired test"
    else:
        sig_n, sig_m = nom["p"] < 0.05, mat["p"] < 0.05
        better_n, worse_m = nom["diff"] > 0, mat["diff"] < 0
        if sig_n and sig_m and better_n and worse_m:
            out["verdict"] = (
                f"the compute-matched reversal is shown: {h.strategy} beats {h.baseline} at equal nominal steps "
                f"and loses to it at equal actual passes (both p < 0.05)"
            )
        elif sig_m:
            out["verdict"] = (
                f"at equal actual passes {h.strategy} is {'worse' if worse_m else 'better'} than {h.baseline} "
                f"(p = {mat['p']:.3g}); at equal nominal steps the difference is "
                f"{'significant' if sig_n else 'not significant'} (p = {nom['p']:.3g})"
            )
        else:
            out["verdict"] = (
                f"no significant difference at equal actual passes (p = {mat['p']:.3g}) nor at equal nominal "
                f"steps (p = {nom['p']:.3g}): no reversal can be claimed"
            )
    lines.append(f"  verdict: {out['verdict']}.")
    if out["verdict"].startswith("the compute-matched reversal") is False:
        lines.append(
            f"  {n_prompts} generations per cell from a 22M-parameter model are too few to show the paper's "
            f"effect: `{PAPER_COMMANDS['care']}` runs it at the paper's scale."
        )
    out["lines"] = lines
    return out


def robust_headline(tables: dict) -> dict:
    """Clean accuracy against chance per model, mean RDI, and the DLM's mean RDI advantage with its CI and the
    Wilcoxon test, on the spec's first task and mode; and the verdict."""
    lines: list[str] = []
    guard, summ, comp = (tables.get(k) for k in ("guard", "summary", "comparison"))
    if summ is None or not len(summ):
        return {"lines": ["  verdict: no robustness summary"], "verdict": "no robustness summary"}
    first = summ.iloc[0]
    task, mode = first["task"], first["mode"]
    out: dict = {"task": task, "mode": mode}
    for _, r in summ[(summ["task"] == task) & (summ["mode"] == mode)].iterrows():
        g = None
        if guard is not None and len(guard):
            gm = guard[(guard["task"] == task) & (guard["mode"] == mode) & (guard["model"] == r["model"])]
            g = gm.iloc[0] if len(gm) else None
        chance = (
            f" (chance {g['chance']:.2f}, binomial p = {g['p_value']:.2g}, n = {int(g['n'])})"
            if g is not None
            else ""
        )
        lines.append(
            f"  {task} ({mode}) {r['role'].upper()} {r['model']}: clean accuracy {r['acc_clean']:.3f}{chance}; "
            f"perturbed {r['acc_r']:.3f}; mean RDI {r['mean_rdi']:.3f}"
        )
        out[f"acc_clean_{r['role']}"] = float(r["acc_clean"])
        out[f"mean_rdi_{r['role']}"] = float(r["mean_rdi"])
        out[f"above_chance_{r['role']}"] = bool(r["above_chance"])
    c = None
    if comp is not None and len(comp):
        cm = comp[(comp["task"] == task) & (comp["mode"] == mode)]
        c = cm.iloc[0] if len(cm) else None
    if c is not None and bool(c.get("meaningful", False)):
        lines.append(
            f"  DLM - AR mean RDI advantage over {int(c['n_conditions'])} conditions "
            f"{ci_text(c['mean_adv'], c['ci_lo'], c['ci_hi'])}, Wilcoxon p = {c['wilcoxon_p']:.3g}"
        )
        out.update(
            mean_adv=float(c["mean_adv"]),
            ci_lo=float(c["ci_lo"]),
            ci_hi=float(c["ci_hi"]),
            wilcoxon_p=float(c["wilcoxon_p"]),
        )
        side = "less" if c["ci_lo"] > 0 else "more"
        if excludes_zero(c["ci_lo"], c["ci_hi"]) and c["wilcoxon_p"] < 0.05:
            out["verdict"] = (
                f"the diffusion LM degrades {side} than the AR model under noise (the CI excludes zero and the "
                f"Wilcoxon test agrees, p = {c['wilcoxon_p']:.3g})"
            )
        elif excludes_zero(c["ci_lo"], c["ci_hi"]):
            out["verdict"] = (
                f"weak evidence that the diffusion LM degrades {side} than the AR model: the bootstrap CI excludes "
                f"zero, the Wilcoxon test over {int(c['n_conditions'])} conditions does not (p = {c['wilcoxon_p']:.3g})"
            )
        else:
            out["verdict"] = "no robustness difference between the two models (the CI includes zero)"
    else:
        why = c["note"] if c is not None and c.get("note") else "no comparison"
        out["verdict"] = f"RDI is not meaningful here: {why}"
    lines.append(f"  verdict: {out['verdict']}.")
    if not out["verdict"].startswith("the diffusion LM degrades less"):  # the paper's finding, shown
        lines.append(
            "  The embedded models are too small to show the paper's finding (7-8B diffusion LMs more robust than "
            f"their AR peers): `{PAPER_COMMANDS['robust']}` runs it at the paper's scale."
        )
    out["lines"] = lines
    return out
