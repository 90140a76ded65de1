"""Running the Care leaderboard and its table in the paper's shape; the spec and its rows are in
:mod:`dlmeval.protocols.care.leaderboard_spec` (re-exported here). :func:`resolve_leaderboard` resolves the spec
once into a :class:`LeaderboardPlan` (a Care plan per diffusion row, the shared settings' plan for the AR rows, all
reading their data once between them), which ``--plan`` prints and :func:`run_leaderboard` executes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from dlmeval.protocols.care.leaderboard_spec import (  # noqa: F401  (re-exported)
    AR_NFE_PER_TOKEN,
    RUN_KIND,
    SHIPPED,
    LeaderboardSpec,
    Row,
    is_leaderboard_spec,
    load_leaderboard,
    parse_leaderboard,
    plan_rows,
    row_nfe,
)
from dlmeval.protocols.care.plan import CareOptions, CarePlan, resolve


# ------------------------------------------------------------------------------------------------ plan
@dataclass(frozen=True, eq=False)
class LeaderboardPlan:
    """A leaderboard spec resolved once: ``base`` is the plan of the shared settings (the AR rows' prompts and
    references, the data the plan lists), ``rows`` every row with its Care plan (None for an AR row)."""

    spec: LeaderboardSpec
    base: CarePlan
    rows: tuple[tuple[Row, CarePlan | None], ...]

    @property
    def options(self) -> CareOptions:
        return self.base.options


def resolve_leaderboard(spec: LeaderboardSpec, options: CareOptions | None = None) -> LeaderboardPlan:
    """The plan of a leaderboard spec; reads no data (each row's plan shares the base plan's reads)."""
    base = resolve(spec.care_base(), options)
    rows = tuple(
        (r, resolve(spec.care_spec(r), base.options, share=base) if r.kind == "diffusion" else None)
        for r in spec.rows
    )
    return LeaderboardPlan(spec, base, rows)


def leaderboard_config(plan: LeaderboardPlan) -> dict[str, Any]:
    """The configuration of the ``care-leaderboard`` run: the spec's, and the identity of the data the base plan
    reads (file digests, a sourced corpus's provenance: :meth:`CarePlan.data_identity`). The AR rows are computed
    on this run from the base plan's prompts and references, so another corpus behind the same name or path makes
    another run, as it does for each diffusion row's Care run."""
    return {**plan.spec.config(), "data": plan.base.data_identity()}


# ------------------------------------------------------------------------------------------------ run
def run_leaderboard(
    plan: LeaderboardPlan | LeaderboardSpec,
    store,
    *,
    device=None,
    dtype=None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    data_dir=None,
    command_line: str | None = None,
    progress: bool = True,
    echo=None,
    **kw,
) -> tuple[str, pd.DataFrame]:
    """Run every row of ``plan`` (a Care run per diffusion row, the AR row's cell), store the table on one
    ``care-leaderboard`` run; returns ``(run id, table)``. A spec is resolved here under ``data_dir`` and
    ``allow_download``."""
    from dlmeval.models import load_causal_lm, load_diffusion
    from dlmeval.protocols.care import run_care

    if not isinstance(plan, LeaderboardPlan):
        plan = resolve_leaderboard(plan, CareOptions(data_dir, allow_download))
    elif (data_dir is not None and data_dir != plan.options.data_dir) or (
        allow_download and not plan.options.allow_download
    ):
        raise ValueError("a LeaderboardPlan reads its data as resolve_leaderboard() was told")
    spec = plan.spec
    config = leaderboard_config(plan)  # reads the data identity: a bad source fails before any model loads
    say = echo or (lambda s: None)
    rows, runs, identities = [], {}, []
    base = plan.base.spec
    shared: dict[str, Any] = {}  # the evaluator (and a causal MAUVE featurizer): loaded once for every row
    lkw = dict(device=device, dtype=dtype, allow_download=allow_download, trust_remote_code=trust_remote_code)
    shared[base.evaluator] = load_causal_lm(base.evaluator, **lkw)
    if base.metrics.featurizer.startswith("causal:"):
        shared[base.metrics.featurizer] = load_causal_lm(base.metrics.featurizer, **lkw)
    for r, care in plan.rows:
        if care is None:
            continue
        model = load_diffusion(
            r.model,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
        )
        if r.softmask:
            from dlmeval.sampling.softmask import SoftMask

            model.softmask = SoftMask(**r.softmask)
            model.identity_extra = {**model.identity_extra, "softmask": dict(r.softmask)}
        res = run_care(
            care,
            store,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
            command_line=command_line,
            progress=progress,
            echo=echo,
            models={**shared, r.model: model},
            **kw,
        )
        run_id = res.model_runs[r.model]
        runs[r.label] = run_id
        identities.append(model.identity())
        lb = res.tables.get("leaderboard")
        rows.append(_diffusion_row(spec, r, lb, res.tables.get("nfe")))
        say(f"leaderboard: {r.label} -> run {run_id}")
        del model
    for r in spec.rows:
        if r.kind == "ar":
            rec, ident = _ar_row(plan.base, spec, r, shared, device, dtype, allow_download, say)
            identities.append(ident)
            rows.append(rec)
    order = {r.label: i for i, r in enumerate(spec.rows)}
    table = pd.DataFrame(rows).sort_values("model", key=lambda s: s.map(order)).reset_index(drop=True)
    table["care_run"] = table["model"].map(runs)
    table["data_source"] = data_source_line(plan)  # the column every stored table names its data in (#34)
    run = store.open_run(
        RUN_KIND, config, identities, seed=int(spec.raw.get("seed", 0)), command_line=command_line
    )
    run.put_table("leaderboard_rows", table)
    cells = published_comparison(spec, table)
    if cells:  # the paper's value of every cell beside ours, stored as Care and robust runs store theirs
        from dlmeval.protocols.published import frame as published_frame

        run.put_table("published", published_frame(cells))
    run.finish()
    return run.run_id, table


def _first(df: pd.DataFrame | None, col: str):
    if df is None or df.empty or col not in df.columns:
        return float("nan")
    return df[col].iloc[0]


def _diffusion_row(
    spec: LeaderboardSpec, r: Row, lb: pd.DataFrame | None, cells: pd.DataFrame | None
) -> dict:
    # the row's own baseline (Dream-7B-Base: origin), as its Care run and the plan name it; the columns keep the
    # table's "none" names (the paper's column is the no-remask baseline of each row)
    base, strat = spec.row_baseline(r), spec.row_strategy(r)

    def nfe(strategy):
        if cells is None or cells.empty:
            return float("nan")
        sel = cells[cells["strategy"] == strategy]
        return float(sel["nfe"].mean()) if len(sel) else float("nan")

    return {
        "tier": str(r.tier),
        "model": r.label,
        "scale": r.scale,
        "spec": r.model,
        "strategy": strat,
        "temperature": spec.row_temperature(r),
        "ppl_none": _first(lb, f"ppl_{base}"),
        "mauve_none": _first(lb, f"mauve_{base}"),
        "ppl_strategy": _first(lb, f"ppl_{strat}"),
        "mauve_strategy": _first(lb, f"mauve_{strat}"),
        "gap": _first(lb, "gap"),
        "gap_se": _first(lb, "gap_se"),
        "humaneval_pass1": _first(lb, "humaneval_pass1"),
        "humaneval_cell": _first(lb, "humaneval_cell"),
        "nfe_none": nfe(base),
        "nfe_strategy": nfe(strat),
        # where the HumanEval code ran, when it ran (an unsafe run is marked in the paper table too)
        **({"humaneval_sandbox": _first(lb, "humaneval_sandbox")} if _ran(lb, "humaneval_sandbox") else {}),
    }


def _ran(df: pd.DataFrame | None, col: str) -> bool:
    return df is not None and not df.empty and col in df.columns and df[col].notna().any()


def _ar_row(plan: CarePlan, spec, r: Row, shared, device, dtype, allow_download, say):
    """The AR reference row: nucleus samples of the same prompts, scored by the Care cell metrics."""
    import numpy as np

    from dlmeval.models import load_causal_lm
    from dlmeval.protocols.care.cells import Cell
    from dlmeval.protocols.care.metrics import Evaluators, cell_metrics

    care = plan.spec
    g = care.generation
    model = shared.get(r.model) or load_causal_lm(
        r.model, device=device, dtype=dtype, allow_download=allow_download
    )
    metrics = Evaluators(
        plan,
        device=device,
        dtype=dtype,
        trust_remote_code=False,
        allow_download=allow_download,
        models=shared,
    )
    src = plan.sources[0]
    prompts = plan.source_prompts(model, src)  # the same prompts for every seed
    maus, ppls, nfes = [], [], []
    for seed in spec.seeds:
        outs = model.generate_scored(
            [p.ids for p in prompts],
            max_new_tokens=g.gen_tokens,
            temperature=1.0,
            top_p=r.top_p,
            seed=seed,
            item_ids=[p.item_id for p in prompts],
            batch_size=g.batch_size,
        )
        gens = [
            {
                "text": o.text,
                "prefix": p.text,
                "nfe": g.gen_tokens * AR_NFE_PER_TOKEN,
                "remasks": 0,
                "replacement_rate": 0.0,
                "stable_cells": 0,
                "n_tokens": len(o.token_ids),
                "resolved_steps": g.gen_tokens,
                "nfe_predicted": g.gen_tokens * AR_NFE_PER_TOKEN,
            }
            for p, o in zip(prompts, outs)
        ]
        cell = Cell(src, "ar-nucleus", g.gen_tokens, None, 1.0, 0.0, seed)
        rec = cell_metrics(care, cell, gens, metrics, lambda w: say(f"leaderboard: {r.label}: {w}"))
        maus.append(rec["mauve"])
        ppls.append(rec["ppl"])
        nfes.append(rec["nfe"])
    row = {
        "tier": str(r.tier),
        "model": r.label,
        "scale": r.scale,
        "spec": r.model,
        "strategy": f"nucleus p={r.top_p:g}",
        "temperature": 1.0,
        "ppl_none": float(np.nanmean(ppls)),
        "mauve_none": float(np.nanmean(maus)),
        "ppl_strategy": float("nan"),
        "mauve_strategy": float("nan"),
        "gap": float("nan"),
        "humaneval_pass1": float("nan"),
        "nfe_none": float(np.mean(nfes)),
        "nfe_strategy": float("nan"),
    }
    return row, model.identity()


# ------------------------------------------------------------------------------------------------ table
def data_source_line(spec: LeaderboardSpec | LeaderboardPlan) -> str:
    """Where the prompts and MAUVE references came from (every table says which source it used); of a plan, as
    it resolved them."""
    if isinstance(spec, LeaderboardPlan):
        src = spec.base.sources[0]
        return f"{src}: {spec.base.corpus(src).describe()}"
    base = spec.care_base()
    src = base.generation.sources[0]
    return f"{src}: {base.corpus(src).describe()}"


def published_comparison(spec: LeaderboardSpec, table: pd.DataFrame):
    """The paper's value of every cell beside the measured one (:mod:`dlmeval.protocols.published`)."""
    from dlmeval.protocols.published import compare

    return compare(spec.published(), {"leaderboard_rows": table})


def report_markdown(spec: LeaderboardSpec, table: pd.DataFrame) -> str:
    """The table in the paper's shape, its data source, then measured vs published per cell."""
    from dlmeval.protocols.published import markdown

    parts = [paper_table_markdown(table), "", f"Prompts and MAUVE references: {data_source_line(spec)}"]
    cells = published_comparison(spec, table)
    if cells:
        parts += ["", "Measured vs published (Table 21; HE as a fraction):", "", markdown(cells)]
    return "\n".join(parts)


PAPER_COLUMNS = (
    ("tier", "Tier"),
    ("model", "Model"),
    ("scale", "Scale"),
    ("ppl_none", "PPL none"),
    ("mauve_none", "MAUVE none"),
    ("ppl_strategy", "PPL h_ent."),
    ("mauve_strategy", "MAUVE h_ent."),
    ("gap", "Inter. Gap"),
    ("humaneval_pass1", "HE p@1"),
    ("nfe_none", "NFE none"),
    ("nfe_strategy", "NFE h_ent."),
)


def paper_table_markdown(table: pd.DataFrame) -> str:
    """The leaderboard in the paper's shape (Table 21): Tier 1, Tier 2, then the AR reference; marks as the
    paper's footnotes (``*`` a row at another temperature, ``‡`` another strategy than high_entropy)."""

    def fmt(v, col):
        if v is None or (isinstance(v, float) and v != v):
            return "—"
        if col in ("ppl_none", "ppl_strategy"):
            return f"{float(v):.1f}"
        if col in ("nfe_none", "nfe_strategy"):
            return f"{float(v):.0f}"
        if col == "humaneval_pass1":
            return f"{100 * float(v):.1f}"
        return f"{float(v):.3f}" if isinstance(v, int | float) else str(v)

    heads = [h for _, h in PAPER_COLUMNS]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    order = {"1": 0, "2": 1, "reference": 2}
    t = table.assign(_o=table["tier"].astype(str).map(order)).sort_values("_o", kind="stable")
    t0 = t["temperature"].mode().iloc[0] if len(t) else None
    for rec in t.to_dict("records"):
        cells = []
        for col, _ in PAPER_COLUMNS:
            s = fmt(rec.get(col), col) if col not in ("tier", "model", "scale") else str(rec.get(col, ""))
            if col == "humaneval_pass1" and "unsafe" in str(rec.get("humaneval_sandbox") or "").split("+"):
                s += " (unsafe sandbox)"
            if col == "model" and rec.get("tier") != "reference":
                if t0 is not None and rec.get("temperature") != t0:
                    s += f" (t={rec['temperature']:g})*"
                if rec.get("strategy") not in (None, "high_entropy"):
                    s += f" ({rec['strategy']})‡"
            cells.append(s)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = [
    "RUN_KIND",
    "LeaderboardPlan",
    "LeaderboardSpec",
    "Row",
    "is_leaderboard_spec",
    "load_leaderboard",
    "paper_table_markdown",
    "parse_leaderboard",
    "published_comparison",
    "report_markdown",
    "plan_rows",
    "resolve_leaderboard",
    "row_nfe",
    "run_leaderboard",
]
