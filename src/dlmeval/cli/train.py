"""``dlmeval train``: DiffScore-FT, LoRA fine-tuning of a diffusion LM by masked diffusion on source/target pairs.

    dlmeval train --model SPEC --data pairs.jsonl --out DIR [--rank 16 --alpha 32 --dropout 0.05 ...]
    dlmeval score --model SPEC --adapter DIR ...

Writes a PEFT adapter directory (``adapter_config.json``, ``adapter_model.safetensors``) and ``dlmeval_train.json``
(the settings, the layout, the data digest, the loss per step). Defaults are the paper's LoRA (r = 16, alpha = 32,
dropout 0.05, chat template when the model has one); see :mod:`dlmeval.train.finetune` and docs/diffscore.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlmeval.cli.common import emit, model_kwargs
from dlmeval.cli.options import add_model_args, add_runtime_group
from dlmeval.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    from dlmeval.train.finetune import FinetuneConfig

    d = FinetuneConfig()
    p = subparsers.add_parser(
        "train",
        help="DiffScore-FT: LoRA fine-tuning of a diffusion LM on source/target pairs (writes a PEFT adapter)",
        description="Fine-tune a diffusion LM with LoRA (peft) by masked diffusion on (source, target) pairs: "
        "the pair is laid out as DiffScore's cond direction scores it and only target tokens are masked and "
        "predicted. Writes a PEFT adapter that `dlmeval score --adapter DIR` and `meta-eval --ft-adapter DIR` "
        "load. Training data: .jsonl (objects with 'source' and 'target'), .parquet or .csv / .tsv (columns "
        "'source' and 'target').",
    )
    add_model_args(p)
    p.add_argument(
        "--data", required=True, metavar="FILE", help="training pairs: .jsonl, .parquet, .csv or .tsv"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="adapter directory to write")
    g = p.add_argument_group("LoRA (defaults: the paper's)")
    g.add_argument("--rank", "-r", type=int, default=d.rank, help=f"LoRA rank (default {d.rank})")
    g.add_argument("--alpha", type=float, default=d.alpha, help=f"LoRA alpha (default {d.alpha:g})")
    g.add_argument("--dropout", type=float, default=d.dropout, help=f"LoRA dropout (default {d.dropout})")
    g.add_argument(
        "--target-modules",
        nargs="+",
        default=None,
        metavar="NAME",
        help="module names to adapt (default: the attention query/key/value projections, e.g. "
        "query key value for BERT-style models, q_proj k_proj v_proj for LLaDA / Dream)",
    )
    o = p.add_argument_group("optimisation")
    o.add_argument("--steps", type=int, default=d.steps, help=f"optimizer steps (default {d.steps})")
    o.add_argument(
        "--batch-size", type=int, default=d.batch_size, help=f"pairs per micro-batch ({d.batch_size})"
    )
    o.add_argument("--grad-accum", type=int, default=d.grad_accum, help="micro-batches per step (default 1)")
    o.add_argument("--lr", type=float, default=d.lr, help=f"peak learning rate (default {d.lr:g})")
    o.add_argument(
        "--warmup-ratio", type=float, default=d.warmup_ratio, help="warmup share of the steps (default 0.1)"
    )
    o.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="tokens per row (default: the model's window, the scorer's layout exactly; shorter cuts the "
        "source from its end first)",
    )
    o.add_argument(
        "--weighting",
        default=d.weighting,
        choices=("elbo", "mean"),
        help="elbo (default: CE / t per target token, the LLaDA SFT loss) or mean over hidden tokens",
    )
    lay = p.add_argument_group("layout (the same as the scorer's)")
    ch = lay.add_mutually_exclusive_group()
    ch.add_argument(
        "--chat-template",
        dest="chat",
        action="store_const",
        const=True,
        default=None,
        help="use the model's chat template (default: when the model has one, as the paper)",
    )
    ch.add_argument("--no-chat-template", dest="chat", action="store_const", const=False, help="do not")
    lay.add_argument(
        "--prompt",
        default=None,
        help="prompt template around the source (a name or a text with {source}); default: the source as is",
    )
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )
    add_runtime_group(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlmeval.models import load_diffusion
    from dlmeval.train.finetune import FinetuneConfig, finetune, read_pairs

    cfg = FinetuneConfig(
        rank=args.rank,
        alpha=args.alpha,
        dropout=args.dropout,
        target_modules=tuple(args.target_modules) if args.target_modules else None,
        steps=args.steps,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        lr=args.lr,
        warmup_ratio=args.warmup_ratio,
        max_length=args.max_length,
        chat=args.chat,
        prompt=args.prompt,
        weighting=args.weighting,
        seed=args.seed,
    )
    cfg.check()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; pass a directory for the adapter")
    if (out / "adapter_config.json").exists():
        raise InputError(f"--out {out} already holds an adapter; remove it or pick another directory")
    pairs = read_pairs(args.data)  # before the model loads: a bad file fails fast
    model = load_diffusion(args.model, seed=args.seed, **model_kwargs(args))
    quiet = getattr(args, "json", False)
    info = finetune(
        model,
        pairs,
        cfg,
        out,
        progress=not getattr(args, "no_progress", False),
        log=None if quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
        extra={"command_line": " ".join(["dlmeval", *sys.argv[1:]])},
    )
    hist = info.settings["history"]
    payload = {
        "adapter": info.path,
        "sha256": info.sha256,
        "pairs": len(pairs),
        "steps": cfg.steps,
        "layout": info.settings["layout"],
        "first_loss": hist[0]["loss"] if hist else None,
        "last_loss": hist[-1]["loss"] if hist else None,
    }
    text = (
        f"adapter: {info.path}\nsha256: {info.sha256[:16]}\npairs: {len(pairs)}, steps: {cfg.steps}, "
        f"layout: chat={info.settings['layout']['chat']}\n"
        f"loss: {payload['first_loss']:.4f} (step 1) -> {payload['last_loss']:.4f} (step {cfg.steps})\n"
        f"score with: dlmeval score --model {args.model} --adapter {out} ..."
    )
    emit(args, payload, text)
    return 0
