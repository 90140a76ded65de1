"""Canonical chunks make "identical" true: 300 mixed-length texts scored by ``dlmeval score`` store the same bits in
one process, on two ranks, and after a rank is killed with SIGKILL and the run is finished by one process. Batch
size is part of the run signature: another ``--batch-size`` is another run (a new run id), itself identical across
world sizes, whose scores differ from the default's only by float rounding.

Before canonical chunks, the same comparisons differed in 262/300 (two ranks) and 250/300 (``--batch-size 3``)
scores on this machine (``benchmarks/bench_score_identity.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from dlmeval.parallel import read_journal
from dlmeval.parallel.store import rank_dir
from tests.parallel.test_parallel import PY, _env, dlmeval, items_of

WORDS = (
    "the a cat dog sat ran on in mat park bird sun sea river hill tea we like green it rains often".split()
)
TEXTS = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + (i * 37) % 60)) for i in range(300)]


def _score(tmp_path, store: str, *extra: str, nproc: int = 1):
    args = [
        "--json",
        "--store",
        str(tmp_path / store),
        "score",
        "--model",
        "tiny-llada",
        "--config",
        "marginal",
    ]
    args += ["--candidates", "c.txt", "--masks", "4", "--rates", "2", *extra]
    r = dlmeval(nproc, args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def _killed_then_finished(tmp_path, store: str) -> None:
    """Two ranks; rank 1 SIGKILLed once its journal holds a chunk; one process finishes the run."""
    path = tmp_path / store
    cmd = [
        PY,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "dlmeval",
        "--store",
    ]
    cmd += [str(path), "score", "--model", "tiny-llada", "--config", "marginal", "--candidates", "c.txt"]
    proc = subprocess.Popen([*cmd, "--masks", "4", "--rates", "2"], cwd=tmp_path, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    killed, deadline = False, time.time() + 240
    while not killed and time.time() < deadline and proc.poll() is None:
        for j in rank_dir(path).glob("*/rank00001-*.jsonl"):
            if read_journal(j):
                os.kill(int(j.stem.rsplit("-", 2)[1]), signal.SIGKILL)
                killed = True
        time.sleep(0.05)
    proc.communicate(timeout=120)
    assert killed and proc.returncode != 0, "rank 1 never wrote a chunk before the job ended"
    _score(tmp_path, store)


@pytest.mark.slow
def test_scores_are_identical_across_ranks_resumes_and_within_a_batch_size(tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(TEXTS) + "\n")
    one = _score(tmp_path, "one.sqlite")
    two = _score(tmp_path, "two.sqlite", nproc=2)
    _killed_then_finished(tmp_path, "killed.sqlite")
    assert one["items"] == two["items"] and len(one["items"]) == 300
    reference = items_of(tmp_path / "one.sqlite")
    assert items_of(tmp_path / "two.sqlite") == reference
    assert items_of(tmp_path / "killed.sqlite") == reference  # no duplicate, no other bit
    assert not list(rank_dir(tmp_path / "killed.sqlite").glob("*/*.jsonl"))

    bs3 = _score(tmp_path, "bs3.sqlite", "--batch-size", "3")
    bs3_two = _score(tmp_path, "bs3-two.sqlite", "--batch-size", "3", nproc=2)
    assert bs3["items"] == bs3_two["items"]
    assert items_of(tmp_path / "bs3.sqlite") == items_of(tmp_path / "bs3-two.sqlite")
    assert bs3["run_id"] != one["run_id"]  # another batching is another run
    diffs = [abs(a["score"] - b["score"]) for a, b in zip(one["items"], bs3["items"], strict=True)]
    assert 0 < max(diffs) < 2e-6  # float rounding of other batch shapes, nothing more
