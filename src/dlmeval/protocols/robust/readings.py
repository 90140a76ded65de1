"""What ``dlmeval robust SPEC --plan`` says beyond the evaluation cells: every analysis (probe) that will run,
on which models, tasks, items and conditions, with a count of what it costs; and every ambiguous reading of the
paper in force, with the switch that gives the other one (docs/robustness.md, "Readings")."""

from __future__ import annotations

from typing import Any

from dlmeval.protocols.robust.evaluate import clean_seeds, model_entries
from dlmeval.protocols.robust.spec import RobustSpec

#: the robustness paper's tables and figures each part of a run fills (dlmeval table -> the paper's)
PAPER_TABLES: dict[str, str] = {
    "summary": "Table 1 (clean accuracy, Acc_r, RDI, Adv.); Fig. 2",
    "comparison": "Table 11 (paired bootstrap CI and Wilcoxon of the mean RDI advantage); Figs. 15 / 16",
    "accuracy": "Figs. 3, 9, 10, 13 (accuracy vs rate); Figs. 11, 12, 14 (RDI heat maps); Table 12 (scope = question)",
    "aurdi": "Table 9 (AURDI per perturbation type)",
    "calibration": "Table 2 (clean-baseline ECE, mean confidence, AUROC); Figs. 4 / 5",
    "calibration_ablation_mean": "Table 13 (confidence-definition ablation)",
    "reliability": "Table 8 (calibration computation details: 15 bins)",
    "ipm": "Tables 5 and 10, Fig. 17 (IPM variants; hyperparameters Table 7)",
    "dgcg": "Table 3, Fig. 6 (D-GCG / AR-GCG)",
    "probes": "Table 4, Fig. 7 (best-layer linear probes)",
    "trajectory": "Fig. 8A (denoising-trajectory divergence)",
    "attention": "Fig. 8B (AR attention on corrupted tokens)",
    "recipe": "Table 6 (model hyperparameters as run)",
}


def paper_tables(spec: RobustSpec) -> list[dict[str, str]]:
    """The parts of the run and the paper's tables / figures each fills (only the parts this spec runs)."""
    parts = [
        "summary",
        "comparison",
        "accuracy",
        "aurdi",
        "calibration",
        "calibration_ablation_mean",
        "reliability",
    ]
    parts += [name for name, p in spec.probes_ if p.enabled and name in PAPER_TABLES]
    parts.append("recipe")
    return [{"table": k, "paper": PAPER_TABLES[k]} for k in parts]


def _opt(spec: RobustSpec, probe: str, key: str, default: Any) -> Any:
    return spec.probe(probe).kwargs().get(key, default)


def readings(spec: RobustSpec) -> dict[str, str]:
    """Each reading in force, one line: what runs, and the alternative one switch away."""
    cal = spec.calibration
    conf = {
        "unmasked": "one pass, nothing masked: max softmax at every answer position (the default; "
        'calibration.confidence = "masked" | "kmask" for Eq. 4\'s p(y_i | y_\\i))',
        "masked": "each answer token masked in turn: Eq. 4's p(y_i | y_\\i) read literally "
        '(calibration.confidence = "unmasked" for one pass)',
        "kmask": f"K-mask estimate, K = {cal.confidence_masks} random groups masked one per pass "
        '(calibration.confidence = "masked" for every token in turn)',
    }[cal.confidence]
    stochastic = [p.name for p in spec.pairs if spec.sampler_for(p).temperature > 0]
    out = {
        "dlm_confidence": conf,
        "clean_seeds": (
            'clean prompts evaluated once (seed None; perturbation seeds only): clean_seeds = "per_seed" '
            "for one sampled clean pass per seed"
            if spec.clean_seeds == "once"
            else f"one clean pass per perturbation seed {list(spec.perturbation_seeds)}, pooled"
        )
        + (f"; sampling DLMs: {', '.join(stochastic)}" if stochastic else ""),
        "scope": f'{spec.scope} (the whole user message; scope = "question" for App. H)'
        if spec.scope == "prompt"
        else f"{spec.scope}",
    }
    if spec.dgcg.enabled:
        deg = _opt(spec, "dgcg", "degradation", "relative")
        other = "absolute" if deg == "relative" else "relative"
        out["dgcg_degradation"] = (
            f"{deg} (Min-len at threshold {_opt(spec, 'dgcg', 'threshold', 0.2)}; [dgcg] degradation = "
            f'"{other}"); candidates per step {_opt(spec, "dgcg", "search_width", 64)}, ASCII filter '
            f"{_opt(spec, 'dgcg', 'ascii_only', True)}, re-tokenisation filter "
            f"{_opt(spec, 'dgcg', 'retokenize_filter', True)} (not stated in the paper)"
        )
    if spec.probes.enabled:
        layers = _opt(spec, "probes", "layers", None)
        where = (
            "the paper's {0, 2, ..., 30, 31}"
            if layers == "paper"
            else (
                f"hidden states {layers}"
                if layers
                else f"{_opt(spec, 'probes', 'n_layers', 17)} evenly spaced"
            )
        )
        out["probe_layers"] = f'{where} ([probes] layers = "paper" | [...] | n_layers = N)'
        from dlmeval.protocols.robust.probe_linear import SCALER

        sc = _opt(spec, "probes", "scaler", SCALER)
        out["probe_scaler"] = (
            f"StandardScaler {'on' if sc else 'off'}"
            + (" (the paper's probes: raw hidden states)" if not sc else " (the paper's probes use none)")
            + f" ([probes] scaler = {str(not sc).lower()})"
        )
    if spec.ipm.enabled:
        td = _opt(spec, "ipm", "steps", 16)
        out["ipm_T_d"] = f"{td} denoising steps ([ipm] steps; Table 7: 16, Sec. 6.6: 64)"
    return out


def analyses(spec: RobustSpec) -> list[dict[str, Any]]:
    """Every enabled probe: its models, tasks, items, conditions and what it costs (counted, not timed)."""
    from dlmeval.protocols.robust.probes import PROBES

    entries, _ = model_entries(spec)
    out = []
    for name, p in spec.probes_:
        if not p.enabled:
            continue
        cls = PROBES[name]
        roles = getattr(cls, "roles", ("dlm", "ar"))
        models = [e.label for e in entries if e.role in roles]
        conds = [] if name == "dgcg" else (list(p.conditions) or list(spec.conditions[:1]))
        opts = p.kwargs()
        per_task = p.n * len(conds)
        if name == "ipm":
            cost = f"{p.n * len(conds) * len(opts.get('variants', []))} IPM generations + {p.n} clean per task and model"
        elif name == "dgcg":
            lengths = opts.get("suffix_lengths", [8])
            steps, width = opts.get("steps", 50), opts.get("search_width", 64)
            cost = f"{p.n * len(lengths)} attacks x {steps} steps x {width} candidates per task and model"
        elif name == "probes":
            cost = f"{per_task} hidden-state passes + one logistic regression per layer per condition"
        elif name == "trajectory":
            cost = f"{p.n * (1 + len(conds))} recorded sampler runs ({opts.get('snapshots', 8)} snapshots)"
        elif name == "attention":
            cost = f"{p.n * (1 + len(conds))} eager-attention forward passes"
        else:
            cost = f"{per_task} items x conditions"
        out.append(
            {
                "analysis": name,
                "title": cls.title,
                "models": models,
                "tasks": list(p.tasks),
                "n": p.n,
                "conditions": conds,
                "options": opts,
                "cost": cost,
            }
        )
    return out


def cell_counts(spec: RobustSpec) -> dict[str, int]:
    return {"clean_cells_per_task_and_mode": len(clean_seeds(spec))}


__all__ = ["analyses", "cell_counts", "readings"]
