"""GPU check at the papers' shapes: LLaDA-8B- and Dream-7B-shaped models with random weights (no download), in
bfloat16 with the batching defaults; DiffScore items/s, sampler tokens/s, peak memory; and the data-parallel path on
every visible GPU. Prints one table. Run by ``benchmarks/gpu_check.sh`` (at most about 8 minutes on one H100/H200).

The models are dlmeval's family stand-ins (``models/standins.py``: LLaDA's and Dream's forward signatures, mask
semantics and tokenizer kinds) with the real checkpoints' configs: LLaDA-8B (d_model 4096, 32 layers, 32 heads,
MLP 12288, vocabulary 126,464) and Dream-7B = Qwen2.5-7B (hidden 3584, 28 layers, 28 heads / 4 KV heads, MLP
18944, vocabulary 152,064). They load through the families' own loaders (``load_llada`` / ``load_dream``) with
``random_init``, so the path is the one a real checkpoint takes, minus reading weights. The tokenizer is the
stand-in's small one, so texts are drawn from its words; a position costs the same whatever its token.

    python benchmarks/gpu_check.py            # on a GPU machine
    python benchmarks/gpu_check.py --smoke    # tiny shapes on the CPU: checks the script itself (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from dlmeval.models.dream import load_dream
from dlmeval.models.llada import load_llada
from dlmeval.models.standins import standin_checkpoint
from dlmeval.models.tiny import TINY_WORDS
from dlmeval.sampling import RemaskingSampler, SamplerConfig
from dlmeval.scoring import DiffScorer

SHAPES = {
    "llada-8b": (
        "llada",
        dict(
            d_model=4096,
            n_heads=32,
            n_kv_heads=32,
            n_layers=32,
            mlp_hidden_size=12288,
            vocab_size=126464,
            embedding_size=126464,
            max_sequence_length=4096,
        ),
    ),
    "dream-7b": (
        "dream",
        dict(
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            vocab_size=152064,
            max_position_embeddings=32768,
        ),
    ),
}
SMOKE = {
    "llada": dict(d_model=64, n_heads=4, n_kv_heads=4, n_layers=2, mlp_hidden_size=128),
    "dream": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4),
}


def shaped_dir(kind: str, dims: dict, root: Path) -> Path:
    """The stand-in's code and tokenizer with the big config, and no weights."""
    src = standin_checkpoint(kind)
    out = root / f"{kind}-shaped"
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(dims)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    return out


def texts(n: int, words: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(TINY_WORDS, size=words)) for _ in range(n)]


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def measure(name: str, kind: str, path: Path, dev: str, args) -> dict:
    loader = load_llada if kind == "llada" else load_dream
    t0 = time.perf_counter()
    model = loader(str(path), device=dev, dtype=args.dtype, trust_remote_code=True, random_init=0, name=name)
    d = model.device
    sync(d)
    load_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.module.parameters())
    if d.type == "cuda":
        torch.cuda.reset_peak_memory_stats(d)
    # DiffScore, the paper's standard estimator (K = 20 masks over T = 10 rates), conditional on a source
    src, hyp = texts(args.items, args.src_words, 1), texts(args.items, args.hyp_words, 2)
    scorer = DiffScorer(model, n_masks=args.masks, n_rates=args.rates)
    scorer.score(hyp[:2], src[:2], config="cond")  # warm-up (kernels, allocator)
    sync(d)
    t0 = time.perf_counter()
    scorer.score(hyp, src, config="cond")
    sync(d)
    score_s = time.perf_counter() - t0
    # the Care sampler at the paper's shape: L = 128, 128 steps, blocks of 32, high_entropy re-masking
    block = min(32, args.length)
    cfg = SamplerConfig(length=args.length, steps=args.steps, block_length=block, strategy="high_entropy")
    sampler = RemaskingSampler(model, cfg)
    prompts = texts(args.prompts, 24, 3)
    sampler.sample(prompts[:2], batch_size=2)  # warm-up
    sync(d)
    t0 = time.perf_counter()
    res = sampler.sample(prompts, batch_size=args.prompts)
    sync(d)
    sample_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(d) / 2**30 if d.type == "cuda" else float("nan")
    row = {
        "model": name,
        "params_B": round(params / 1e9, 2),
        "load_s": round(load_s, 1),
        "diffscore_items_per_s": round(args.items / score_s, 3),
        "diffscore_setting": f"cond K={args.masks} T={args.rates}, src {args.src_words} / hyp {args.hyp_words} words",
        "sampler_tokens_per_s": round(args.prompts * args.length / sample_s, 1),
        "sampler_setting": f"L={args.length} steps={args.steps} block={block} high_entropy batch={args.prompts}",
        "nfe_per_sample": int(np.max(res.nfe)),
        "peak_mem_GiB": round(peak, 1),
    }
    del model, scorer, sampler
    if d.type == "cuda":
        torch.cuda.empty_cache()
    return row


def data_parallel(n: int, dev: str, tmp: Path) -> dict:
    """``dlmeval score`` on ``n`` ranks (torchrun, one GPU each) against one process: same records."""
    cands = tmp / "c.txt"
    cands.write_text("\n".join(texts(32, 30, 4)) + "\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = {}
    for world in (1, n):
        pre = [sys.executable, "-m", "dlmeval"]
        if world > 1:
            pre = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
            pre += ["-m", "dlmeval"]
        cmd = [*pre, "--json", "--store", str(tmp / f"dp{world}.sqlite"), "score", "--model", "tiny-llada"]
        cmd += ["--config", "marginal", "--candidates", str(cands), "--device", dev]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        if r.returncode != 0:
            return {"world": world, "error": r.stderr[-500:]}
        out[world] = ([x["score"] for x in json.loads(r.stdout)["items"]], time.perf_counter() - t0)
    return {
        "ranks": n,
        "identical": out[1][0] == out[n][0],
        "wall_1": round(out[1][1], 1),
        f"wall_{n}": round(out[n][1], 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (checks the script)")
    p.add_argument("--only", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--masks", type=int, default=20)
    p.add_argument("--rates", type=int, default=10)
    p.add_argument("--src-words", type=int, default=300)
    p.add_argument("--hyp-words", type=int, default=60)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = p.parse_args()
    if args.smoke:
        args.items, args.masks, args.rates, args.src_words, args.hyp_words = 4, 4, 2, 20, 8
        args.prompts, args.length, args.steps, args.dtype = 2, 16, 16, "float32"
    dev = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda:0"
    if dev == "cpu" and not args.smoke:
        print("no CUDA device: run with --smoke to check the script on the CPU", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for name in args.only:
            kind, dims = SHAPES[name]
            dims = {**dims, **SMOKE[kind]} if args.smoke else dims
            rows.append(measure(name, kind, shaped_dir(kind, dims, tmp / name), dev, args))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        n = torch.cuda.device_count() if dev != "cpu" else 2
        dp = data_parallel(max(n, 2) if dev == "cpu" else n, "cpu" if dev == "cpu" else "auto", tmp)
    print(
        f"\n{'model':<10} {'params':>7} {'load s':>7} {'DiffScore items/s':>18} {'sampler tok/s':>14} "
        f"{'NFE':>5} {'peak GiB':>9}"
    )
    for r in rows:
        print(
            f"{r['model']:<10} {r['params_B']:>6}B {r['load_s']:>7} {r['diffscore_items_per_s']:>18} "
            f"{r['sampler_tokens_per_s']:>14} {r['nfe_per_sample']:>5} {r['peak_mem_GiB']:>9}"
        )
    print(
        f"DiffScore: {rows[0]['diffscore_setting']}; sampler: {rows[0]['sampler_setting']}; dtype {args.dtype}"
    )
    print(f"data parallel (dlmeval score, tiny-llada, torchrun): {dp}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "data_parallel": dp}, indent=1))
    ok = dp.get("identical") is True
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
