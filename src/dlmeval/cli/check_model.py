"""`dlmeval check-model SPEC`: a one-minute self-test of a diffusion checkpoint before spending GPU-hours on it.

Loads the model the way every command does and runs :func:`dlmeval.sampling.checks.run_checks`: special ids
against the tokenizer, the logit alignment, vocabulary padding, batch and padding invariance, the gradient path
and, where the checkpoint ships its own sampler, a comparison with it. Prints a pass/fail table with the numbers
(``--json``: the rows); exit code 1 when a check fails.
"""

from __future__ import annotations

from dlmeval.cli.common import emit, model_kwargs
from dlmeval.cli.options import add_runtime_group


def register(sub) -> None:
    p = sub.add_parser(
        "check-model",
        help="self-test a diffusion checkpoint (ids, alignment, padding, gradients, sampler)",
        description=(
            "Load a diffusion model and check it: mask / EOS / pad ids against the tokenizer, the logit "
            "alignment (masked-token recovery), vocabulary padding, batch and padding invariance, the gradient "
            "path, and dlmeval's sampler against the checkpoint's own where it ships one. Exit code 1 when a "
            "check fails. Example: dlmeval check-model dream:/models/Dream-v0-Instruct-7B --trust-remote-code"
        ),
    )
    p.add_argument(
        "spec", help="diffusion model spec (see `dlmeval models`), e.g. llada:/path/to/LLaDA-8B-Base"
    )
    add_runtime_group(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import time

    from dlmeval.models import load_diffusion
    from dlmeval.models.checks import as_records
    from dlmeval.sampling.checks import run_checks

    t0 = time.perf_counter()
    model = load_diffusion(args.spec, seed=args.seed, **model_kwargs(args))
    load_s = time.perf_counter() - t0
    checks = run_checks(model, seed=args.seed)
    failed = [c.name for c in checks if c.passed is False]
    ident = model.identity()
    lines = [
        f"{args.spec}: {type(model).__name__} ({ident.family}), {ident.dtype} on {ident.device}, "
        f"vocabulary {model.vocab_size} / tokenizer {len(model.tokenizer)}, loaded in {load_s:.1f} s",
        f"{'check':<14} {'status':<6} {'value':>11}  {'threshold':<28} detail",
    ]
    for c in checks:
        v = "" if c.value is None else f"{c.value:.4g}"
        lines.append(f"{c.name:<14} {c.status:<6} {v:>11}  {c.threshold:<28} {c.detail}")
    for w in model.load_warnings:
        lines.append(f"warning: {w}")
    total = sum(c.seconds for c in checks) + load_s
    lines.append(
        f"{len(checks) - len(failed)} of {len(checks)} checks passed or skipped"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
        + f" ({total:.1f} s)"
    )
    payload = {
        "spec": args.spec,
        "model": ident.as_dict(),
        "load_seconds": load_s,
        "warnings": list(model.load_warnings),
        "checks": as_records(checks),
        "passed": not failed,
    }
    emit(args, payload, "\n".join(lines))
    return 1 if failed else 0
