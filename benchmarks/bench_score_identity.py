"""How many of 300 mixed-length `dlmeval score` results differ between one process and two ranks, two batch sizes,
and a rerun, for a given dlmeval source tree; and how far the scores of two trees are apart.

    PYTHONPATH=src python benchmarks/bench_score_identity.py [--old OLD_SRC] [--n 300]

``--old`` (a ``src`` directory of another commit, e.g. from ``git archive BASE src | tar -x -C /tmp/base``): also
score with that tree and print the largest absolute score change between the two trees (one process, defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WORDS = (
    "the a cat dog sat ran on in mat park bird sun sea river hill tea we like green it rains often".split()
)


def texts(n: int) -> list[str]:
    # lengths 1..60 words, a deterministic walk over the vocabulary
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + (i * 37) % 60)) for i in range(n)]


def score(src: str, tmp: Path, tag: str, nproc: int = 1, extra: tuple[str, ...] = ()) -> list[float]:
    env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "dlmeval"]
    if nproc > 1:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
        launch += ["-m", "dlmeval"]
    args = ["--json", "--store", str(tmp / f"{tag}.sqlite"), "score", "--model", "tiny-llada", "--config"]
    args += ["marginal", "--candidates", str(tmp / "c.txt"), "--masks", "4", "--rates", "2", *extra]
    r = subprocess.run([*launch, *args], env=env, capture_output=True, text=True, check=False)
    if r.returncode:
        sys.exit(r.stderr[-2000:])
    return [x["score"] for x in json.loads(r.stdout)["items"]]


def differ(a: list[float], b: list[float]) -> tuple[int, float]:
    d = [abs(x - y) for x, y in zip(a, b, strict=True)]
    return sum(x != y for x, y in zip(a, b, strict=True)), max(d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default=None)
    ap.add_argument("--n", type=int, default=300)
    a = ap.parse_args()
    src = os.environ.get("PYTHONPATH", "src")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "c.txt").write_text("\n".join(texts(a.n)) + "\n")
        trees = {"new": src} if a.old is None else {"old": a.old, "new": src}
        base = {}
        for name, tree in trees.items():
            one = base[name] = score(tree, tmp, f"{name}-1")
            two = score(tree, tmp, f"{name}-2", nproc=2)
            bs3 = score(tree, tmp, f"{name}-bs3", extra=("--batch-size", "3"))
            print(
                f"{name}: 2 ranks vs 1 process: {differ(one, two)[0]}/{a.n} differ (max {differ(one, two)[1]:.2e})"
            )
            print(
                f"{name}: --batch-size 3 vs default: {differ(one, bs3)[0]}/{a.n} differ (max {differ(one, bs3)[1]:.2e})"
            )
        if a.old is not None:
            n, m = differ(base["old"], base["new"])
            print(f"new vs old tree (1 process, defaults): {n}/{a.n} differ, max abs diff {m:.3e}")


if __name__ == "__main__":
    main()
