"""``dlmeval care SPEC``: run (or resume) a Care sweep and write its tables.

SPEC is a ``.toml`` / ``.yaml`` sweep spec or the name of a shipped one (``care-demo``, ``care-paper``,
``care-tiny``); see docs/care.md and :mod:`dlmeval.protocols.care.spec`. Rerunning the same command resumes: finished
generations and cells are read back from the store.
"""

from __future__ import annotations

import argparse
import dataclasses

from dlmeval.cli.common import emit, run_in_store, run_lines
from dlmeval.cli.options import (
    add_batching_args,
    add_runtime_group,
    add_shard_arg,
    capped_batch,
    parse_shard,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "care",
        help="Care sweep: strategies x steps/NFE x temperatures x seeds, NFE, PPL, MAUVE, statistics",
        description="Run a Care sweep spec (or a shipped one: care-demo, care-paper, care-tiny). Every cell goes "
        "to the run store; a rerun resumes. Tables go to the store and, as CSV and Markdown, to --out.",
    )
    p.add_argument("spec", metavar="SPEC", help="sweep spec (.toml/.yaml) or a shipped spec name")
    p.add_argument(
        "--out", default=None, help="directory for CSV/Markdown tables (default: care-out/<spec name>)"
    )
    p.add_argument(
        "--models", nargs="+", default=None, help="diffusion model specs (replace the spec's list)"
    )
    p.add_argument("--n-prompts", type=int, default=None, help="prompts per cell (replaces the spec's value)")
    add_batching_args(p, "sampling", default_help="default: the spec's")
    p.add_argument(
        "--data-dir", default=None, help="data directory (default: DLMEVAL_DATA or ../shared/data)"
    )
    p.add_argument(
        "--plan", action="store_true", help="print the cells and predicted forward passes, run nothing"
    )
    add_shard_arg(p)
    add_runtime_group(
        p, evaluators="the evaluator models (the PPL model and the MAUVE featurizer)", from_spec=True
    )
    p.set_defaults(func=run)


def _spec_with_overrides(args):
    import dataclasses

    from dlmeval.errors import InputError
    from dlmeval.protocols.care import load_spec

    spec = load_spec(args.spec)
    if args.models:
        spec = spec.replace(models=tuple(args.models))
    gen = spec.generation
    if args.n_prompts is not None:
        if args.n_prompts < 2:
            raise InputError(f"--n-prompts must be at least 2, got {args.n_prompts}")
        gen = dataclasses.replace(gen, n_prompts=args.n_prompts)
    if args.batch_size is not None:
        if args.batch_size < 1:
            raise InputError(f"--batch-size must be positive, got {args.batch_size}")
        gen = dataclasses.replace(gen, batch_size=args.batch_size)
    if args.max_tokens is not None:
        rows = capped_batch(gen.batch_size, args.max_tokens, gen.prefix_tokens + gen.gen_tokens)
        gen = dataclasses.replace(gen, batch_size=rows)
    spec = spec.replace(generation=gen)
    if args.seed is not None:
        spec = spec.replace(seed=args.seed)
    return spec


def _native_schedule(model_spec: str) -> str:
    """The family's own schedule of a model spec, from the family registry (nothing is loaded)."""
    from dlmeval.errors import InputError
    from dlmeval.models.family import family_for_spec

    try:
        return family_for_spec(model_spec)[0].native_schedule
    except InputError:  # a bare path: its family is known only once loaded
        return "linear"


def _plan(args, spec) -> int:
    """Every (model, cell) with the forward passes it spends: each model's cells under its own family's schedule
    and its ``[models."<spec>"]`` override (Dream's ``none`` at 256 steps spends 256 passes, LLaDA's 128)."""
    from dlmeval.protocols.care import canonical_cell, downstream_cells, plan_cells
    from dlmeval.protocols.care.cells import effective_cell, model_schedule
    from dlmeval.protocols.care.plan import plan_extras, plan_lines
    from dlmeval.sampling import STRATEGIES, predict_nfe, steps_for_nfe

    g = spec.generation
    cells = plan_cells(spec)
    extras = plan_extras(spec)
    rows, total, per_model = [], 0, {}
    kw = dict(block_length=g.block_length, accounting=g.accounting)
    for m in spec.models:
        sched = model_schedule(spec, m, _native_schedule(m))
        runs: set[str] = set()
        calls = 0
        for c in cells:
            eff = effective_cell(spec, c, m)
            ckw = {**kw, "schedule": "linear" if STRATEGIES[eff.strategy].remasks else sched}
            if eff.steps is not None:
                steps = eff.steps
                nfe = predict_nfe(
                    g.gen_tokens, steps, strategy=eff.strategy, remask_fraction=eff.fraction, **ckw
                )
            else:
                steps, nfe = steps_for_nfe(
                    eff.nfe, g.gen_tokens, strategy=eff.strategy, remask_fraction=eff.fraction, **ckw
                )
            baseline = effective_cell(
                spec, dataclasses.replace(c, strategy=spec.headline.baseline), m
            ).strategy
            bkw = {**kw, "schedule": "linear" if STRATEGIES[baseline].remasks else sched}
            base = predict_nfe(g.gen_tokens, steps, strategy=baseline, **bkw)
            canon = canonical_cell(spec, eff, native_schedule=sched)
            canon = dataclasses.replace(canon, strategy=c.strategy, temperature=c.temperature)
            passes = nfe * -(-g.n_prompts // g.batch_size)
            if canon.key not in runs:  # a provably identical cell runs once
                calls += passes
                runs.add(canon.key)
            rows.append(
                {
                    "model": m,
                    "cell": c.key,
                    "runs_as": None if eff == c else f"{eff.strategy} t{eff.temperature:g}",
                    "schedule": ckw["schedule"],
                    "steps": steps,
                    "nfe_per_sample": nfe,
                    f"ratio_vs_{spec.headline.baseline}": round(nfe / base, 3),
                    "nfe_target_reached": None if c.nfe is None else nfe == c.nfe,
                    "same_as": canon.key if canon.key != c.key else None,
                    "forward_calls": passes,
                }
            )
        per_model[m] = {"distinct_cells": len(runs), "forward_calls": calls, "schedule": sched}
        total += calls
    first = per_model[spec.models[0]] if spec.models else {"distinct_cells": 0}
    payload = {
        "spec": spec.name,
        "models": list(spec.models),
        "accounting": g.accounting,
        "cells_per_model": len(cells),
        "distinct_cells_per_model": first["distinct_cells"],
        "per_model": per_model,
        "downstream_cells_per_task": len(downstream_cells(spec)) if spec.downstream.enabled else 0,
        "prompts_per_cell": g.n_prompts,
        "batch_size": g.batch_size,
        "forward_calls_total": total,
        "cells": rows,
        **extras,
    }
    ratio = f"ratio_vs_{spec.headline.baseline}"
    lines = [
        f"spec {spec.name}: {len(spec.models)} model(s) x {len(cells)} cells x {g.n_prompts} prompts (prefix "
        f"{g.prefix_tokens}, generate {g.gen_tokens} tokens, batch {g.batch_size}); NFE accounting: {g.accounting}"
    ]
    for m in spec.models:
        pm = per_model[m]
        lines.append(f"{m}: {pm['distinct_cells']} distinct cells, schedule {pm['schedule']}")
        for r in (r for r in rows if r["model"] == m):
            note = ""
            if r["runs_as"]:
                note += f"  runs as {r['runs_as']}"
            if r["nfe_target_reached"] is False:
                note += "  (target out of reach)"
            if r["same_as"]:
                note += f"  = {r['same_as']} (run once)"
            lines.append(
                f"  {r['cell']:<48} steps {r['steps']:>4}  NFE/sample {r['nfe_per_sample']:>4}  "
                f"x{r[ratio]:<5g} vs {spec.headline.baseline}  calls {r['forward_calls']}{note}"
            )
    lines.append(f"batched forward calls in all (sweep generation only, without stops at EOS): {total}")
    lines += plan_lines(extras)
    emit(args, payload, "\n".join(lines))
    return 0


def run(args: argparse.Namespace) -> int:
    from dlmeval.protocols.care import markdown, run_care
    from dlmeval.protocols.care.leaderboard import is_leaderboard_spec

    if is_leaderboard_spec(args.spec):  # kind = "care-leaderboard": its rows, tiers and paper-shaped table
        from dlmeval.cli.care_leaderboard import run_leaderboard_cli

        return run_leaderboard_cli(args)
    spec = _spec_with_overrides(args)
    if args.plan:
        return _plan(args, spec)
    out = args.out or f"care-out/{spec.name}"
    # validate, then open: every model spec is checked before the store is opened (or created)
    from dlmeval.models.registry import check_model_spec

    for m in spec.models:
        check_model_spec(m, allow_download=args.allow_download)
    check_model_spec(spec.evaluator, role="causal", allow_download=args.allow_download)
    if spec.metrics.featurizer.startswith("causal:"):
        check_model_spec(spec.metrics.featurizer, role="causal", allow_download=args.allow_download)
    if spec.downstream.enabled and spec.downstream.humaneval.n:
        from dlmeval.sandbox import require_isolation

        require_isolation()  # a sandbox that would refuse HumanEval code fails before the store exists
    # every corpus and task read from a source is read (and downloaded, with --allow-download) before the store opens
    from dlmeval.protocols.care.prompts import data_identity

    data_identity(spec, args.data_dir, allow_download=args.allow_download)
    shard = parse_shard(getattr(args, "shard", None))
    if shard is not None:
        import functools

        res = run_in_store(args, functools.partial(run_care, shard=shard), spec, out)
        runs = ", ".join(f"{m} {r}" for m, r in res.model_runs.items())
        emit(
            args,
            {
                "spec": spec.name,
                "shard": list(shard),
                "model_runs": res.model_runs,
                "signature": res.signature,
            },
            f"shard {shard[0]}/{shard[1]} of {spec.name}: runs {runs}\n"
            "next: `dlmeval runs export RUN --bundle FILE` for each run, `dlmeval runs import FILE` into one store, "
            f"then `dlmeval care {args.spec}` there (without --shard) for the summaries and tables",
        )
        return 0
    res = run_in_store(args, run_care, spec, out)
    from dlmeval.store import frame_records

    payload = {
        "spec": spec.name,
        "sweep_run": res.sweep_run,
        "model_runs": res.model_runs,
        "signature": res.signature,
        "out_dir": str(res.out_dir),
        "warnings": res.warnings,
        "tables": {k: frame_records(v) for k, v in res.tables.items()},
    }
    text = []
    for name in ("headline", "leaderboard"):
        if name in res.tables:
            text.append(markdown(name, res.tables[name]))
    text.append(f"tables: {res.out_dir}/tables.md (CSV and Markdown per table)")
    text += run_lines(res, "sweep", res.sweep_run)
    emit(args, payload, "\n".join(text))
    return 0
