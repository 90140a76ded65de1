"""The option groups the commands share, each flag declared once (#24).

==========================  ===================================================================================
group                       flags (commands)
==========================  ===================================================================================
:func:`add_model_args`      ``--model`` (score, sample, train, meta-eval)
:func:`add_runtime_group`   ``--device`` [``--evaluator-device``], ``--dtype``, ``--trust-remote-code``,
                            ``--allow-download``, ``--threads``, ``--seed`` (score, sample, care, robust,
                            meta-eval, train, check-model, demo, leaderboard verify); :func:`add_seed_arg` alone:
                            perturb
:func:`add_code_change_arg` ``--allow-code-change`` (global)
:func:`add_estimator_group` ``--preset``, ``--fast``, ``--masks/-K``, ``--rates/-T``, ``--scheme``,
                            ``--weighting`` (score, meta-eval); choices from :mod:`dlmeval.scoring.names`
:func:`add_batching_args`   ``--batch-size``, ``--max-tokens`` for DiffScore's forward passes (score, meta-eval)
                            or for generation (sample, care)
:func:`add_shard_arg`       ``--shard I/N``: an independent job's part of the work (care)
==========================  ===================================================================================

A command passes only what truly differs: whether ``--seed`` replaces a spec's seed (care, robust: default None)
or is the run seed (default 0), which evaluator models ``--evaluator-device`` places, a generation batch's default.
The parsed values go to the code through one function each: :func:`dlmeval.cli.common.model_kwargs` (runtime),
:func:`estimator_settings` (estimator). ``train``'s ``--batch-size`` (pairs per micro-batch) and ``--weighting``
(the training loss) are other settings under the same names and stay with ``train``. A meta-eval metric family's
options are declared by the family (:class:`dlmeval.protocols.diffscore.meta_eval.families.FamilyOption`).

Nothing here imports numpy or torch at import time: ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from dlmeval.errors import InputError

DEVICE_HELP = (
    "cpu, cuda, cuda:1, or auto (default; cuda:LOCAL_RANK under torchrun); map[:auto|balanced|sequential] "
    "spreads one model over all visible devices (accelerate's big-model inference)"
)
RUN_SEED_HELP = "run seed (default 0; every draw derives from it and the item id)"
SPEC_SEED_HELP = "run seed (replaces the spec's seed)"


def add_model_args(
    p, *, default: str = "default", flag: str = "--model", help_kind: str = "diffusion"
) -> None:
    p.add_argument(
        flag, default=default, help=f"{help_kind} model spec (see `dlmeval models`); default: {default}"
    )


def add_seed_arg(g, *, from_spec: bool = False) -> None:
    """``--seed``: the run seed (default 0), or, for a command run from a spec (``from_spec``), a seed that
    replaces the spec's (default None: the spec's)."""
    g.add_argument(
        "--seed",
        type=int,
        default=None if from_spec else 0,
        help=SPEC_SEED_HELP if from_spec else RUN_SEED_HELP,
    )


def add_runtime_group(
    p, *, evaluators: str | None = None, from_spec: bool = False
) -> argparse._ArgumentGroup:
    """The "runtime" group: where and how models load, and the seed. ``evaluators`` (what they are, for the
    help) adds ``--evaluator-device`` for a command's evaluator models; ``from_spec``: ``--seed`` replaces a
    spec's seed (:func:`add_seed_arg`)."""
    g = p.add_argument_group("runtime")
    g.add_argument("--device", default="auto", help=DEVICE_HELP)
    if evaluators is not None:
        g.add_argument(
            "--evaluator-device",
            default=None,
            metavar="DEVICE",
            help=f"device of {evaluators} (default: --device); e.g. cuda:1 keeps them off the evaluated model's "
            "GPU",
        )
    g.add_argument("--dtype", default="auto", help="float32, bfloat16, float16, or auto (float32 on CPU)")
    g.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow model code shipped with checkpoints (LLaDA, Dream); off by default",
    )
    g.add_argument(
        "--allow-download",
        action="store_true",
        help="allow fetching models from the Hugging Face hub (needs internet); off by default",
    )
    g.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch intra-op threads (default: torch's choice, from OMP_NUM_THREADS or the cores); part of the run "
        "id: another thread count can move scores in the last bits",
    )
    add_seed_arg(g, from_spec=from_spec)
    return g


def add_code_change_arg(p) -> None:
    """``--allow-code-change`` (a global flag): resume a run that other code made (the run records it)."""
    p.add_argument(
        "--allow-code-change",
        action="store_true",
        help="resume a run made by other dlmeval code (another version or source digest); refused otherwise, "
        "since its results would mix two code versions; the run records it",
    )


def apply_threads(args) -> None:
    """``--threads N``: torch's intra-op thread count for the command (checked: at least 1)."""
    n = getattr(args, "threads", None)
    if n is None:
        return
    if n < 1:
        raise InputError(f"--threads must be at least 1, got {n}")
    import torch

    torch.set_num_threads(n)


def add_estimator_group(p) -> argparse._ArgumentGroup:
    """The "DiffScore estimator" group of ``score`` and ``meta-eval``: a preset and the settings that replace its
    values (:func:`estimator_settings` reads them back). The choices are :mod:`dlmeval.scoring.names`'."""
    from dlmeval.scoring.names import PRESET_NAMES, SCHEMES, WEIGHTINGS

    g = p.add_argument_group("DiffScore estimator")
    g.add_argument(
        "--preset",
        default=None,
        choices=PRESET_NAMES,
        help="estimator preset: standard (default: K=20, T=10, combined masks, MLP), fast (K=5, T=5), paper (the "
        "paper's estimator: K=20, T=10, independent Bernoulli masks, MLP), paper-fast (its DiffScore-Fast); "
        "-K, -T, --scheme, --weighting replace the preset's value",
    )
    g.add_argument(
        "--fast",
        action="store_true",
        help="the preset's Fast variant (DiffScore-Fast): K=5 masks over T=5 rates",
    )
    g.add_argument(
        "--masks",
        "-K",
        type=int,
        default=None,
        help="masking patterns per text (default: the preset's, 20; 5 with --fast)",
    )
    g.add_argument(
        "--rates",
        "-T",
        type=int,
        default=None,
        help="masking rates t_k = k/T (default: the preset's, 10; 5 with --fast)",
    )
    g.add_argument(
        "--scheme",
        default=None,
        choices=SCHEMES,
        help="combined (default: an exact t=1 pass, stratified tiled (rate, size) draws and a control variate; the "
        "paper's expectation at 0.3-0.45 of its variance), independent (the paper's "
        "Bernoulli masks), balanced (the former default), exact-count (round(t L) tokens per mask, another "
        "estimand), pll (exact: every single-token mask); reuse, stratified, antithetic, control, importance: "
        "one tool each (dlmeval.scoring.stratified)",
    )
    g.add_argument(
        "--weighting",
        default=None,
        choices=WEIGHTINGS,
        help="mlp (default: 1/|M|, mean log-prob), elbo (the paper's strict 1/t: the sequence ELBO), elbo_norm "
        "(1/(t L): the ELBO per token)",
    )
    return g


def estimator_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The estimator flags as the keywords of :func:`dlmeval.scoring.spec.resolve_estimator` (and the same-named
    fields of ``SuiteOptions``): None where a flag is not given (the preset's value)."""
    return {
        "preset": args.preset,
        "fast": args.fast,
        "n_masks": args.masks,
        "n_rates": args.rates,
        "scheme": args.scheme,
        "weighting": args.weighting,
    }


_BATCHING = {
    # DiffScore's forward passes (score, meta-eval): the batch shape can move a score's last float bits
    "scoring": (
        "rows per DiffScore forward pass; part of the run signature: it can change a score's last bits (float "
        "rounding: at most 8.3e-7 over 300 texts on the CPU, benchmarks/bench_score_identity.py), never with the "
        "number of ranks or a resume",
        "padded tokens per DiffScore forward pass (default 2,048 on a CPU, 65,536 on a GPU; part of the run "
        "signature, as --batch-size)",
    ),
    # generation (sample, care): a padded batch can move a logit's last bits, so a near-tie could flip a token
    "sampling": (
        "samples per forward pass; part of the run signature: a padded row's logits move in the last bits with "
        "its batch (no sample changed on the CPU: benchmarks/bench_batch_bits.py), never with the number of ranks "
        "or a resume",
        "padded tokens per forward pass (prompt + generated tokens per row): caps --batch-size so a batch's "
        "logits fit the device (part of the run signature, as --batch-size)",
    ),
}


def add_batching_args(g, kind: str, *, batch_size: int | None = None, default_help: str = "") -> None:
    """``--batch-size`` and ``--max-tokens`` of ``kind`` "scoring" (DiffScore) or "sampling" (generation);
    ``batch_size`` is the default (None: the scorer's or the spec's), ``default_help`` says so ("default 16")."""
    rows, tokens = _BATCHING[kind]
    g.add_argument(
        "--batch-size",
        type=int,
        default=batch_size,
        help=rows + (f"; {default_help}" if default_help else ""),
    )
    g.add_argument("--max-tokens", type=int, default=None, help=tokens)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N`` (None stays None)."""
    if text is None:
        return None
    i, sep, n = str(text).partition("/")
    try:
        if not sep:
            raise ValueError
        shard = (int(i), int(n))
    except ValueError:
        raise InputError(f"--shard takes I/N (part I of N, from 0), e.g. 0/4; got {text!r}") from None
    if shard[1] < 1 or not 0 <= shard[0] < shard[1]:
        raise InputError(f"--shard {text}: I must be in 0..N-1 and N at least 1, e.g. 0/4")
    return shard


def add_shard_arg(g) -> None:
    g.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="compute only part I of N of the generations (independent jobs, e.g. a SLURM array, each with its "
        "own store): export each job's runs with `runs export --bundle`, import them into one store, then rerun "
        "without --shard there for the summaries and tables",
    )


def capped_batch(batch_size: int, max_tokens: int | None, width: int) -> int:
    """``batch_size`` lowered so that rows of ``width`` padded tokens fit ``--max-tokens`` (at least one row)."""
    if max_tokens is None:
        return batch_size
    if max_tokens < 1:
        raise InputError(f"--max-tokens must be positive, got {max_tokens}")
    return max(1, min(batch_size, max_tokens // width))
