"""Data-parallel runs: 2 CPU processes under ``torch.distributed.run`` (gloo) give the records and outputs of one
process; a killed rank resumes with no duplicate records; ranks that disagree on a signature stop with a message.

Each launch is a real ``torchrun`` (``python -m torch.distributed.run --standalone``), the way users run dlmeval.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dlmeval.parallel import ParallelContext, fixed_chunks, open_store, read_journal, work_loop
from dlmeval.parallel.store import Journal, MainRun, rank_dir
from dlmeval.store import RunStore

PY = sys.executable


def _env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "DLMEVAL_DIST_TIMEOUT": "120"}, **extra)
    if env.get("PYTHONPATH"):  # the commands run in tmp_path: a relative PYTHONPATH=src must still hold
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep)
        )
    return env


def torchrun(nproc: int, args: list[str], *, cwd: Path, env: dict | None = None, timeout: float = 300):
    cmd = [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *args]
    return subprocess.run(cmd, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout)


def dlmeval(nproc: int, args: list[str], *, cwd: Path, env: dict | None = None, timeout: float = 300):
    if nproc == 1:
        cmd = [PY, "-m", "dlmeval", *args]
        return subprocess.run(
            cmd, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout
        )
    return torchrun(nproc, ["-m", "dlmeval", *args], cwd=cwd, env=env, timeout=timeout)


def items_of(store: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """{run kind + signature id: {key: result JSON}} of every run of a store (written times left out)."""
    con = sqlite3.connect(store)
    try:
        out: dict[str, dict[str, str]] = {}
        for rid, kind in con.execute("SELECT run_id, kind FROM runs"):
            rows = con.execute("SELECT key, result FROM items WHERE run_id = ?", (rid,)).fetchall()
            out[f"{kind}/{rid}"] = dict(rows)
        return out
    finally:
        con.close()


def tables_of(store: Path) -> dict[str, str]:
    con = sqlite3.connect(store)
    try:
        return {f"{r}/{n}": d for r, n, d in con.execute("SELECT run_id, name, data FROM tables")}
    finally:
        con.close()


TOY = textwrap.dedent(
    """
    import os, sys
    from dlmeval import parallel
    from dlmeval.parallel import fixed_chunks, open_store, work_loop
    par = parallel.init_from_env()
    store = open_store(sys.argv[1])
    if os.environ.get("HANG") and par.rank == 1:
        import time; time.sleep(60)
    cfg = {"n": 12, "extra": par.rank if os.environ.get("MISMATCH") else 0}
    run = store.open_run("toy", cfg, [], seed=0)
    keys = [f"item-{i}" for i in range(12)]
    count = []

    def compute(c):
        if os.environ.get("DIE") and par.rank == 1 and len(count) == 3:
            os._exit(9)
        count.append(c)
        return [{"v": i * i} for i in c.items]

    work_loop(run, fixed_chunks(range(12), keys, 1), compute)
    res = run.results()
    assert sorted(res) == sorted(keys), (par.rank, sorted(res))
    if par.is_main:
        print("TOTAL", sum(r["v"] for r in res.values()), len(res))
    parallel.shutdown()
    """
)


@pytest.fixture
def toy(tmp_path):
    p = tmp_path / "toy.py"
    p.write_text(TOY)
    return p


def test_toy_job_killed_rank_resumes_without_duplicates(tmp_path, toy):
    store = tmp_path / "s.sqlite"
    r = torchrun(2, [str(toy), str(store)], cwd=tmp_path, env=_env(DIE="1"))
    assert r.returncode != 0
    journals = list((rank_dir(store)).glob("*/*.jsonl"))
    assert len(journals) == 1 and journals[0].name.startswith("rank00001-")
    assert [k for k, _ in read_journal(journals[0])] == ["item-1", "item-3", "item-5"]
    r = torchrun(2, [str(toy), str(store)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "TOTAL 506 12" in r.stdout
    (run_items,) = items_of(store).values()
    assert sorted(run_items) == sorted(f"item-{i}" for i in range(12))  # the primary key forbids duplicates
    assert not list(rank_dir(store).glob("*/*.jsonl"))  # merged and removed


def test_signature_mismatch_stops_every_rank_with_a_message(tmp_path, toy):
    r = torchrun(2, [str(toy), str(tmp_path / "s.sqlite")], cwd=tmp_path, env=_env(MISMATCH="1"))
    assert r.returncode != 0
    assert "ranks disagree on the signature of a 'toy' run" in r.stderr
    assert '"config":{"extra":0' in r.stderr and '"config":{"extra":1' in r.stderr


def test_a_rank_that_hangs_does_not_hang_the_others(tmp_path, toy):
    """Collectives time out (DLMEVAL_DIST_TIMEOUT): rank 0 stops with a message instead of waiting forever."""
    t0 = time.time()
    r = torchrun(
        2, [str(toy), str(tmp_path / "s.sqlite")], cwd=tmp_path, env=_env(HANG="1", DLMEVAL_DIST_TIMEOUT="4")
    )
    assert r.returncode != 0
    assert "another rank probably died" in r.stderr
    assert time.time() - t0 < 50


def test_single_process_merges_leftover_journals(tmp_path):
    """A job killed under torchrun can be finished in one process: its rank journals are merged at the open."""
    path = tmp_path / "s.sqlite"
    with RunStore(path) as st:
        rid = st.open_run("toy", {"n": 3}).run_id
    j = Journal(rank_dir(path) / rid, 1)
    j.append([("a", {"v": 1}), ("b", {"v": 2})])
    with open(j.path, "a") as fh:
        fh.write('{"k": "c", "r": {"v"')  # torn last line: the rank died mid-write
    with open_store(path, par=ParallelContext()) as st:
        run = st.open_run("toy", {"n": 3})
        assert isinstance(run, MainRun)
        assert run.results() == {"a": {"v": 1}, "b": {"v": 2}}
        assert work_loop(run, fixed_chunks("abc", "abc", 1), lambda c: [{"v": 3}]).pending_chunks == 1
        assert run.results()["c"] == {"v": 3}
    assert not j.path.exists()


def test_torn_multibyte_line_and_bad_lines_end_a_journal(tmp_path):
    """A rank killed inside a multi-byte character leaves bytes that are no UTF-8: the journal's records before
    them still count, and reading never fails (every rerun would fail otherwise)."""
    p = tmp_path / "j.jsonl"
    good = '{"k": "a", "r": {"text": "caf\u00e9 \u00fc"}}\n'.encode()
    p.write_bytes(good + '{"k": "b", "r": {"text": "\u00e9'.encode()[:-1] + b"\n")
    assert read_journal(p) == [("a", {"text": "café ü"})]
    p.write_bytes(good + b'{"no key": 1}\n' + good)
    assert read_journal(p) == [("a", {"text": "café ü"})]


def test_plain_store_runs_are_refused_inside_a_distributed_job(tmp_path, monkeypatch):
    from dlmeval.parallel import context, run_context
    from dlmeval.parallel.store import ParallelError

    with RunStore(tmp_path / "s.sqlite") as st:
        run = st.open_run("toy", {})
        assert run_context(run).world_size == 1  # one process: a plain run works as before
        monkeypatch.setattr(context, "_CURRENT", ParallelContext(rank=0, world_size=2))
        with pytest.raises(ParallelError, match="open_store"):
            work_loop(run, fixed_chunks("a", "a", 1), lambda c: [{}])


def test_rank_dir_is_scoped_by_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DLMEVAL_RANK_DIR", str(tmp_path / "ranks"))
    a, b = rank_dir(tmp_path / "x" / "runs.sqlite"), rank_dir(tmp_path / "y" / "runs.sqlite")
    assert a != b and a.parent == b.parent == tmp_path / "ranks"
    monkeypatch.delenv("DLMEVAL_RANK_DIR")
    assert rank_dir(tmp_path / "runs.sqlite") == tmp_path / "runs.sqlite.ranks"


def test_context_share_partitions_and_maps_devices():
    ctxs = [ParallelContext(rank=r, world_size=3) for r in range(3)]
    parts = [c.share(list(range(10))) for c in ctxs]
    assert sorted(x for p in parts for x in p) == list(range(10))
    assert parts[1] == [1, 4, 7]
    assert ctxs[2].device("cpu") == "cpu"
    assert ParallelContext().device("auto") == "auto"  # one process: unchanged
    with pytest.raises(Exception, match="no CUDA device"):  # offset:K places on GPUs; this machine has none
        ParallelContext(rank=1, world_size=2, local_rank=1).device("offset:4")
    with pytest.raises(Exception, match="integer K"):
        ParallelContext().device("offset:x")


CANDIDATES = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "birds fly south in winter",
    "the sun is hot today",
    "we like green tea a lot",
    "it rains in april often",
    "the river runs to the sea",
]

#: 256 distinct texts of the tiny models' words: four 64-item canonical chunks of ``score``, two for each rank
MANY = [
    " ".join(w)
    for w in itertools.product(
        "the a we it birds cat dog sun".split(),
        "sat ran like fly runs is rains hot".split(),
        "on in to a".split(),
    )
]


def chunks_per_process(trace: Path) -> dict[int, list[int]]:
    """{pid: [keys of each chunk it computed]} from a DLMEVAL_TRACE_CHUNKS file (one line per computed chunk)."""
    out: dict[int, list[int]] = {}
    for line in trace.read_text().splitlines():
        pid, _, n = line.split()
        out.setdefault(int(pid), []).append(int(n))
    return out


def test_score_two_ranks_equal_one_process(tmp_path):
    """256 texts are four canonical chunks: each rank computes two of them, and the records equal one process's."""
    assert len(set(MANY)) == 256
    (tmp_path / "c.txt").write_text("\n".join(MANY) + "\n")
    out = {}
    for n in (1, 2):
        store, trace = tmp_path / f"s{n}.sqlite", tmp_path / f"t{n}.trace"
        args = ["--json", "--store", str(store), "score", "--model", "tiny-llada", "--config", "marginal"]
        args += ["--candidates", "c.txt", "--masks", "4", "--rates", "2"]
        r = dlmeval(n, args, cwd=tmp_path, env=_env(DLMEVAL_TRACE_CHUNKS=str(trace)))
        assert r.returncode == 0, r.stderr[-2000:]
        out[n] = (json.loads(r.stdout), items_of(store), chunks_per_process(trace))
    (a, ia, ta), (b, ib, tb) = out[1], out[2]
    assert list(ta.values()) == [[64, 64, 64, 64]]
    assert sorted(tb.values()) == [[64, 64], [64, 64]]  # two processes, two chunks each
    assert a["run_id"] == b["run_id"]
    assert [x["score"] for x in a["items"]] == [x["score"] for x in b["items"]]
    assert ia == ib and len(next(iter(ia.values()))) == len(MANY)


def test_sample_two_ranks_equal_one_process(tmp_path):
    """4 prompts x 2 samples in batches of 2 are four batches: each rank samples two, every rank gets all 8."""
    (tmp_path / "p.txt").write_text("The cat\nOnce upon\nA dog\nThe sun\n")
    args = ["--json", "--store", "s.sqlite", "sample", "--model", "tiny-llada", "--prompts", "p.txt"]
    args += ["--num-samples", "2", "--batch-size", "2"]
    args += ["--length", "8", "--steps", "8", "--strategy", "low_confidence", "--temperature", "0.5"]
    a, b = (
        dlmeval(n, args, cwd=tmp_path, env=_env(DLMEVAL_TRACE_CHUNKS=str(tmp_path / f"t{n}"))) for n in (1, 2)
    )
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]
    assert list(chunks_per_process(tmp_path / "t1").values()) == [[2, 2, 2, 2]]
    assert sorted(chunks_per_process(tmp_path / "t2").values()) == [[2, 2], [2, 2]]
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert len(ja["samples"]) == 8 and ja == jb


def test_killed_rank_of_a_real_command_resumes(tmp_path):
    """SIGKILL one rank of `dlmeval score` once its journal holds a record; the same command then finishes with
    the one-process result and no duplicate records."""
    texts = [
        f"{w}{v} is a word that we like to say every day" for w in "abcdefghijklmnopqrstuvwx" for v in "xyz"
    ]
    (tmp_path / "c.txt").write_text("\n".join(texts) + "\n")
    args = ["--json", "score", "--model", "tiny-llada", "--config", "marginal", "--candidates", "c.txt"]
    args += [
        "--masks",
        "16",
        "--rates",
        "4",
        "--batch-size",
        "2",
    ]  # long enough (72 texts) to kill rank 1 mid-run
    store = tmp_path / "s.sqlite"
    cmd = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "dlmeval"]
    proc = subprocess.Popen(
        [*cmd, "--store", str(store), *args],
        cwd=tmp_path,
        env=_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    killed = False
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        for j in rank_dir(store).glob("*/rank00001-*.jsonl"):
            if read_journal(j):
                os.kill(int(j.stem.rsplit("-", 2)[1]), signal.SIGKILL)  # rank...-host-PID-opening
                killed = True
                break
        if killed:
            break
        time.sleep(0.05)
    proc.communicate(timeout=120)
    assert killed, "rank 1 never wrote a record before the job ended"
    assert proc.returncode != 0
    r = dlmeval(2, ["--store", str(store), *args], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    one = tmp_path / "one.sqlite"
    r1 = dlmeval(1, ["--store", str(one), *args], cwd=tmp_path)
    assert r1.returncode == 0, r1.stderr[-2000:]
    assert json.loads(r.stdout)["items"] == json.loads(r1.stdout)["items"]
    assert items_of(store) == items_of(one)


def test_device_map_places_with_accelerate_and_keeps_scores():
    """``--device map`` loads through ``from_pretrained(device_map=...)`` (accelerate); on this CPU-only machine
    everything lands on the CPU and the scores are those of ``--device cpu``."""
    from dlmeval.models.registry import load_diffusion
    from dlmeval.scoring import DiffScorer

    mapped = load_diffusion("tiny-llada", device="map")
    plain = load_diffusion("tiny-llada", device="cpu")
    assert getattr(mapped.module, "hf_device_map", None) == {"model": "cpu"}
    assert getattr(plain.module, "hf_device_map", None) is None
    a, b = (
        DiffScorer(m, n_masks=4, n_rates=2).score(CANDIDATES[:3], config="marginal") for m in (mapped, plain)
    )
    assert a["score"].tolist() == b["score"].tolist()
    with pytest.raises(Exception, match="the placements are map"):
        load_diffusion("tiny-llada", device="map:everywhere")


def _records(store: Path) -> dict:
    """Every record of a store, wall-clock fields (``seconds``: measured, not computed) left out."""

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "seconds"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return {
        run: {k: strip(json.loads(v)) for k, v in items.items()} for run, items in items_of(store).items()
    }


def _same_outputs(a: Path, b: Path, skip: tuple[str, ...] = ()) -> list[str]:
    names = sorted(p.name for p in a.glob("*.csv") if p.name not in skip)
    assert names and names == sorted(p.name for p in b.glob("*.csv") if p.name not in skip)
    for n in names:
        assert (a / n).read_text() == (b / n).read_text(), n
    return names


def _assert_split(one: Path, two: Path) -> None:
    """The 2-rank job computed the chunks one process computes (as many, as many keys), each rank several."""
    alone, ranks = chunks_per_process(one), chunks_per_process(two)
    assert len(alone) == 1 and len(ranks) == 2
    (chunks,) = alone.values()
    assert sorted(n for c in ranks.values() for n in c) == sorted(chunks)
    assert all(len(c) >= 2 for c in ranks.values()), {pid: len(c) for pid, c in ranks.items()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, skip",
    [
        (["care", "care-tiny"], ()),
        (["robust", "robust-tiny"], ()),
        (
            # 16 distinct texts in chunks of 4: 4 chunks per family, 2 for each rank
            "meta-eval --benchmarks SummEval --limit 6 --model tiny-llada --ar-model tiny-causal --masks 4 --rates 2 "
            "--bootstrap 50 --chunk-size 4".split(),
            ("timing.csv",),  # seconds per family: measured, not computed
        ),
    ],
    ids=["care", "robust", "meta-eval"],
)
def test_protocol_two_ranks_equal_one_process(tmp_path, command, skip):
    """A Care sweep, a robustness run and a meta-evaluation subset on the tiny models: the tables written by
    rank 0 of a 2-process job and every stored record equal those of one process; each rank computed several of
    the chunks (the work was split, not done by rank 0 alone)."""
    for n in (1, 2):
        r = dlmeval(
            n,
            ["--store", str(tmp_path / f"s{n}.sqlite"), *command, "--out", str(tmp_path / f"o{n}")],
            cwd=tmp_path,
            env=_env(DLMEVAL_TRACE_CHUNKS=str(tmp_path / f"t{n}")),
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    _assert_split(tmp_path / "t1", tmp_path / "t2")
    names = _same_outputs(tmp_path / "o1", tmp_path / "o2", skip)
    assert len(names) >= 4
    one, two = _records(tmp_path / "s1.sqlite"), _records(tmp_path / "s2.sqlite")
    assert one == two and sum(len(v) for v in one.values()) > 20
    assert not list(rank_dir(tmp_path / "s2.sqlite").glob("*/*.jsonl"))  # every journal merged and removed


@pytest.mark.slow
def test_ft_adapter_is_trained_once_and_shared_by_the_ranks(tmp_path):
    """meta-eval --ft on 2 ranks: rank 0 trains the adapter, the other rank receives its files; the FT records and
    tables equal one process's."""
    args = [
        "meta-eval",
        "--benchmarks",
        "BAGEL",
        "--limit",
        "4",
        "--model",
        "tiny-llada",
        "--ar-model",
        "tiny-causal",
    ]
    args += [
        "--masks",
        "2",
        "--rates",
        "2",
        "--bootstrap",
        "0",
        "--metrics",
        "diffscore",
        "--ft",
        "--ft-steps",
        "2",
    ]
    args += ["--ft-batch-size", "2", "--chunk-size", "2"]  # several chunks for each rank
    for n in (1, 2):
        # no adapter from the other run to reuse
        env = _env(DLMEVAL_CACHE=str(tmp_path / f"cache{n}"), DLMEVAL_TRACE_CHUNKS=str(tmp_path / f"t{n}"))
        r = dlmeval(
            n,
            ["--store", str(tmp_path / f"s{n}.sqlite"), *args, "--out", str(tmp_path / f"o{n}")],
            cwd=tmp_path,
            env=env,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    assert len(list((tmp_path / "cache2" / "meta-eval-ft").iterdir())) == 1  # one adapter, trained once
    _assert_split(tmp_path / "t1", tmp_path / "t2")
    _same_outputs(tmp_path / "o1", tmp_path / "o2", ("timing.csv",))
    one, two = _records(tmp_path / "s1.sqlite"), _records(tmp_path / "s2.sqlite")
    assert one == two and any("diffscore-ft" in k for v in one.values() for k in v)


def test_sync_rounds_are_bounded_by_records_and_bytes(monkeypatch):
    from dlmeval.parallel import store as pstore

    monkeypatch.setattr(pstore, "CHUNK", 3)
    monkeypatch.setattr(pstore, "CHUNK_BYTES", 100)
    pairs = [(f"k{i}", {"text": "x" * (80 if i == 4 else 5)}) for i in range(8)]  # 19 bytes, k4: 94
    parts = pstore._byte_chunks(pairs)
    assert [p for part in parts for p in part] == pairs  # every record once, in order
    assert [len(p) for p in parts] == [
        3,
        1,
        1,
        3,
    ]  # 3 records at most; 19 + 94 > 100 bytes: k4 alone
    assert pstore._byte_chunks([]) == []
