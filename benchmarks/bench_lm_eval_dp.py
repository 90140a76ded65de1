"""Per-rank efficiency of `dlmeval lm-eval` under torchrun (CPU, gloo): one process vs N ranks on the same documents.

    PYTHONPATH=src python benchmarks/bench_lm_eval_dp.py [--ranks 2] [--limit 16] [--model default] [--threads 1]

Runs `dlmeval lm-eval --model dlmeval --tasks arc_challenge_local --limit LIMIT --device cpu` (examples/lm-eval,
the local ARC-Challenge file) once in one process and once under `torchrun --nproc_per_node RANKS`, each process with
THREADS torch threads, and reads the model's per-rank log line (`lm-eval rank R/W: N loglikelihood requests in S s`).
Prints, per rank: its requests, its seconds answering them, and its efficiency `(T1 / W) / T_r` (T1: the one
process's seconds; 1.0 = a perfect split); then the wall clock of both commands (start-up included) and whether the
results tables are equal. On a machine with fewer free cores than ranks x threads the ranks compete for cores and
the efficiency measures that, not the split.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"lm-eval rank (\d+)/(\d+): (\d+) loglikelihood requests in ([0-9.]+) s")


def run(ranks: int, args) -> tuple[float, dict[int, tuple[int, float]], list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads), COLUMNS="200")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    launch = [sys.executable]
    if ranks > 1:
        launch += ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    cmd = [*launch, "-m", "dlmeval", "lm-eval", "--model", "dlmeval", "--model_args", f"model={args.model}"]
    cmd += [
        "--include_path",
        "examples/lm-eval",
        "--tasks",
        "arc_challenge_local",
        "--limit",
        str(args.limit),
    ]
    cmd += ["--device", "cpu", "--batch_size", str(args.batch_size)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    per: dict[int, tuple[int, float]] = {}
    for m in LINE.finditer(r.stderr):
        n, s = per.get(int(m[1]), (0, 0.0))
        per[int(m[1])] = (n + int(m[3]), s + float(m[4]))
    table = [line for line in r.stdout.splitlines() if line.startswith("|")]
    return wall, per, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--model", default="default")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()
    wall1, one, table1 = run(1, args)
    wallw, many, tablew = run(args.ranks, args)
    n1, t1 = one[0]
    print(
        f"model {args.model}, arc_challenge_local --limit {args.limit}, {args.threads} thread(s) per process, cpu"
    )
    print(f"1 process: {n1} loglikelihood requests in {t1:.2f} s")
    print(f"{'rank':>4} {'requests':>8} {'seconds':>8} {'efficiency':>10}")
    for r in sorted(many):
        n, t = many[r]
        print(f"{r:>4} {n:>8} {t:>8.2f} {(t1 / args.ranks) / t:>10.2f}")
    slowest = max(t for _, t in many.values())
    print(
        f"job: requests {t1:.2f} s -> {slowest:.2f} s on {args.ranks} ranks (speed-up {t1 / slowest:.2f}, "
        f"efficiency {t1 / (args.ranks * slowest):.2f})"
    )
    print(f"wall clock with start-up: {wall1:.1f} s (1 process), {wallw:.1f} s ({args.ranks} ranks)")
    print(f"results tables equal: {table1 == tablew}")


if __name__ == "__main__":
    main()
