"""Multiple-choice likelihood under the AR model: items per forward batch, measured side by side in one run.

    .venv/bin/python benchmarks/bench_choice_batching.py --threads 2    # about 3 minutes on 2 free CPU cores

``CausalLM.choice_logprobs`` runs the shared prompt of each request once and its choices from the expanded KV
cache. This scores ``--items`` ARC-Challenge likelihood requests (chat-wrapped, as the robustness protocol sends
them) one item per batch and under several budgets of padded prefix tokens per batch, in each ``--dtypes``, and
prints the best of ``--rounds`` (rotating order) with the ratio to one item per batch. The batching only regroups
rows: the scores agree to float rounding (printed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from dlmeval.data.tasks import load_arc_challenge  # noqa: E402
from dlmeval.models.causal_loading import load_default_ar  # noqa: E402
from dlmeval.tasks import get_task  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=25)
    ap.add_argument("--budgets", type=int, nargs="+", default=[512, 1024, 2048, 8192])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    task = get_task("arc_challenge")
    items = load_arc_challenge()[: args.items]
    print(f"torch threads {torch.get_num_threads()}; {len(items)} ARC-Challenge items, 4 choices each")
    for dt in args.dtypes:
        model = load_default_ar(dtype=dt)
        reqs = []
        for it in items:
            msg, conts = task.choice_request(it, None, seed=0, scope="prompt", chat=True)
            reqs.append((model.chat(msg.text), conts))
        model.choice_logprobs(reqs[:2], batch_size=2)  # warm-up
        settings = [("1 item per batch", dict(batch_size=1, max_tokens=None))] + [
            (f"{b} prefix tokens", dict(batch_size=len(reqs), max_tokens=b)) for b in args.budgets
        ]
        best = {name: float("inf") for name, _ in settings}
        got = {}
        for r in range(args.rounds):
            k = r % len(settings)
            for name, kw in settings[k:] + settings[:k]:
                t = time.perf_counter()
                got[name] = model.choice_logprobs(reqs, **kw)
                best[name] = min(best[name], time.perf_counter() - t)
        base = settings[0][0]
        flat = {n: np.concatenate([lp for lps in v for lp in lps]) for n, v in got.items()}
        print(f"\n{model.name} {dt} (weights {model.identity().weights_sha256[:8]})")
        print("  batching               best s  ratio to 1 item  max |logprob diff|")
        for name, _ in settings:
            diff = float(np.abs(flat[name] - flat[base]).max())
            print(f"  {name:<20} {best[name]:8.2f}  {best[name] / best[base]:15.2f}  {diff:.1e}")


if __name__ == "__main__":
    main()
