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
    from dlmeval.protocols.published import plan_lines as published_lines
    from dlmeval.protocols.published import plan_records
    from dlmeval.protocols.robust import model_entries, plan
    from dlmeval.protocols.robust.evaluate import clean_seeds
    from dlmeval.protocols.robust.readings import analyses as plan_analyses
    from dlmeval.protocols.robust.readings import paper_tables
    from dlmeval.protocols.robust.readings import readings as plan_readings
    from dlmeval.protocols.robust.tables import recipe_table
    from dlmeval.store import frame_records

    entries, _ = model_entries(spec)
    cells = plan(spec)
    per_model = sum(spec.task(t).n for t, _, _, _ in cells)
    rows = []
    for t in spec.tasks:
        gen, steps = t.budget()
        if any(spec.sampler_for(p).steps for p in spec.pairs):
            steps = "per pair (recipe)"  # a pair's sampler sets the steps
        rows.append(
            {
                "task": t.name,
                "n": t.n,
                "modes": list(t.modes),
                "gen_tokens": gen,
                "steps": steps,
                "ar_max_new_tokens": t.ar_tokens,
                "data": t.source or t.path or "shipped stand-in",
                "evaluations_per_model_and_mode": t.n
                * (len(clean_seeds(spec)) + len(spec.conditions) * len(spec.perturbation_seeds)),
            }
        )
    payload = {
        "spec": spec.name,
        "pairs": [{"dlm": p.dlm, "ar": p.ar, "label": p.name} for p in spec.pairs],
        "models": [{"label": e.label, "role": e.role} for e in entries],
        "conditions": list(spec.conditions),
        "perturbation_seeds": list(spec.perturbation_seeds),
        "tasks": rows,
        "item_evaluations_per_model": per_model,
        "item_evaluations_total": per_model * len(entries),
        "probes": {k: getattr(spec, k).enabled for k in ("ipm", "dgcg", "probes")},
        "analyses": plan_analyses(spec),
        "readings": plan_readings(spec),
        "recipe": frame_records(recipe_table(spec)),
        "paper_tables": paper_tables(spec),
        "published": plan_records(spec.published),
    }
    lines = [
        f"spec {spec.name}: {len(spec.pairs)} pair(s), {len(entries)} model(s), {len(spec.conditions)} conditions "
        f"x {len(spec.perturbation_seeds)} perturbation seed(s) + clean"
    ]
    for r in rows:
        lines.append(
            f"  {r['task']}: n={r['n']} modes={','.join(r['modes'])} gen_tokens={r['gen_tokens']} "
            f"steps={r['steps']} ar_max_new_tokens={r['ar_max_new_tokens']} data={r['data']}: "
            f"{r['evaluations_per_model_and_mode']} item evaluations per model and mode"
        )
    lines.append(f"item evaluations in all: {payload['item_evaluations_total']}")
    for r in recipe_table(spec).to_dict("records"):
        if r["role"] == "dlm":
            lines.append(
                f"  recipe {r['pair']} / {r['task']}: {r['model']} {r['strategy']} steps={r['steps']} "
                f"block={r['block_length']} temperature={r['temperature']} top_p={r['top_p']} eos={r['eos']} "
                f"(applied: {r['applied']})"
            )
    lines.append("analyses:" if payload["analyses"] else "analyses: none")
    for a in payload["analyses"]:
        lines.append(
            f"  {a['analysis']} ({a['title']}): models {', '.join(a['models']) or 'none of this role'}; tasks "
            f"{', '.join(a['tasks'])}; n={a['n']}; conditions {', '.join(a['conditions']) or 'clean only'}; cost: {a['cost']}"
        )
    lines.append("readings:")
    lines += [f"  {k}: {v}" for k, v in payload["readings"].items()]
    lines.append("the paper's tables each part fills:")
    lines += [f"  {r['table']:<26} {r['paper']}" for r in payload["paper_tables"]]
    lines += published_lines(spec.published)
    emit(args, payload, "\n".join(lines))
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
    if any(t.source for t in spec.tasks):  # sourced tasks are read before the store opens
        from dlmeval.protocols.robust.evaluate import Data

        sources = {t.name: t.data_source() for t in spec.tasks}
        Data(getattr(args, "data_dir", None), sources=sources, allow_download=args.allow_download).identity(
            spec
        )
    res = run_in_store(args, run_robust, spec, out)
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
