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


def run_leaderboard_cli(args: argparse.Namespace) -> int:
    from dlmeval.protocols.care.leaderboard import paper_table_markdown, plan_rows, run_leaderboard

    spec = _spec(args)
    if args.plan:
        rows = plan_rows(spec)
        lines = [f"leaderboard {spec.name}: {len(rows)} rows at {spec.steps} nominal steps"]
        for r in rows:
            nfe = f"NFE/sample {r['nfe_baseline']}" + (
                f" / {r['nfe_strategy']}" if r["nfe_strategy"] is not None else ""
            )
            lines.append(
                f"  tier {str(r['tier']):<9} {r['model']:<26} {r['sampler']:<40} t={r['temperature']:<5g} {nfe}"
            )
        emit(args, {"spec": spec.name, "rows": rows}, "\n".join(lines))
        return 0
    from dlmeval.models.registry import check_model_spec
    from dlmeval.store import frame_records

    for r in spec.rows:  # validate, then open
        check_model_spec(
            r.model, role="causal" if r.kind == "ar" else "diffusion", allow_download=args.allow_download
        )
    check_model_spec(spec.evaluator, role="causal", allow_download=args.allow_download)
    run_id, table = run_in_store(args, run_leaderboard, spec)
    text = paper_table_markdown(table) + f"\nleaderboard run: {run_id}"
    emit(args, {"spec": spec.name, "run": run_id, "table": frame_records(table)}, text)
    return 0
