"""Robustness-pillar sections (robustness paper): accuracy-vs-rate curves, RDI heat maps and AURDI, the DLM-vs-AR
comparison, reliability diagrams and calibration, IPM, D-GCG loss trajectories, linear probes by layer.

Tables as :mod:`dlmeval.protocols.robust` stores them on its ``robust-spec`` run (``accuracy``, ``summary``,
``comparison``, ``aurdi``, ``calibration``, ``reliability``, ``guard``, ``ipm``, ``dgcg``, ``probes``); each
``robust`` run (one model) holds its own ``accuracy`` table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlmeval.report import figures as F
from dlmeval.report.fmt import TableView, fmt_value
from dlmeval.report.registry import Context, Omit, Section, register

ROBUST = ("robust", "robust-spec")
WHO = "robust protocol (dlmeval.protocols.robust)"
_KEYS = ("model", "task", "mode")


def perturbed(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of perturbed conditions (the clean row, type ``clean`` / condition ``clean``, left out)."""
    out = df
    if "type" in df.columns:
        out = out[out["type"].astype(str) != "clean"]
    if "condition" in df.columns:
        out = out[out["condition"].astype(str) != "clean"]
    return out


def clean_rows(df: pd.DataFrame) -> pd.DataFrame | None:
    if "condition" not in df.columns and "type" not in df.columns:
        return None
    col = "condition" if "condition" in df.columns else "type"
    c = df[df[col].astype(str) == "clean"]
    return c.rename(columns={"accuracy": "clean_accuracy"}) if len(c) else None


def rate_grid(df: pd.DataFrame, value: str) -> pd.DataFrame:
    """Rows (model, task, mode, type) x rate columns of ``value``, rounded by the report's rules."""
    idx = [c for c in (*_KEYS, "type") if c in df.columns and df[c].nunique(dropna=False) > 0]
    d = df.copy()
    d["rate"] = pd.to_numeric(d["rate"], errors="coerce").round(6)
    wide = d.pivot_table(index=idx, columns="rate", values=value, aggfunc="mean", sort=False, dropna=False)
    wide.columns = [f"r={c:g}" for c in wide.columns]
    wide = wide.reset_index()
    for c in wide.columns[len(idx) :]:
        wide[c] = [fmt_value(v, value) for v in wide[c]]
    return wide


def _with_series(df: pd.DataFrame) -> pd.DataFrame:
    """One ``model`` label per line of a figure: model, plus task / mode when they vary."""
    out = df.copy()
    extra = [c for c in ("task", "mode") if c in out.columns and out[c].nunique() > 1]
    if extra:
        out["model"] = [" · ".join(map(str, v)) for v in zip(out["model"], *(out[c] for c in extra))]
    return out


@register(
    "robust/summary",
    pillar="robustness",
    kinds=ROBUST,
    table="summary",
    title="Robustness summary (Table 1)",
    columns=("model",),
    optional=("task", "mode", "pair", "role", "acc_clean", "acc_r", "mean_rdi", "adv_rate", "above_chance"),
    uses=("guard",),
    expected_from=WHO,
)
def _summary(ctx: Context) -> Section:
    df = ctx.df
    s = Section("Summary: clean accuracy, Acc_r, mean RDI, DLM advantage")
    note = ""
    flag = next((c for c in ("above_chance", "meaningful") if c in df.columns), None)
    if flag and not df[flag].astype(bool).all():
        note = "above chance = no: clean accuracy is not above chance (one-sided exact binomial test), so its RDI is blanked."
    s.table(
        TableView(
            df,
            caption="Per task, mode and model: clean accuracy, Acc_r = mean accuracy under noise, mean RDI over "
            "conditions, Adv. = share of conditions where the DLM degrades less than its AR partner",
            name=ctx.name,
            note=note,
        )
    )
    guard = ctx.table("guard")
    if guard is not None and len(guard):
        keep = [
            c
            for c in (
                "task",
                "mode",
                "model",
                "clean_correct",
                "n",
                "clean_accuracy",
                "chance",
                "p_value",
                "above_chance",
            )
            if c in guard.columns
        ]
        s.table(
            TableView(
                guard[keep],
                caption="Chance guard: is clean accuracy above chance? (one-sided exact binomial test)",
                name="guard",
            )
        )
    return s


@register(
    "robust/accuracy",
    pillar="robustness",
    kinds=ROBUST,
    table="accuracy",
    title="Accuracy against perturbation rate",
    columns=("model", "type", "rate", "accuracy"),
    optional=("task", "mode", "role", "condition", "n", "rdi", "meaningful"),
    n_figures=1,
    expected_from=WHO,
)
def _accuracy(ctx: Context) -> Section:
    df = _with_series(ctx.df)
    pert = perturbed(df)
    if pert.empty:
        raise Omit("the run has clean accuracy only (no perturbed condition)")
    clean = clean_rows(df)
    s = Section("Accuracy against perturbation rate")
    s.figure(
        "Accuracy per perturbation type as the rate grows (rate 0: clean prompts), one line per model; perturbation "
        "seeds pooled.",
        F.accuracy_vs_rate(pert, clean),
    )
    s.table(
        TableView(
            rate_grid(pert.assign(model=ctx.df.loc[pert.index, "model"]), "accuracy"),
            caption="Accuracy per type and rate (perturbation seeds pooled)",
            name=ctx.name,
            more_hint=ctx.more_hint(),
        )
    )
    return s


@register(
    "robust/rdi",
    pillar="robustness",
    kinds=ROBUST,
    table="accuracy",
    title="RDI heat maps",
    columns=("model", "type", "rate", "rdi"),
    optional=("task", "mode", "meaningful"),
    n_figures=1,
    expected_from=WHO,
)
def _rdi(ctx: Context) -> Section:
    pert = perturbed(ctx.df)
    if pert.empty or not np.isfinite(pd.to_numeric(pert["rdi"], errors="coerce")).any():
        raise Omit("no defined RDI (no perturbed condition, or no model above chance on clean input)")
    s = Section("Relative degradation index (RDI)")
    s.figure(
        "RDI = (A_clean - A_r) / A_clean per type and rate; 0 = no loss, negative = better than clean; blank = "
        "not defined (clean accuracy not above chance).",
        F.rdi_heatmap(pert),
    )
    s.table(
        TableView(
            rate_grid(pert, "rdi"),
            caption="RDI per type and rate (not clipped)",
            name=ctx.name,
            more_hint=ctx.more_hint(),
        )
    )
    return s


@register(
    "robust/aurdi",
    pillar="robustness",
    kinds=ROBUST,
    table="aurdi",
    title="AURDI per perturbation type (Table 9)",
    columns=("model", "type", "aurdi"),
    optional=("task", "mode", "role", "meaningful"),
    expected_from=WHO,
)
def _aurdi(ctx: Context) -> Section:
    df = ctx.df
    idx = [c for c in _KEYS if c in df.columns]
    wide = df.pivot_table(
        index=idx, columns="type", values="aurdi", aggfunc="first", sort=False, dropna=False
    ).reset_index()
    wide.columns = [str(c) for c in wide.columns]
    return Section("AURDI per perturbation type").table(
        TableView(
            wide,
            caption="Area under the RDI-rate curve per type, anchored at RDI(0) = 0 and divided by the largest rate "
            "(on the RDI scale; lower = more robust)",
            name=ctx.name,
            best={c: "min" for c in wide.columns if c not in idx},
            note="Bold: least degradation per type.",
        )
    )


@register(
    "robust/comparison",
    pillar="robustness",
    kinds=ROBUST,
    table="comparison",
    title="DLM against AR (App. H)",
    columns=("dlm", "ar"),
    optional=(
        "task",
        "mode",
        "pair",
        "n_conditions",
        "wins",
        "ties",
        "losses",
        "adv_rate",
        "mean_adv",
        "ci_lo",
        "ci_hi",
        "wilcoxon_p",
        "meaningful",
        "note",
    ),
    expected_from=WHO,
)
def _comparison(ctx: Context) -> Section:
    return Section("DLM against its AR partner").table(
        TableView(
            ctx.df,
            caption="Advantage = RDI_AR - RDI_DLM per condition (positive: the DLM degrades less); Adv. rate = share "
            "of conditions with a positive advantage; paired bootstrap CI of the mean advantage; Wilcoxon signed-rank p",
            name=ctx.name,
        )
    )


@register(
    "robust/reliability",
    pillar="robustness",
    kinds=ROBUST,
    table="reliability",
    title="Reliability diagrams",
    columns=("model", "confidence", "accuracy"),
    optional=("task", "mode", "split", "condition", "bin", "lower", "upper", "count"),
    uses=("calibration",),
    n_figures=1,
    expected_from=WHO,
)
def _reliability(ctx: Context) -> Section:
    df = ctx.df
    if "condition" not in df.columns and "split" in df.columns:
        df = df.rename(columns={"split": "condition"})
    s = Section("Calibration: reliability diagrams")
    s.figure(
        "Accuracy against mean confidence per bin (equal-width bins; marker area ~ items; clean and noisy "
        "prompts); below the diagonal = overconfident.",
        F.reliability_diagram(df),
    )
    cal = ctx.table("calibration")
    if cal is not None and len(cal):
        keep = [
            c
            for c in (
                "task",
                "mode",
                "model",
                "split",
                "confidence_def",
                "n",
                "accuracy",
                "mean_confidence",
                "ece",
                "auroc",
                "n_nan",
            )
            if c in cal.columns
        ]
        s.table(
            TableView(
                cal[keep],
                caption="ECE (15 equal-width bins), selective-prediction AUROC and mean confidence: clean, noisy (all conditions) and per condition",
                name="calibration",
                more_hint=ctx.more_hint("calibration"),
            )
        )
    else:
        s.table(
            TableView(df, caption="Reliability bins", name=ctx.name, max_rows=30, more_hint=ctx.more_hint())
        )
    return s


@register(
    "robust/ipm",
    pillar="robustness",
    kinds=ROBUST,
    table="ipm",
    title="Input prompt masking (IPM)",
    columns=("variant", "accuracy"),
    optional=("model", "task", "condition", "delta", "masked_pct", "n"),
    n_figures=1,
    expected_from=WHO + ": one row per (model, condition, variant), the noisy baseline as variant 'noisy'",
)
def _ipm(ctx: Context) -> Section:
    s = Section("Input prompt masking (IPM) against the noisy baseline")
    s.figure(
        "Accuracy of each IPM variant per condition; dashed: the noisy baseline (no patching).",
        F.ipm_comparison(ctx.df),
    )
    s.table(
        TableView(
            ctx.df.drop(columns=[c for c in ctx.df.columns if _is_list_column(ctx.df[c])]),
            caption="IPM variant accuracy per condition (delta: against the noisy baseline)",
            name=ctx.name,
        )
    )
    return s


def _is_list_column(s: pd.Series) -> bool:
    return s.dtype == object and any(isinstance(v, list | tuple | dict) for v in s.head(20))


def _trajectory(v) -> list[float] | None:
    """A stored loss trajectory: a list of numbers, or the protocol's text form (numbers separated by spaces, as
    :mod:`dlmeval.protocols.robust.probe_dgcg` keeps it in its table); None when there is none."""
    if isinstance(v, str):
        try:
            out = [float(x) for x in v.split()]
        except ValueError:
            return None
        return out or None
    if isinstance(v, list | tuple | np.ndarray):
        return [float(x) for x in v] or None
    return None


def trajectories(dgcg: pd.DataFrame) -> pd.DataFrame:
    """Long (model, suffix_length, step, loss) rows from a ``dgcg`` table with a ``loss_trajectory`` per row
    (the mean loss per optimization step, :func:`dlmeval.robustness.dgcg.summarize_gcg`; a list or its text
    form). The protocol repeats a model's row once per transfer source: each (model, task, suffix length)
    trajectory is taken once."""
    rows, seen = [], set()
    for r in dgcg.to_dict("records"):
        traj = _trajectory(r.get("loss_trajectory"))
        if traj is None:
            continue
        key = (r.get("model", "?"), r.get("task"), r.get("suffix_length"), tuple(traj))
        if key in seen:
            continue
        seen.add(key)
        for step, loss in enumerate(traj):
            rows.append({"model": key[0], "suffix_length": key[2], "step": step, "loss": loss})
    out = pd.DataFrame(rows, columns=["model", "suffix_length", "step", "loss"])
    if out["suffix_length"].isna().all():
        out = out.drop(columns="suffix_length")
    return out


@register(
    "robust/dgcg",
    pillar="robustness",
    kinds=ROBUST,
    table="dgcg",
    title="D-GCG / GCG adversarial-suffix probe",
    columns=("model", "loss_trajectory"),
    optional=(
        "suffix_length",
        "degradation",
        "clean_accuracy",
        "attacked_accuracy",
        "mean_grad_norm",
        "mean_loss_increase",
        "step_improvement_rate",
        "n",
    ),
    n_figures=1,
    expected_from=WHO
    + ": one row per (model, suffix length) with the mean loss per step (a list or its text)",
)
def _dgcg(ctx: Context) -> Section:
    traj = trajectories(ctx.df)
    if traj.empty:
        raise Omit("no loss trajectory stored (column loss_trajectory)")
    s = Section("D-GCG / GCG adversarial-suffix probe")
    s.figure(
        "Target loss over optimization steps (mean over items): a rising curve is a working attack; an erratic one "
        "means the optimizer cannot exploit the gradient direction.",
        F.dgcg_trajectories(traj),
    )
    drop = [
        c for c in ctx.df.columns if _is_list_column(ctx.df[c]) or c == "loss_trajectory"
    ]  # plotted above
    s.table(
        TableView(
            ctx.df.drop(columns=drop),
            caption="Degradation per suffix length, mean gradient norm, mean loss increase",
            name=ctx.name,
        )
    )
    return s


def probe_long(probes: pd.DataFrame) -> pd.DataFrame:
    """Long (model, condition, layer, accuracy, auroc) rows of a probe table (:func:`dlmeval.report.figures.
    probe_long`: one row per layer, or per-layer lists / space-separated strings)."""
    return F.probe_long(probes)


@register(
    "robust/probes",
    pillar="robustness",
    kinds=ROBUST,
    table="probes",
    title="Linear probes by layer",
    columns=("model",),
    optional=(
        "condition",
        "task",
        "layer",
        "accuracy",
        "layers",
        "accuracy_by_layer",
        "auroc",
        "best_layer",
        "best_accuracy",
    ),
    n_figures=1,
    expected_from=WHO
    + ": per (model, condition) the ProbeResult fields (layers / accuracy / auroc lists) or one row per layer",
)
def _probes(ctx: Context) -> Section:
    df = probe_long(ctx.df)
    if df.empty:
        raise Omit(
            "no per-layer probe accuracy (columns layer + accuracy, or layers + accuracy_by_layer per row)"
        )
    s = Section("Linear probes: is the corruption encoded?")
    s.figure(
        "Held-out accuracy of a linear probe telling corrupted from clean tokens, by layer (0.5 = chance).",
        F.probe_layers(df),
    )
    keys = [c for c in ("model", "task", "condition") if c in df.columns]
    rows = []
    for k, g in df.groupby(keys, sort=False):
        k = k if isinstance(k, tuple) else (k,)
        acc = pd.to_numeric(g["accuracy"], errors="coerce").to_numpy(float)
        i = int(np.nanargmax(acc))
        rec = dict(zip(keys, k))
        rec.update({"best_layer": int(g["layer"].iat[i]), "accuracy": float(acc[i])})
        if "auroc" in g.columns:
            rec["auroc"] = float(pd.to_numeric(g["auroc"], errors="coerce").iat[i])
        rows.append(rec)
    s.table(
        TableView(
            pd.DataFrame(rows), caption="Best-layer probe accuracy (and AUROC at that layer)", name=ctx.name
        )
    )
    return s
