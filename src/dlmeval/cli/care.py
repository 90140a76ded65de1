"""``dlmeval care SPEC``: run (or resume) a Care sweep and write its tables.

SPEC is a ``.toml`` / ``.yaml`` sweep spec or the name of a shipped one (``care-demo``, ``care-paper``,
``care-tiny``); see docs/care.md and :mod:`dlmeval.protocols.care.spec`. Rerunning the same command resumes: finished
generations and cells are read back from the store.
"""

from __future__ import annotations

import argparse

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


def _plan(args, spec) -> int:
    """``--plan``: the spec resolved into its plan (:func:`dlmeval.protocols.care.plan.resolve`), printed."""
    from dlmeval.protocols.care.plan import CareOptions, describe, resolve

    plan = resolve(spec, CareOptions(args.data_dir, args.allow_download))
    emit(args, *describe(plan))
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
    # the spec resolved once into the plan the run executes; every corpus and task read from a source is read (and
    # downloaded, with --allow-download) before the store opens
    from dlmeval.protocols.care.plan import CareOptions, resolve

    plan = resolve(spec, CareOptions(args.data_dir, args.allow_download))
    plan.data_identity()
    shard = parse_shard(getattr(args, "shard", None))
    if shard is not None:
        import functools

        res = run_in_store(args, functools.partial(run_care, shard=shard), plan, out)
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
    res = run_in_store(args, run_care, plan, out)
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
