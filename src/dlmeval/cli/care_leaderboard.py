"""``dlmeval care care-leaderboard``: the Care leaderboard spec (``kind = "care-leaderboard"``), run through the
``care`` command: ``--plan`` lists every row with its tier and forward passes per sample; a run makes one Care run
per diffusion row plus the AR reference row and prints the table in the paper's shape (Table 21), which
``dlmeval leaderboard`` prints again from the store."""

from __future__ import annotations

import argparse

from dlmeval.cli.common import emit, run_in_store


def _spec(args):
    import dataclasses

    from dlmeval.errors import InputError
    from dlmeval.protocols.care.leaderboard import load_leaderboard

    spec = load_leaderboard(args.spec)
    if getattr(args, "shard", None):
        raise InputError("--shard applies to a Care sweep spec; a leaderboard spec runs its rows whole")
    if getattr(args, "models", None):
        raise InputError("--models does not apply to a leaderboard spec: its models are its [[rows]]")
    gen = dict(spec.raw.get("generation", {}))
    if args.n_prompts is not None:
        gen["n_prompts"] = args.n_prompts
    if args.batch_size is not None:
        gen["batch_size"] = args.batch_size
    raw = {**spec.raw, "generation": gen}
    if args.seed is not None:
        raw["seed"] = args.seed
    spec = dataclasses.replace(spec, raw=raw)
    for r in spec.rows:  # the overrides must leave every row a valid Care spec
        if r.kind == "diffusion":
            spec.care_spec(r)
    return spec


def _plan(plan) -> tuple[dict, str]:
    """Every row with its sampler, seeds, forward passes, HumanEval cell, the reading it reproduces and the
    paper's values of its cells; the data each corpus is read from (the resolved plan's)."""
    from dlmeval.protocols.care.leaderboard import plan_rows
    from dlmeval.protocols.care.plan import data_rows

    spec = plan.spec
    rows = plan_rows(spec)
    data = data_rows(plan.base)
    lines = [
        f"leaderboard {spec.name}: {len(rows)} rows at {spec.steps} nominal steps "
        f"(reading: {spec.reading}; published values: Table 21)"
    ]
    for r in rows:
        nfe = f"NFE/sample {r['nfe_baseline']}" + (
            f" / {r['nfe_strategy']}" if r["nfe_strategy"] is not None else ""
        )
        seeds = ",".join(map(str, r["seeds"]))
        lines.append(
            f"  tier {str(r['tier']):<9} {r['model']:<26} {r['sampler']:<40} t={r['temperature']:<5g} "
            f"seeds {seeds:<6} {nfe}"
        )
        lines.append(f"      model: {r['spec']}")
        if r["humaneval"]:
            lines.append(f"      HE p@1: {r['humaneval']}")
        if r["reading"]:
            lines.append(f"      reading: {r['reading']}")
        if r.get("alternative"):
            alt = ", ".join(f"{k} {v}" for k, v in r["alternative"].items() if k != "reading")
            lines.append(f'      alternative ([leaderboard] reading = "alternative"): {alt}')
        if r["published"]:
            lines.append("      published: " + ", ".join(f"{k} {v:g}" for k, v in r["published"].items()))
    lines.append("data:")
    lines += [f"  {d['data']}: {d['from']}" for d in data]
    payload = {"spec": spec.name, "reading": spec.reading, "rows": rows, "data": data}
    return payload, "\n".join(lines)


def run_leaderboard_cli(args: argparse.Namespace) -> int:
    from dlmeval.protocols.care.leaderboard import report_markdown, resolve_leaderboard, run_leaderboard
    from dlmeval.protocols.care.plan import CareOptions

    spec = _spec(args)
    plan = resolve_leaderboard(spec, CareOptions(args.data_dir, args.allow_download))
    if args.plan:
        emit(args, *_plan(plan))
        return 0
    from dlmeval.models.registry import check_model_spec
    from dlmeval.store import frame_records

    for r in spec.rows:  # validate, then open
        check_model_spec(
            r.model, role="causal" if r.kind == "ar" else "diffusion", allow_download=args.allow_download
        )
    check_model_spec(spec.evaluator, role="causal", allow_download=args.allow_download)
    run_id, table = run_in_store(args, run_leaderboard, plan)
    text = report_markdown(spec, table) + f"\nleaderboard run: {run_id}"
    emit(args, {"spec": spec.name, "run": run_id, "table": frame_records(table)}, text)
    return 0
