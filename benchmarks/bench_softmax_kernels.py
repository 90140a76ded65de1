"""Throughput of the vocabulary reductions the sampler's step fields are built from, in cache and out of it.

Why ``dlmeval.sampling.fields`` works on 16-row chunks with torch's fused ``softmax``: prints G elements/s for
``exp``, ``logsumexp``, ``softmax``, ``log_softmax`` and ``amax`` over ``[rows, 30522]`` float32 tensors, for
row counts that fit a core's L2 cache (16, 64) and for a whole 2,048-row step (batch 16 x 128 positions).

    .venv/bin/python benchmarks/bench_softmax_kernels.py [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

V = 30522
OPS = (  # in the order of the printed columns
    torch.exp,
    partial(torch.logsumexp, dim=-1),
    partial(torch.softmax, dim=-1),
    partial(torch.log_softmax, dim=-1),
    partial(torch.amax, dim=-1),
)


def rate(f, n_elem: int, reps: int = 20) -> float:
    f()
    t = time.perf_counter()
    for _ in range(reps):
        f()
    return n_elem / ((time.perf_counter() - t) / reps) / 1e9


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}; {torch.get_num_threads()} threads; vocab {V}; G elements/s")
    print("| rows | exp | logsumexp | softmax | log_softmax | amax |")
    print("|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(0)
    for rows in (16, 64, 2048):
        z = torch.randn(rows, V, generator=g) * 3
        n = rows * V
        print(f"| {rows} | " + " | ".join(f"{rate(partial(op, z), n):.2f}" for op in OPS) + " |")


if __name__ == "__main__":
    main()
