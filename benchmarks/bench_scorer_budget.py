"""DiffScorer token budget per forward batch (``max_tokens``): wall time of the same scoring at several budgets,
measured side by side in one run.

    .venv/bin/python benchmarks/bench_scorer_budget.py --threads 2    # about 2 minutes on 2 free CPU cores

Two workloads, both ``cond`` (the candidate masked, its source visible):

* ``arc``: ARC-Challenge likelihood requests as the robustness protocol sends them, every item's four options in
  one call (``--items`` items, the demo's estimator: 2 masks at 2 rates);
* ``summeval``: ``--pairs`` SummEval (source, candidate) pairs, fast preset (K=5, T=5), sources cut to the window.

Each budget is timed ``--rounds`` times in rotating order; the best time is reported with its ratio to the
largest budget. The budgets only regroup rows into batches: the scores agree to float rounding (printed).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from dlmeval.data.bartscore import load_bartscore  # noqa: E402
from dlmeval.data.tasks import load_arc_challenge  # noqa: E402
from dlmeval.models import load_diffusion  # noqa: E402
from dlmeval.scoring import DiffScorer  # noqa: E402
from dlmeval.tasks import get_task  # noqa: E402


def workloads(n_items: int, n_pairs: int) -> dict:
    task = get_task("arc_challenge")
    reqs = [
        task.choice_request(it, None, seed=0, scope="prompt", chat=False)
        for it in load_arc_challenge()[:n_items]
    ]
    arc = (
        [c for _, conts in reqs for c in conts],
        [m.text for m, conts in reqs for _ in conts],
        dict(n_masks=2, n_rates=2),
    )
    df = load_bartscore("SummEval").drop_duplicates("doc_id").iloc[:n_pairs]
    summ = (df["candidate"].tolist(), df["source"].tolist(), dict(n_masks=5, n_rates=5))
    return {"arc": arc, "summeval": summ}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--items", type=int, default=25)
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the sources cut to the window are expected here
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_diffusion("default", device="cpu")
    ident = model.identity()
    print(f"model {ident.name} weights {ident.weights_sha256[:8]}; torch threads {torch.get_num_threads()}")
    for name, (cands, srcs, est) in workloads(args.items, args.pairs).items():
        DiffScorer(model, seed=0, **est).score(cands[:8], srcs[:8], config="cond")  # warm-up
        best = {b: float("inf") for b in args.budgets}
        scores = {}
        for r in range(args.rounds):
            order = args.budgets[r % len(args.budgets) :] + args.budgets[: r % len(args.budgets)]
            for b in order:
                scorer = DiffScorer(model, seed=0, max_tokens=b, **est)
                t = time.perf_counter()
                scores[b] = scorer.score(cands, srcs, config="cond")["score"].to_numpy()
                best[b] = min(best[b], time.perf_counter() - t)
        ref = max(args.budgets)
        print(f"\n{name}: {len(cands)} candidates, {est}")
        print("  max_tokens  best s  ratio to largest  max |score diff|")
        for b in args.budgets:
            diff = float(np.nanmax(np.abs(scores[b] - scores[ref])))
            print(f"  {b:>10}  {best[b]:6.2f}  {best[b] / best[ref]:16.2f}  {diff:.1e}")


if __name__ == "__main__":
    main()
