"""The tables, as pure functions of the stored per-item records (so a resumed run prints exactly the tables an
uninterrupted one would): ``accuracy``, ``summary`` (Table 1), ``aurdi`` (Table 9), ``comparison`` (App. H,
Table 11), ``calibration`` / ``calibration_ablation`` (Fig. 5, App. I / Table 13) / ``reliability`` (Fig. 4),
``guard``, ``recipe`` (Table 6 as run), and the probes' tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.robust.spec import RobustSpec
from dlmeval.seeding import derive_seed


def _frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    cols = ["task", "mode", "model", "role", "condition", "type", "rate", "seed", "item_id", "correct"]
    df = pd.DataFrame([{k: r.get(k) for k in cols} for r in records], columns=cols)
    df["confidence"] = [r.get("confidence") or {} for r in records]
    return df


def _chance(task: str) -> float:
    from dlmeval.tasks import get_task

    return float(get_task(task).chance)


def _summaries(df: pd.DataFrame, spec: RobustSpec) -> dict[tuple[str, str, str], Any]:
    """(task, mode, model) -> RobustnessSummary over the spec's conditions."""
    from dlmeval.robustness.metrics import summarize

    out = {}
    for (task, mode, model), g in df.groupby(["task", "mode", "model"], sort=False):
        clean = g.loc[g["condition"] == "clean", "correct"].astype(bool).tolist()
        pert = {
            c: gc_["correct"].astype(bool).tolist()
            for c, gc_ in g[g["condition"] != "clean"].groupby("condition", sort=False)
        }
        out[(task, mode, model)] = summarize(
            clean, pert, chance=_chance(task), alpha=spec.stats.alpha, aurdi_rule=spec.stats.aurdi_rule
        )
    return out


def table_accuracy(records: Sequence[Mapping[str, Any]], spec: RobustSpec) -> pd.DataFrame:
    """Accuracy per (task, mode, model, condition), seeds pooled, with RDI (NaN when the model is not above
    chance on clean input: see ``meaningful``)."""
    df = _frame(records)
    sums = _summaries(df, spec)
    rows = []
    for (task, mode, model), s in sums.items():
        role = df.loc[(df["task"] == task) & (df["mode"] == mode) & (df["model"] == model), "role"].iloc[0]
        base = {"task": task, "mode": mode, "model": model, "role": role}
        rows.append(
            {
                **base,
                "condition": "clean",
                "type": "clean",
                "rate": 0.0,
                "n": s.clean_n,
                "accuracy": s.clean_accuracy,
                "rdi": 0.0 if s.meaningful else float("nan"),
                "meaningful": s.meaningful,
            }
        )
        for c in s.conditions:
            rows.append(
                {
                    **base,
                    "condition": c.key,
                    "type": c.type_key,
                    "rate": c.rate,
                    "n": c.n,
                    "accuracy": c.accuracy,
                    "rdi": c.rdi if s.meaningful else float("nan"),
                    "meaningful": s.meaningful,
                }
            )
    return pd.DataFrame(rows)


def all_tables(
    records: Sequence[Mapping[str, Any]],
    spec: RobustSpec,
    pair_labels: Mapping[str, tuple[str, str]],
    extras: Mapping[str, list[dict]] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table from the per-item records (module docstring)."""
    from dlmeval.robustness.metrics import compare

    df = _frame(records)
    sums = _summaries(df, spec)
    roles = {m: r for m, r in zip(df["model"], df["role"])}
    pair_of = {}
    for pname, (d, a) in pair_labels.items():
        pair_of.setdefault(d, pname)
        pair_of.setdefault(a, pname)
    tables: dict[str, pd.DataFrame] = {}
    tables["accuracy"] = table_accuracy(records, spec)

    # guard
    guard = []
    for (task, mode, model), s in sums.items():
        g = s.guard
        guard.append(
            {
                "task": task,
                "mode": mode,
                "model": model,
                "role": roles[model],
                "clean_correct": g.correct,
                "n": g.n,
                "clean_accuracy": s.clean_accuracy,
                "chance": g.chance,
                "p_value": g.p_value,
                "above_chance": g.above_chance,
                "note": "" if g.above_chance else f"{model} on {task}/{mode}: {g.warning}",
            }
        )
    tables["guard"] = pd.DataFrame(guard)

    # comparisons (App. H) and the summary (Table 1)
    comp, summ = [], []
    for pname, (dl, ar) in pair_labels.items():
        for t in spec.tasks:
            for mode in t.modes:
                sd, sa = sums.get((t.name, mode, dl)), sums.get((t.name, mode, ar))
                if sd is None or sa is None:
                    continue
                row: dict[str, Any] = {"task": t.name, "mode": mode, "pair": pname, "dlm": dl, "ar": ar}
                adv_rate = float("nan")
                if spec.conditions:
                    try:
                        c = compare(
                            sd,
                            sa,
                            seed=derive_seed(spec.seed, "robust-compare", t.name, mode, pname),
                            n_resamples=spec.stats.bootstrap_resamples,
                            confidence=spec.stats.confidence,
                        )
                    except InputError as e:
                        nan = float("nan")  # the same columns as a computed comparison, blank
                        row.update(n_conditions=len(spec.conditions), wins=nan, ties=nan, losses=nan,
                                   adv_rate=nan, mean_adv=nan, ci_lo=nan, ci_hi=nan, wilcoxon_p=nan,
                                   meaningful=False, note=str(e))  # fmt: skip
                        comp.append(row)
                        c = None
                    if c is not None:
                        ok = c.meaningful
                        blank = (lambda v: v) if ok else (lambda v: float("nan"))
                        row.update(
                            n_conditions=len(c.keys),
                            wins=c.wins,
                            ties=c.ties,
                            losses=c.losses,
                            adv_rate=blank(c.advantage_rate),
                            mean_adv=blank(c.mean_advantage),
                            ci_lo=blank(c.ci[0]),
                            ci_hi=blank(c.ci[1]),
                            wilcoxon_p=blank(c.wilcoxon_p),
                            meaningful=ok,
                            note=""
                            if ok
                            else "not meaningful: "
                            + " and ".join(m for m, s in ((dl, sd), (ar, sa)) if not s.meaningful)
                            + " not above chance on clean input",
                        )
                        comp.append(row)
                        adv_rate = row["adv_rate"]
                for model, s, role in ((dl, sd, "dlm"), (ar, sa, "ar")):
                    summ.append(
                        {
                            "task": t.name,
                            "mode": mode,
                            "pair": pname,
                            "model": model,
                            "role": role,
                            "acc_clean": s.clean_accuracy,
                            "acc_r": s.mean_accuracy,
                            "mean_rdi": s.mean_rdi if s.meaningful else float("nan"),
                            "adv_rate": adv_rate if role == "dlm" else float("nan"),
                            "above_chance": s.meaningful,
                        }
                    )
    tables["summary"] = pd.DataFrame(summ)
    tables["comparison"] = pd.DataFrame(comp)

    # AURDI per type (Table 9)
    au = []
    for (task, mode, model), s in sums.items():
        for typ, v in s.aurdi.items():
            au.append(
                {
                    "task": task,
                    "mode": mode,
                    "model": model,
                    "role": roles[model],
                    "type": typ,
                    "aurdi": v if s.meaningful else float("nan"),
                    "meaningful": s.meaningful,
                }
            )
    tables["aurdi"] = pd.DataFrame(au)

    cal, abl, rel = calibration_tables(df, spec)
    tables["calibration"], tables["calibration_ablation"], tables["reliability"] = cal, abl, rel
    tables["calibration_ablation_mean"] = ablation_mean(abl)
    for name, rows in (extras or {}).items():
        if rows:
            tables[name] = pd.DataFrame(rows)
    tables["recipe"] = recipe_table(spec)
    if spec.published:
        from dlmeval.protocols.published import compare, frame

        tables["published"] = frame(compare(spec.published, tables))
    from dlmeval.protocols.robust.output import TABLE_ORDER

    return {k: tables[k] for k in [*TABLE_ORDER, *tables] if k in tables}


def _primary_key(role: str, mode: str) -> str:
    from dlmeval.robustness.calibration import PRIMARY, confidence_key

    return "choice/softmax" if mode == "likelihood" else confidence_key(*PRIMARY[role])


def calibration_tables(df: pd.DataFrame, spec: RobustSpec) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(calibration, calibration_ablation, reliability) from the per-item frame."""
    from dlmeval.robustness.calibration import AGGREGATIONS, BASES, calibration, confidence_key

    nb = spec.calibration.n_bins
    cal, abl, rel = [], [], []
    for (task, mode, model), g in df.groupby(["task", "mode", "model"], sort=False):
        role = g["role"].iloc[0]
        key = _primary_key(role, mode)
        splits = [("clean", g[g["condition"] == "clean"]), ("noisy", g[g["condition"] != "clean"])]
        splits += [(c, gc_) for c, gc_ in g[g["condition"] != "clean"].groupby("condition", sort=False)]
        base = {"task": task, "mode": mode, "model": model, "role": role}
        for split, gs in splits:
            if gs.empty:
                continue
            conf = [d.get(key, float("nan")) for d in gs["confidence"]]
            row = calibration(conf, gs["correct"].astype(bool).tolist(), n_bins=nb)
            cal.append({**base, "split": split, "confidence_def": key, **row.as_dict()})
            if split in ("clean", "noisy") and row.bins is not None:
                b = row.bins
                for i in range(len(b.count)):
                    rel.append(
                        {
                            **base,
                            "split": split,
                            "bin": i,
                            "lower": float(b.lower[i]),
                            "upper": float(b.upper[i]),
                            "confidence": float(b.confidence[i]),
                            "accuracy": float(b.accuracy[i]),
                            "count": int(b.count[i]),
                        }
                    )
        if mode != "generation":
            continue
        for split, gs in splits[:2]:
            if gs.empty:
                continue
            for basis in BASES:
                for agg in AGGREGATIONS:
                    k = confidence_key(basis, agg)
                    conf = [d.get(k, float("nan")) for d in gs["confidence"]]
                    row = calibration(conf, gs["correct"].astype(bool).tolist(), n_bins=nb)
                    abl.append({**base, "split": split, "basis": basis, "aggregation": agg, **row.as_dict()})
    return pd.DataFrame(cal), pd.DataFrame(abl), pd.DataFrame(rel)


def recipe_table(spec: RobustSpec) -> pd.DataFrame:
    """The decoding recipe each model of each pair runs per task (the paper's Table 6 as this spec runs it): a
    pure function of the spec. ``applied`` says whether the sampler expresses every setting (top-p, EOS ranked
    last); where it does not, the run warns and its records are keyed as made without it."""
    from dlmeval.protocols.robust.keys import applied_sampler_fields

    can = applied_sampler_fields()
    rows = []
    for p in spec.pairs:
        s = spec.sampler_for(p)
        for t in spec.tasks:
            gen, steps = t.budget(s.steps)
            missing = [k for k, need in (("top_p", s.top_p < 1.0), ("eos_rank_last", s.eos_mode == "rank_last"))
                       if need and not can[k]]  # fmt: skip
            rows.append({
                "pair": p.name, "role": "dlm", "model": p.dlm, "task": t.name, "max_new_tokens": gen,
                "steps": steps, "block_length": s.block_length or gen, "strategy": s.strategy,
                "temperature": s.temperature, "top_p": s.top_p, "position_temperature": s.position_temperature,
                "eos": s.eos_mode, "applied": "yes" if not missing else "no: " + ", ".join(missing),
            })  # fmt: skip
            rows.append({
                "pair": p.name, "role": "ar", "model": p.ar, "task": t.name, "max_new_tokens": t.ar_tokens,
                "steps": None, "block_length": None, "strategy": "greedy" if spec.ar.temperature == 0 else "sample",
                "temperature": spec.ar.temperature, "top_p": spec.ar.top_p, "position_temperature": None,
                "eos": "stop", "applied": "yes",
            })  # fmt: skip
    return pd.DataFrame(rows)


def ablation_mean(abl: pd.DataFrame) -> pd.DataFrame:
    """Table 13: the confidence-definition ablation's ECE and AUROC averaged over the tasks (per model, split,
    basis and aggregation; ``n_tasks`` says over how many)."""
    if abl is None or abl.empty:
        return pd.DataFrame()
    keys = ["mode", "model", "role", "split", "basis", "aggregation"]
    g = abl.groupby(keys, sort=False)
    out = g[["ece", "auroc"]].mean().reset_index()
    out["n_tasks"] = g["task"].nunique().to_numpy()
    out["tasks"] = g["task"].agg(lambda x: " ".join(dict.fromkeys(x))).to_numpy()
    return out
