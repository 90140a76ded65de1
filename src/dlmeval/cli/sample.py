"""``dlmeval sample``: generate with the remasking sampler, printing each generation with its actual NFE.

Examples::

    dlmeval sample --model default --prompt "The river" --length 64 --steps 64 --strategy low_confidence
    dlmeval sample --prompts prompts.txt --nfe 96 --strategy high_entropy --temperature 0.25 --block-length 32
    dlmeval sample --model tiny-llada --prompt "" -n 4 --json          # four unconditional samples

``--nfe N`` is the compute-matched mode: the nominal steps are chosen so that the strategy spends ``N`` forward
passes per sample (or, if it cannot, the largest count below ``N``; the output says which). Every sample is printed
with the settings and a run signature (model identity + configuration). The samples are recorded in the run store
(``--store``; kind ``sample``, one record per sample with its prompt and text) unless ``--no-store``: ``dlmeval runs
list`` shows the run, ``dlmeval runs export RUN`` gives the texts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlmeval.cli.common import command_line, emit, model_kwargs
from dlmeval.cli.options import add_batching_args, add_model_args, add_runtime_group, capped_batch
from dlmeval.errors import InputError
from dlmeval.parallel import current

# the sampler's strategies, spelled out so that building the parser imports no torch (a test checks they match
# dlmeval.sampling.strategies.STRATEGIES)
STRATEGY_CHOICES = (
    "none",
    "random",
    "low_confidence",
    "running_confidence",
    "high_entropy",
    "conf_entropy",
    "agreement",
    "origin",
    "entropy",
    "maskgit",
    "topk_margin",
)


def strategy_choices() -> tuple[str, ...]:
    """:data:`STRATEGY_CHOICES` and any a plugin registered (a plugin that registers one imported the registry)."""
    mod = sys.modules.get("dlmeval.sampling.strategies")
    extra = [n for n in (mod.STRATEGIES.names() if mod else ()) if n not in STRATEGY_CHOICES]
    return (*STRATEGY_CHOICES, *extra)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sample",
        help="generate text with the remasking sampler (actual NFE counted)",
        description="Masked diffusion generation with a remasking strategy. Prints each generation with the "
        "forward passes it took (NFE), the settings, and a run signature.",
    )
    add_model_args(p)
    src = p.add_argument_group("prompts")
    src.add_argument(
        "--prompt",
        action="append",
        default=None,
        help="a prompt (repeatable; '' for unconditional generation)",
    )
    src.add_argument("--prompts", metavar="FILE", default=None, help="a text file, one prompt per line")
    src.add_argument(
        "-n",
        "--num-samples",
        type=int,
        default=1,
        help="samples per prompt, each with its own seed (default 1)",
    )
    g = p.add_argument_group("sampler")
    g.add_argument("--length", type=int, default=64, help="tokens to generate (default 64)")
    budget = g.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="nominal steps (default: --length)")
    budget.add_argument(
        "--nfe",
        type=int,
        default=None,
        help="compute-matched: pick the steps so the strategy spends N passes",
    )
    g.add_argument(
        "--strategy", choices=strategy_choices(), default="none", help="remasking strategy (default none)"
    )
    g.add_argument(
        "--remask-fraction",
        type=float,
        default=0.15,
        help="re-masking strategies: share of the block's decided tokens re-masked per step (default 0.15)",
    )
    g.add_argument(
        "--temperature", type=float, default=0.0, help="unmask temperature (0 = argmax; default 0)"
    )
    g.add_argument(
        "--position-temperature",
        type=float,
        default=0.0,
        help="Dream's alg_temp: draw the positions to unmask instead of ranking them (default 0)",
    )
    g.add_argument(
        "--block-length", type=int, default=None, help="semi-autoregressive block length (default: --length)"
    )
    g.add_argument("--suppress-eos", action="store_true", help="never generate EOS/EoT ids")
    g.add_argument(
        "--eos-rank-last",
        action="store_true",
        help="keep EOS/EoT but unmask it after every other position of the block (LLaDA App. B.4)",
    )
    g.add_argument(
        "--schedule",
        choices=["linear", "dream"],
        default=None,
        help="tokens decoded per step: linear (LLaDA's get_num_transfer_tokens) or dream (Dream's "
        "diffusion_generate); default: the model family's own (dream for Dream checkpoints)",
    )
    g.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="nucleus filtering of the sampling distribution (Dream's top_p)",
    )
    g.add_argument(
        "--accounting",
        choices=["paper", "refill"],
        default="paper",
        help="paper (default): re-masked tokens are decoded again with real forward passes (Care's actual "
        "NFE); refill: one pass per nominal step, re-masked tokens refilled inside the budget",
    )
    g.add_argument(
        "--no-stop-at-eos", action="store_true", help="run every step even after a sample's text has ended"
    )
    add_batching_args(g, "sampling", batch_size=16, default_help="default 16")
    add_runtime_group(p)
    p.add_argument("--no-store", action="store_true", help="do not record the run in the run store")
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )
    p.add_argument("--store", default=argparse.SUPPRESS, help="run store (SQLite file)")
    p.set_defaults(func=run)


def _read_prompts(args) -> list[str]:
    prompts = list(args.prompt or [])
    if args.prompts:
        path = Path(args.prompts)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise InputError(f"cannot read prompts from {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path} is not UTF-8 text; give one prompt per line") from None
        prompts += [line for line in lines if line.strip()]
        if not any(line.strip() for line in lines):
            raise InputError(f"{path} holds no prompts (one prompt per non-blank line)")
    if not prompts:
        raise InputError("give --prompt TEXT (repeatable; '' for unconditional) or --prompts FILE")
    return prompts


def run(args: argparse.Namespace) -> int:
    from dlmeval.models.registry import load_diffusion
    from dlmeval.protocols.sample import run_config as sample_run_config
    from dlmeval.protocols.sample import sample_prompts, store_samples
    from dlmeval.sampling import RemaskingSampler, SamplerConfig
    from dlmeval.store.signature import Signature

    prompts = _read_prompts(args)
    if args.num_samples < 1:
        raise InputError(f"--num-samples must be >= 1, got {args.num_samples}")
    store_path = None
    if not args.no_store and current().is_main:
        from dlmeval.store.access import check_writable_store

        # checked before the model loads: a store that cannot be written fails now, not after the sampling
        store_path = check_writable_store(getattr(args, "store", None))
    steps = args.steps if args.steps is not None or args.nfe is not None else args.length
    cfg = SamplerConfig(
        length=args.length,
        steps=steps,
        nfe=args.nfe,
        block_length=args.block_length,
        strategy=args.strategy,
        remask_fraction=args.remask_fraction,
        temperature=args.temperature,
        position_temperature=args.position_temperature,
        suppress_eos=args.suppress_eos,
        eos_rank_last=args.eos_rank_last,
        stop_at_eos=not args.no_stop_at_eos,
        seed=args.seed,
        accounting=args.accounting,
        schedule=args.schedule,
        top_p=args.top_p,
    )
    model = load_diffusion(args.model, seed=args.seed, **model_kwargs(args))
    sampler = RemaskingSampler(model, cfg)
    n = args.num_samples
    items = [(i, k) for i in range(len(prompts)) for k in range(n)]
    item_ids = [str(i) if n == 1 else f"{i}:{k}" for i, k in items]
    batch_size = args.batch_size
    if args.max_tokens is not None:
        width = max(len(sampler.encode_prompt(p)) for p in prompts) + args.length
        batch_size = capped_batch(batch_size, args.max_tokens, width)
    # data parallel (torchrun): each rank samples its share of the batches one process forms (protocols.sample)
    got = sample_prompts(sampler, [prompts[i] for i, _ in items], item_ids, batch_size=batch_size)
    records, config, nfe_predicted = got.records, got.config, got.nfe_predicted
    nfe_all = [r["nfe"] for r in records]
    for rec, (i, _) in zip(records, items):
        rec["prompt"] = prompts[i]
    # named by the sampler's settings, the prompts and the batching (protocols.sample.run_config)
    run_config = sample_run_config(got, prompts, num_samples=n, batch_size=batch_size)
    sig = Signature.create("sample", run_config, [model], seed=cfg.seed)
    if store_path is not None and current().is_main:  # every rank holds every record; rank 0 writes them
        from dlmeval.store import RunStore

        with RunStore(store_path) as store:
            run_obj = store_samples(
                store,
                records,
                run_config,
                model,
                cfg.seed,
                command_line=command_line(args),
            )
            sig = run_obj.signature  # what is printed is what is stored (issue 32)
    payload = {
        "signature": sig.short(),
        "run_id": sig.run_id,
        "stored": store_path is not None,
        "model": model.identity().as_dict(),
        "config": config,
        "nfe_predicted": nfe_predicted,
        "samples": records,
    }
    lines = []
    for rec in records:
        stop = ", stopped at EOS" if rec["stopped_at_eos"] else ""
        lines.append(f"[{rec['item_id']}] nfe={rec['nfe']} steps={rec['steps_taken']}{stop}")
        lines.append(f"  prompt: {rec['prompt']!r}")
        lines.append(f"  output: {rec['text']!r}")
    lines.append(
        "settings: " + " ".join(f"{k}={v}" for k, v in config.items() if k not in ("nfe",) or v is not None)
    )
    if args.nfe is not None:
        reached = sorted(set(nfe_all))
        note = "" if reached == [args.nfe] else f" (not reachable with {cfg.strategy}; reached {reached})"
        lines.append(f"compute-matched: target nfe={args.nfe}, nominal steps={config['steps']}{note}")
    if store_path is not None:
        lines.append(f"run: {sig.run_id} (dlmeval runs export {sig.run_id} gives the texts)")
    lines.append(f"signature: {sig.short()}")
    emit(args, payload, "\n".join(lines))
    return 0
