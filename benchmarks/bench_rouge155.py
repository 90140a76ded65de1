"""ROUGE-1.5.5 (``dlmeval.baselines.rouge155``) on the golden test's three benchmarks: every summary against its
reference in BARTScore's text form, as ``meta-eval --rouge-impl rouge155`` batches them. Prints the pairs, the wall
time and the CPU time of the Perl processes (their CPU time is what a busy shared machine does not inflate).

    python benchmarks/bench_rouge155.py [--processes N] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--processes", type=int, default=None, help="Perl processes (default: the CPUs, at most 8)"
    )
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    from dlmeval.baselines.rouge155 import bartscore_text, rouge155_pairs
    from dlmeval.data.bartscore import load_bartscore

    total_pairs, total_wall, total_cpu = 0, 0.0, 0.0
    for name in ("REALSumm", "QAGS_CNN", "Rank19"):
        df = load_bartscore(name, args.data_dir)
        pairs = [
            (bartscore_text(c), bartscore_text(r)) for c, r in zip(df["candidate_raw"], df["reference_raw"])
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        rouge155_pairs(pairs, processes=args.processes)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"{name:9s} {len(pairs):5d} pairs  wall {wall:6.1f} s  Perl CPU {cpu:6.1f} s")
        total_pairs, total_wall, total_cpu = total_pairs + len(pairs), total_wall + wall, total_cpu + cpu
    print(f"{'all':9s} {total_pairs:5d} pairs  wall {total_wall:6.1f} s  Perl CPU {total_cpu:6.1f} s")


if __name__ == "__main__":
    main()
