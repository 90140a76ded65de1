"""The cost of each `dlmeval demo` stage in a process of its own (#36; docs/benchmarks.md "dlmeval demo").

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_demo.py care   # meta (default), care, robust

Loads both embedded models, then calls one pillar stage of ``dlmeval.cli.demo`` (meta, care or robust) exactly as
``dlmeval demo`` does, and prints the stage's lines, its wall and CPU seconds and the process's peak RSS. Run it
under ``/usr/bin/time -v`` for the process's CPU seconds including the model loads. The whole demo is
``/usr/bin/time -v dlmeval demo`` itself.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", nargs="?", default="meta", choices=["meta", "care", "robust"])
    ap.add_argument("--store", default=None, help="run store (default: a new temporary file: a cold run)")
    ap.add_argument("--out", default="bench-demo-out")
    a = ap.parse_args()

    from dlmeval.cli import demo
    from dlmeval.models import load_causal_lm, load_diffusion
    from dlmeval.store import RunStore

    args = argparse.Namespace(dlm="default", ar="default-ar", device="cpu", dtype=None, trust_remote_code=False,
                              allow_download=False, json=False, no_progress=True, seed=0)  # fmt: skip
    dlm, ar = load_diffusion(args.dlm), load_causal_lm(args.ar)
    fn = {"meta": demo.meta_eval_stage, "care": demo.care_stage, "robust": demo.robust_stage}[a.stage]
    w0, c0 = time.perf_counter(), time.process_time()
    import tempfile

    store = a.store or str(Path(tempfile.mkdtemp(prefix="bench-demo-")) / "s.sqlite")
    fn(dlm, ar, RunStore(store), args, Path(a.out), print)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"stage {a.stage}: {time.perf_counter() - w0:.1f} s wall, {time.process_time() - c0:.1f} s CPU; "
          f"peak RSS {peak:.2f} GB")  # fmt: skip


if __name__ == "__main__":
    main()
