"""Forward throughput (tokens/s) and peak memory of each embedded model.

Each model is measured in its own subprocess, so peak RSS belongs to that model alone. Run:

    .venv/bin/python benchmarks/bench_models.py [--batch 8] [--length 128] [--reps 5]

On CUDA (``--device cuda``) the peak is torch.cuda.max_memory_allocated instead of the process RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def measure(spec: str, batch: int, length: int, reps: int, device: str) -> dict:
    import torch

    from dlmeval.models import load_causal_lm, load_diffusion
    from dlmeval.models.base import length_sorted_batches  # noqa: F401  (import cost counted in load)

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    note = ""
    if spec == "default-ar":
        m = load_causal_lm(spec, device=device)
    else:
        try:
            m = load_diffusion(spec, device=device)
        except Exception as e:  # weights not shipped yet: measure the same architecture untrained
            from dlmeval.models.default import default_start_model

            m = default_start_model(device=device)
            note = f"untrained start ({type(e).__name__})"
    load_s = time.perf_counter() - t0
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 5000, (batch, length), generator=g).to(m.device)
    attn = torch.ones_like(ids)
    fwd = m.logits if spec != "default-ar" else (lambda i, a: m.forward(i, a).logits)
    with torch.no_grad():
        fwd(ids, attn)  # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        for _ in range(reps):
            fwd(ids, attn)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if device.startswith("cuda")
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return {
        "model": spec,
        "note": note,
        "load_s": round(load_s, 2),
        "batch": batch,
        "length": length,
        "tokens_per_s": round(reps * batch * length / dt),
        "ms_per_forward": round(1000 * dt / reps, 1),
        "peak_mib": round(peak),
        "rss_before_load_mib": round(rss0 / 1024),
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure(a.one, a.batch, a.length, a.reps, a.device)))
        return
    rows = []
    for spec in ("default", "default-ar"):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                spec,
                "--batch",
                str(a.batch),
                "--length",
                str(a.length),
                "--reps",
                str(a.reps),
                "--device",
                a.device,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"forward pass, batch {a.batch} x {a.length} tokens, device {a.device}")
    print(f"{'model':<12} {'tokens/s':>9} {'ms/fwd':>8} {'peak MiB':>9} {'load s':>7}  note")
    for r in rows:
        print(
            f"{r['model']:<12} {r['tokens_per_s']:>9} {r['ms_per_forward']:>8} {r['peak_mib']:>9} "
            f"{r['load_s']:>7}  {r['note']}"
        )
    d, ar = rows
    print(f"ratio default/default-ar tokens/s: {d['tokens_per_s'] / ar['tokens_per_s']:.2f}")


if __name__ == "__main__":
    main()
