"""``dlmeval robust SPEC``: a DLM and an AR model, clean and under every natural-noise condition.

SPEC is a ``.toml`` / ``.yaml`` robustness spec or the name of a shipped one (``robust-demo``, ``robust-paper``,
``robust-tiny``); see docs/robustness.md and :mod:`dlmeval.protocols.robust`. Every per-item result goes to the
run store as it is computed; rerunning the same command resumes. Tables go to the store and, as CSV and Markdown
(plus reliability diagrams), to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses

from dlmeval.cli.common import emit, run_in_store, run_lines
from dlmeval.cli.options import add_runtime_group


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "robust",
        help="robustness: DLM vs AR under 32 noise conditions, RDI/AURDI, paired tests, calibration",
        description="Run a robustness spec (or a shipped one: robust-demo, robust-paper, robust-tiny): accuracy "
        "clean and under every perturbation condition for each DLM/AR pair, RDI and AURDI, the DLM advantage "
        "rate with a paired bootstrap CI and a Wilcoxon test, calibration (ECE, selective AUROC, reliability "
        "diagrams), and the optional IPM, D-GCG and linear-probe analyses. Every item goes to the run store; a "
        "rerun resumes.",
    )
    p.add_argument("spec", metavar="SPEC", help="robustness spec (.toml/.yaml) or a shipped spec name")
    p.add_argument(
        "--out", default=None, help="directory for CSV/Markdown tables (default: robust-out/<spec name>)"
    )
    p.add_argument("--dlm", default=None, help="DLM model spec: replaces the spec's pairs by one pair")
    p.add_argument("--ar", default=None, help="AR model spec: replaces the spec's pairs by one pair")
    p.add_argument(
        "--pair",
        default=None,
        help="label of the pair --dlm / --ar replace (needed when the spec has several)",
    )
    p.add_argument(
        "--dlm-sampler",
        default=None,
        metavar="SAMPLER",
        help="the sampler the --dlm model gets: 'pair' (the replaced pair's), 'spec' ([dlm] only) or a TOML table "
        "such as '{strategy = \"entropy\", steps = 512, temperature = 0.2, top_p = 0.95}'; required when the "
        "pair sets its own sampler",
    )
    p.add_argument("--n", type=int, default=None, help="items per task (replaces the spec's values)")
    p.add_argument(
        "--conditions",
        nargs="+",
        default=None,
        metavar="KEY",
        help="perturbation keys to run (e.g. char.keyboard@0.10) instead of the spec's",
    )
    p.add_argument(
        "--perturbation-seeds",
        type=int,
        nargs="+",
        default=None,
        help="perturbation seeds (spec: usually 1 or 3)",
    )
    p.add_argument(
        "--data-dir", default=None, help="data directory (default: DLMEVAL_DATA or ../shared/data)"
    )
    p.add_argument("--plan", action="store_true", help="print what would be evaluated, run nothing")
    add_runtime_group(p, evaluators="the autoregressive models of the pairs", from_spec=True)
    p.set_defaults(func=run)


def spec_with_overrides(args):
    from dlmeval.errors import InputError
    from dlmeval.protocols.robust import load_spec, parse_spec, with_models

    spec = load_spec(args.spec)
    sampler = getattr(args, "dlm_sampler", None)
    if sampler is not None and sampler not in ("pair", "spec"):
        import tomllib

        try:
            sampler = tomllib.loads(f"s = {sampler}")["s"]
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"--dlm-sampler: not a TOML inline table: {e}") from None
    spec = with_models(spec, dlm=args.dlm, ar=args.ar, pair=getattr(args, "pair", None), sampler=sampler)
    if args.n is not None:
        if args.n < 1:
            raise InputError(f"--n must be a positive number of items, got {args.n}")
        spec = spec.replace(tasks=tuple(dataclasses.replace(t, n=args.n) for t in spec.tasks))
    if args.conditions:
        # validated exactly as in a spec file
        keys = parse_spec(
            {"tasks": {"arc_challenge": {}}, "conditions": {"keys": list(args.conditions)}}
        ).conditions
        spec = spec.replace(conditions=keys)
    if args.perturbation_seeds:
        if any(s < 0 for s in args.perturbation_seeds) or len(set(args.perturbation_seeds)) != len(
            args.perturbation_seeds
        ):
            raise InputError("--perturbation-seeds must be distinct non-negative integers")
        spec = spec.replace(perturbation_seeds=tuple(args.perturbation_seeds))
    if args.seed is not None:
        spec = spec.replace(seed=args.seed)
    return spec


def _plan(args, spec) -> int:
    """``--plan``: the spec resolved into its plan (:func:`dlmeval.protocols.robust.plan.resolve`), printed."""
    from dlmeval.protocols.robust.plan import RobustOptions, describe, resolve

    plan = resolve(spec, RobustOptions(getattr(args, "data_dir", None), args.allow_download))
    emit(args, *describe(plan))
    return 0


def run(args: argparse.Namespace) -> int:
    from dlmeval.protocols.robust import markdown, run_robust
    from dlmeval.store import frame_records

    spec = spec_with_overrides(args)
    if args.plan:
        return _plan(args, spec)
    out = args.out or f"robust-out/{spec.name}"
    # validate, then open: every model spec is checked before the store is opened (or created)
    from dlmeval.models.registry import check_model_spec

    for pair in spec.pairs:
        check_model_spec(pair.dlm, allow_download=args.allow_download)
        check_model_spec(pair.ar, role="causal", allow_download=args.allow_download)
    # the spec resolved once into the plan the run executes; sourced tasks are read before the store opens (and
    # not again by the run: the plan keeps them)
    from dlmeval.protocols.robust.plan import RobustOptions, resolve

    plan = resolve(spec, RobustOptions(getattr(args, "data_dir", None), args.allow_download))
    if any(t.source for t in spec.tasks):
        plan.identity()
    res = run_in_store(args, run_robust, plan, out)
    payload = {
        "spec": spec.name,
        "spec_run": res.spec_run,
        "model_runs": res.model_runs,
        "signature": res.signature,
        "out_dir": str(res.out_dir),
        "seconds": res.seconds,
        "warnings": res.warnings,
        "tables": {k: frame_records(v) for k, v in res.tables.items()},
    }
    text = [markdown(name, res.tables[name]) for name in ("summary", "comparison") if name in res.tables]
    if "calibration" in res.tables:
        cal = res.tables["calibration"]
        text.append(markdown("calibration", cal[cal["split"].isin(["clean", "noisy"])]))
    text.append(f"tables: {res.out_dir}/tables.md (CSV and Markdown per table, reliability diagrams)")
    text += run_lines(res, "spec", res.spec_run)
    emit(args, payload, "\n".join(text))
    return 0
