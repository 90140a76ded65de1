"""Data parallel on the CPU: one process with 2 threads against 2 processes (torchrun, gloo) with 1 thread each,
on the same meta-evaluation run (DiffScore on a SummEval subset with the embedded default model), side by side.

Prints the wall time of each, their ratio, and whether the stored records and the written tables are identical
(they must be: records are keyed by item and every draw is seeded per item). Each configuration gets a fresh store,
so both do all the work; model loading and process start-up are part of the wall time, as a user sees it.

    .venv/bin/python benchmarks/bench_parallel.py [--limit 16] [--benchmark SummEval]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def records(store: Path) -> dict:
    con = sqlite3.connect(store)
    try:
        return {(r, k): json.loads(v) for r, k, v in con.execute("SELECT run_id, key, result FROM items")}
    finally:
        con.close()


def run(world: int, threads: int, args, tmp: Path) -> tuple[float, Path, Path]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    store, out = tmp / f"w{world}.sqlite", tmp / f"w{world}"
    pre = [sys.executable, "-m", "dlmeval"]
    if world > 1:
        pre = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
        pre += ["-m", "dlmeval"]
    cmd = [*pre, "--store", str(store), "--no-progress", "meta-eval", "--benchmarks", args.benchmark]
    cmd += ["--limit", str(args.limit), "--metrics", "diffscore", "--preset", args.preset, "--bootstrap", "0"]
    cmd += ["--chunk-size", str(args.chunk_size), "--out", str(out)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return wall, store, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--benchmark", default="SummEval")
    p.add_argument("--limit", type=int, default=16)
    p.add_argument("--preset", default="fast")
    p.add_argument(
        "--chunk-size",
        type=int,
        default=8,
        help="outputs per work chunk (ranks take whole chunks: enough chunks keep them balanced)",
    )
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        w1, s1, o1 = run(1, 2, args, tmp)
        w2, s2, o2 = run(2, 1, args, tmp)
        same_records = records(s1) == records(s2)
        tables = sorted(f.name for f in o1.glob("*.csv") if f.name != "timing.csv")
        same_tables = all((o1 / n).read_text() == (o2 / n).read_text() for n in tables)
        n_records = len(records(s1))
    print(
        f"meta-eval {args.benchmark} --limit {args.limit} --metrics diffscore --preset {args.preset}, "
        f"default model, {os.cpu_count()} cores"
    )
    print(f"{'configuration':<34} {'wall s':>8}")
    print(f"{'1 process x 2 threads':<34} {w1:>8.1f}")
    print(f"{'2 processes x 1 thread (torchrun)':<34} {w2:>8.1f}")
    print(f"ratio (2 processes / 1 process): {w2 / w1:.2f}")
    print(
        f"records identical: {same_records} ({n_records} records); tables identical: {same_tables} ({tables})"
    )


if __name__ == "__main__":
    main()
