"""The bad-input battery, run-record part (issue 32): a run stopped by an input error or an exception is `failed`
with its message, one stopped by a signal is `interrupted`, and two processes writing one run share its chunks
(each computed once, the records those of a one-process run)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import InputError
from dlmeval.parallel import fixed_chunks, work_loop
from dlmeval.store import RunStore, lease

SRC = str(Path(__file__).resolve().parents[2] / "src")
SCORE = ["score", "--model", "tiny-llada", "--fast", "--rows", "0"]


def _texts(path: Path, n: int = 200, seed: int = 0) -> Path:
    """``n`` texts of mixed length (2 to 30 words) from the tiny model's vocabulary."""
    r = random.Random(seed)
    words = "the a cat dog runs quickly over lazy brown fox jumps and then sleeps under warm sun near river".split()
    path.write_text(
        "".join(" ".join(r.choice(words) for _ in range(r.randint(2, 30))) + "\n" for _ in range(n))
    )
    return path


def _listed(store: Path) -> list[dict]:
    with RunStore(store, must_exist=True) as st:
        return st.list_runs()


def test_a_run_stopped_by_an_input_error_is_failed_with_the_message(tmp_path, monkeypatch, capsys):
    import dlmeval.cli.score as score_cli

    def bad(*a, **k):
        raise InputError("texts.jsonl row 3: field 'doc_id' is a list, expected a string or an integer")

    monkeypatch.setattr(score_cli, "_store_texts", bad)
    store = tmp_path / "runs.sqlite"
    cands = _texts(tmp_path / "c.txt", n=6)
    assert main(["--store", str(store), *SCORE, "--candidates", str(cands)]) == 2
    assert "field 'doc_id' is a list" in capsys.readouterr().err
    (run,) = _listed(store)
    assert run["status"] == "failed" and "field 'doc_id' is a list" in run["error"]
    assert main(["--store", str(store), "runs", "list"]) == 0
    out = capsys.readouterr().out
    assert f"failed: {run['run_id']}: texts.jsonl row 3: field 'doc_id'" in out and "to resume" in out
    # the thread count is part of the run id: the hint states it, so another machine resumes this run
    import torch

    assert f"--threads {torch.get_num_threads()}` to resume" in run["resume"]
    # and the command is the one main() was given, not the test runner's sys.argv
    assert run["resume"].startswith(f"rerun `dlmeval --store {store} score --model tiny-llada")
    assert main(["--store", str(store), "runs", "show", run["run_id"]]) == 0
    shown = capsys.readouterr().out
    assert "status failed" in shown and "field 'doc_id' is a list" in shown
    assert main(["--store", str(store), "--json", "runs", "show", run["run_id"], "--rows", "0"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["status"] == "failed" and "doc_id" in info["error"]
    # a rerun that completes makes it done, and the error is gone
    monkeypatch.undo()
    assert main(["--store", str(store), *SCORE, "--candidates", str(cands)]) == 0
    (again,) = _listed(store)
    assert again["status"] == "done" and "error" not in again


def test_a_run_stopped_by_an_exception_is_failed_with_the_error(tmp_path, monkeypatch):
    import dlmeval.cli.score as score_cli

    def boom(*a, **k):
        raise RuntimeError("boom in the middle")

    monkeypatch.setattr(score_cli, "_store_texts", boom)
    store = tmp_path / "runs.sqlite"
    with pytest.raises(RuntimeError, match="boom"):
        main(["--store", str(store), *SCORE, "--candidates", str(_texts(tmp_path / "c.txt", n=4))])
    (run,) = _listed(store)
    assert (run["status"], run["error"]) == ("failed", "RuntimeError: boom in the middle")


def test_a_run_stopped_by_ctrl_c_is_interrupted(tmp_path, monkeypatch):
    import dlmeval.cli.score as score_cli

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(score_cli, "_store_texts", ctrl_c)
    store = tmp_path / "runs.sqlite"
    assert main(["--store", str(store), *SCORE, "--candidates", str(_texts(tmp_path / "c.txt", n=4))]) == 130
    (run,) = _listed(store)
    assert run["status"] == "interrupted" and "SIGINT" in run["error"]


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", **extra}


def _wait_for(cond, timeout: float = 240.0, step: float = 0.1) -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out waiting")
        time.sleep(step)


def _n_items(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=30) as c:
            return c.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_is_interrupted(tmp_path):
    store = tmp_path / "runs.sqlite"
    cmd = [sys.executable, "-m", "dlmeval", "--no-progress", "--store", str(store), *SCORE]
    p = subprocess.Popen(
        [*cmd, "--candidates", str(_texts(tmp_path / "c.txt"))],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _n_items(store) > 0 or p.poll() is not None)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "interrupted" in err
    (run,) = _listed(store)
    assert run["status"] == "interrupted" and "SIGTERM" in run["error"] and "lease" not in run


def _trace(path: Path) -> list[tuple[int, str, int]]:
    if not path.exists():
        return []
    return [(int(p), k, int(n)) for p, k, n in (ln.split() for ln in path.read_text().splitlines())]


@pytest.mark.slow
def test_two_processes_on_one_run_compute_each_chunk_once_and_match_one_process(tmp_path):
    """Two `dlmeval score` processes on one store and one run (200 texts of mixed length, tiny-llada): every chunk
    is computed exactly once (the trace counts computes), the second process names the first in one warning, and
    the records are those of a one-process run. The first is held after its first chunk (``DLMEVAL_TRACE_HOLD``)
    until the second has computed the rest, so the two overlap however busy the machine is (started together,
    one could finish before the other opened the run)."""
    cands = _texts(tmp_path / "c.txt")
    one, two = tmp_path / "one.sqlite", tmp_path / "two.sqlite"
    t_one, t_two = tmp_path / "one.trace", tmp_path / "two.trace"
    gate = tmp_path / "go"
    base = [sys.executable, "-m", "dlmeval", "--no-progress"]
    r = subprocess.run(
        [*base, "--store", str(one), *SCORE, "--candidates", str(cands)],
        env=_env(DLMEVAL_TRACE_CHUNKS=str(t_one)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    alone = _trace(t_one)
    assert len(alone) == 4

    def start(**env):
        cmd = [*base, "--store", str(two), *SCORE, "--candidates", str(cands)]
        kw = dict(stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return subprocess.Popen(cmd, env=_env(DLMEVAL_TRACE_CHUNKS=str(t_two), **env), **kw)

    first = start(DLMEVAL_TRACE_HOLD=str(gate))
    try:
        _wait_for(lambda: len(_trace(t_two)) >= 1 or first.poll() is not None)
        assert first.poll() is None, first.communicate()[1][-2000:]
        second = start()
        _wait_for(lambda: len(_trace(t_two)) >= len(alone) or second.poll() is not None)
    finally:
        gate.touch()
    errs = [p.communicate(timeout=600)[1] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], [e[-2000:] for e in errs]
    shared = _trace(t_two)
    assert sorted(k for _, k, _ in alone) == sorted(k for _, k, _ in shared)
    assert len(shared) == len({k for _, k, _ in shared})  # each chunk once
    assert sum(n for _, _, n in shared) == 200
    assert [sum(pid == p.pid for pid, _, _ in shared) for p in (first, second)] == [1, len(alone) - 1]
    # the second saw the first's lease and said so, once (the first may too: the second's last chunk can be traced
    # and not yet written when the first goes on)
    # (rich wraps a warning over several lines when stderr is not a terminal: compare with the whitespace joined)
    said = [" ".join(e.split()).count("is also being written by process") for e in errs]
    assert said[1] == 1 and said[0] <= 1, errs
    assert f"process {first.pid} " in " ".join(errs[1].split())
    with sqlite3.connect(one) as a, sqlite3.connect(two) as b:
        q = "SELECT run_id, key, result FROM items ORDER BY run_id, key"
        assert a.execute(q).fetchall() == b.execute(q).fetchall()
        assert b.execute("SELECT status FROM runs").fetchall() == [("done",)]
        assert b.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def _chunk_run(tmp_path):
    st = RunStore(tmp_path / "runs.sqlite")
    run = st.open_run("toy-chunks", {"n": 6})
    return st, run, fixed_chunks(range(6), [f"item/{i}" for i in range(6)], 2)


def _plant_claim(st, run_id, keys, pid, start) -> None:
    """A claim on a chunk written as another process (``pid``, its start time ``start``) on this host would."""
    with st.transaction() as c:
        c.execute(lease.CLAIMS_SCHEMA)
        c.execute(
            "INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, lease.chunk_id(keys), lease.holder()[0], pid, start, "2026-01-01T00:00:00Z"),
        )


def test_a_chunk_claimed_by_a_dead_process_is_taken_over(tmp_path):
    st, run, work = _chunk_run(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _plant_claim(st, run.run_id, work[1].keys, dead.pid, "1")
    computed = []
    work_loop(run, work, lambda c: computed.append(c.keys) or [{"sq": i * i} for i in c.items])
    assert computed == [c.keys for c in work] and run.get("item/3") == {"sq": 9}
    st.close()


def test_a_chunk_another_live_process_holds_is_waited_for_not_computed(tmp_path):
    st, run, work = _chunk_run(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _plant_claim(st, run.run_id, work[2].keys, other.pid, lease.process_start(other.pid))

        def the_other_writes():  # what the other process would do: write the chunk, drop its claim
            time.sleep(1.0)
            with RunStore(tmp_path / "runs.sqlite") as o:
                o.get_run(run.run_id).put_many([("item/4", {"sq": 16}), ("item/5", {"sq": 25})])
                with o.transaction() as c:
                    lease.unclaim(c, run.run_id, work[2].keys)

        t = threading.Thread(target=the_other_writes)
        t.start()
        computed = []
        work_loop(run, work, lambda c: computed.append(c.keys) or [{"sq": i * i} for i in c.items])
        t.join()
    finally:
        other.kill()
        other.wait()
    assert computed == [work[0].keys, work[1].keys]  # the held chunk was not computed here
    assert run.get("item/5") == {"sq": 25} and len(run) == 6
    st.close()


def test_the_resume_hint_adds_the_recorded_thread_count_only_where_missing_and_accepted():
    from dlmeval.store.lease import resume_hint

    sig = "dlm:x|seed:0|cfg:1|threads:3|det:0|device:cpu"
    assert (
        resume_hint("dlmeval score --model m", sig) == "rerun `dlmeval score --model m --threads 3` to resume"
    )
    assert resume_hint("dlmeval score --threads 2", sig) == "rerun `dlmeval score --threads 2` to resume"
    assert resume_hint("dlmeval score --threads=2", sig).endswith("--threads=2` to resume")
    assert resume_hint("dlmeval lm-eval --model m", sig) == "rerun `dlmeval lm-eval --model m` to resume"
    assert resume_hint("dlmeval score", "dlm:x|seed:0") == "rerun `dlmeval score` to resume"
    assert resume_hint(None, sig) == "rerun its command to resume"


def test_the_resume_hint_reads_the_recorded_command_with_the_cli_parser(tmp_path, capsys):
    """Where the word heuristic reads a command line wrong, the CLI's own parser reads it right: an abbreviated
    ``--thread 2`` states the count, a store file named ``score`` is no command, and a quoted file name holding
    ``--threads`` states nothing; a line that does not parse falls back to the heuristic."""
    import shlex

    from dlmeval.cli.main import command_reader
    from dlmeval.store.lease import resume_hint

    read, sig = command_reader(), "dlm:x|seed:0|cfg:1|threads:3|det:0|device:cpu"
    abbreviated = "dlmeval score --model m --candidates c.txt --thread 2"
    assert resume_hint(abbreviated, sig).endswith("--thread 2 --threads 3` to resume")  # the heuristic: wrong
    assert resume_hint(abbreviated, sig, read) == f"rerun `{abbreviated}` to resume"
    store_named_score = "dlmeval --store score lm-eval --model dlmeval"
    assert resume_hint(store_named_score, sig).endswith(
        "--threads 3` to resume"
    )  # lm-eval takes no --threads
    assert resume_hint(store_named_score, sig, read) == f"rerun `{store_named_score}` to resume"
    quoted = shlex.join(["dlmeval", "sample", "--model", "m", "--prompts", "my --threads file.txt"])
    assert resume_hint(quoted, sig) == f"rerun `{quoted}` to resume"  # the heuristic sees it stated
    assert resume_hint(quoted, sig, read) == f"rerun `{quoted} --threads 3` to resume"
    assert read(["leaderboard"]) == (True, False)
    assert read(["score", "--threads=2", "--model", "m", "--candidates", "c.txt"]) == (True, True)
    assert read(["score", "--no-such-option"]) is None and read(["runs", "list"]) == (False, False)
    unknown = "dlmeval score --model m --no-such-option"  # another version's option: the heuristic decides
    assert resume_hint(unknown, sig, read) == f"rerun `{unknown} --threads 3` to resume"
    assert capsys.readouterr() == ("", "")  # argparse's complaints are not printed
    # `runs list` reads with the parser
    store = tmp_path / "runs.sqlite"
    with RunStore(store) as st:
        st.open_run("toy", {"n": 1}, [], 0, command_line=store_named_score).finish("failed")
    assert main(["--store", str(store), "--json", "runs", "list"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["resume"] == f"rerun `{store_named_score}` to resume"
