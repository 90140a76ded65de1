"""Guard: every stored record and output table of the tiny runs (care-tiny, robust-tiny, meta-eval ``--limit 6``,
``score``, ``sample``; one process, and two ranks for ``score`` / ``sample``) against a digest committed beside this
file (``guard_digest.json``).

The digest was written by the code before a refactor (``python tests/test_guard_outputs.py --write``) and is
compared entry by entry afterwards: a structural change must leave every entry byte-identical. A change that is
meant to move numbers (and says so in its commit) rewrites the digest in the same commit. Measured wall-clock fields
(``seconds``, ``cpu_seconds``, the ``timing`` table) are left out: they are not computed from the inputs.

Two ranks of care / robust / meta-eval are compared with one process in ``tests/test_parallel.py``. The digest was
written with WordNet installed (``make test`` installs it, scripts/system-deps.sh): without it METEOR is "not
available" and the meta-eval lexical entries differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

PY = sys.executable
DIGEST = Path(__file__).with_name("guard_digest.json")
WALL_CLOCK = ("seconds", "cpu_seconds", "wall_seconds")

TEXTS = [
    "the cat sat on the mat",
    "a dog",
    "birds fly south in winter when the days grow short and the nights are cold",
    "the sun is hot today",
    "we like green tea a lot, and coffee too, but tea is what we drink in the morning",
    "it rains",
    "the river runs to the sea through the hills and the fields of the valley below",
    "one two three four five",
]
SOURCES = [f"source text number {i} about {t.split()[-1]}" for i, t in enumerate(TEXTS)]

SAMPLE_ARGS = ["--json", "sample", "--model", "tiny-llada", "--prompts", "p.txt", "--num-samples", "2",
               "--length", "8", "--steps", "8", "--strategy", "low_confidence", "--temperature", "0.5",
               "--batch-size", "2"]  # fmt: skip

COMMANDS: dict[str, tuple[int, list[str]]] = {
    "care": (1, ["care", "care-tiny", "--out", "o-care"]),
    "robust": (1, ["robust", "robust-tiny", "--out", "o-robust"]),
    "meta-eval": (
        1,
        [
            "meta-eval",
            "--benchmarks",
            "SummEval",
            "--limit",
            "6",
            "--model",
            "tiny-llada",
            "--ar-model",
            "tiny-causal",
            "--masks",
            "4",
            "--rates",
            "2",
            "--bootstrap",
            "50",
            "--out",
            "o-meta",
        ],
    ),  # fmt: skip
    "score-marginal": (
        1,
        [
            "--json",
            "score",
            "--model",
            "tiny-llada",
            "--config",
            "marginal",
            "--candidates",
            "c.txt",
            "--masks",
            "4",
            "--rates",
            "2",
            "--output",
            "score-marginal.csv",
        ],
    ),  # fmt: skip
    "score-pmi": (
        1,
        [
            "--json",
            "score",
            "--model",
            "tiny-llada",
            "--config",
            "pmi",
            "--candidates",
            "c.txt",
            "--sources",
            "s.txt",
            "--masks",
            "4",
            "--rates",
            "2",
            "--tokens",
            "--output",
            "score-pmi.jsonl",
        ],
    ),  # fmt: skip
    "score-marginal-2ranks": (
        2,
        [
            "--json",
            "score",
            "--model",
            "tiny-llada",
            "--config",
            "marginal",
            "--candidates",
            "c.txt",
            "--masks",
            "4",
            "--rates",
            "2",
        ],
    ),  # fmt: skip
    "sample": (1, SAMPLE_ARGS),
    "sample-2ranks": (2, SAMPLE_ARGS),  # the same command on two ranks
}


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:20]


def _strip(v):
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k not in WALL_CLOCK}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "DLMEVAL_DIST_TIMEOUT": "120"})
    if env.get(
        "PYTHONPATH"
    ):  # the commands run in a temporary directory: a relative PYTHONPATH=src must hold
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep)
        )
    return env


def _run(nproc: int, args: list[str], cwd: Path) -> str:
    launch = [PY, "-m", "dlmeval"]
    if nproc > 1:
        launch = [
            PY,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            "-m",
            "dlmeval",
        ]
    r = subprocess.run([*launch, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def _store_entries(store: Path, name: str) -> dict[str, str]:
    """One digest per run (every key and stored result JSON, wall-clock fields left out) and per table."""
    out = {}
    con = sqlite3.connect(store)
    try:
        for rid, kind in con.execute("SELECT run_id, kind FROM runs ORDER BY run_id"):
            rows = con.execute(
                "SELECT key, result FROM items WHERE run_id = ? ORDER BY key", (rid,)
            ).fetchall()
            body = "\n".join(f"{k}\t{json.dumps(_strip(json.loads(v)), sort_keys=True)}" for k, v in rows)
            out[f"{name}/run/{kind}/{rid}"] = f"{len(rows)}:{_sha(body)}"
        for rid, tname, data in con.execute("SELECT run_id, name, data FROM tables ORDER BY run_id, name"):
            if tname != "timing":
                out[f"{name}/table/{rid}/{tname}"] = _sha(data)
    finally:
        con.close()
    return out


def _stdout_entry(stdout: str) -> str:
    payload = json.loads(stdout)
    return _sha(json.dumps(_strip(payload), sort_keys=True))


def collect(tmp: Path, names: list[str] | None = None) -> dict[str, str]:
    """Run the guard commands in ``tmp`` and return ``{entry: digest}``."""
    (tmp / "c.txt").write_text("\n".join(TEXTS) + "\n")
    (tmp / "s.txt").write_text("\n".join(SOURCES) + "\n")
    (tmp / "p.txt").write_text("The cat\nOnce upon a time there was\nA dog\n")
    out: dict[str, str] = {}
    for name, (nproc, args) in COMMANDS.items():
        if names is not None and name not in names:
            continue
        store = tmp / f"{name}.sqlite"
        stdout = _run(nproc, ["--store", str(store), *args], tmp)
        if store.exists():
            out.update(_store_entries(store, name))
        if stdout.lstrip().startswith("{"):
            out[f"{name}/stdout"] = _stdout_entry(stdout)
        for a in args:
            if a.startswith("o-"):
                for p in sorted((tmp / a).rglob("*.csv")):
                    if p.name != "timing.csv":
                        out[f"{name}/out/{p.relative_to(tmp / a)}"] = _sha(p.read_bytes())
            elif a.endswith((".csv", ".jsonl")) and (tmp / a).exists():
                if a.endswith(".jsonl"):
                    lines = [
                        json.dumps(_strip(json.loads(x)), sort_keys=True)
                        for x in (tmp / a).read_text().splitlines()
                    ]
                    out[f"{name}/file/{a}"] = _sha("\n".join(lines))
                else:
                    out[f"{name}/file/{a}"] = _sha((tmp / a).read_bytes())
    return out


@pytest.mark.slow
def test_tiny_runs_match_the_guard_digest(tmp_path):
    want = json.loads(DIGEST.read_text())
    got = collect(tmp_path)
    changed = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    assert not changed, f"{len(changed)} of {len(want)} guard entries differ: {changed[:20]}"
    assert len(got) > 40  # every command wrote records and tables


if __name__ == "__main__":  # python tests/test_guard_outputs.py --write [DIR]
    import tempfile

    if "--write" not in sys.argv:
        sys.exit("usage: python tests/test_guard_outputs.py --write")
    with tempfile.TemporaryDirectory() as d:
        digest = collect(Path(d))
    DIGEST.write_text(json.dumps(digest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(digest)} entries to {DIGEST}")
