"""The hostile-user half of the bad-input battery (issue 25; tests/bad_inputs/test_careless.py is the careless-user half):
generated code that tries to get out, through the CLI path HumanEval takes (`dlmeval care`); ranks that read
different inputs; an adapter on the wrong base; NaN / inf human scores; interrupted runs; offline downloads; a
directory where a file should be.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from dlmeval import sandbox
from dlmeval.cli.main import main
from dlmeval.store import RunStore
from tests.conftest import tiny_care_spec

ISOLATED = sandbox.layers().ok

CARE_SPEC = tiny_care_spec(
    "care-hostile", steps=4, tasks={"humaneval": {"n": 2, "gen_tokens": 4, "timeout_s": 3, "memory_mb": 256}}
)


def _payload(out: str, port: int, pid: int) -> str:
    """Every way out the issue found, as module-level code of a HumanEval prompt: a write through ``dir_fd``, a
    subinterpreter (no audit hook there) that writes, runs ``os.system`` and forks, ``os.system``, a socket, a kill
    of an outside process, a fork bomb and a plain write."""
    inner = textwrap.dedent(
        f"""
        import os
        open({out!r} + "/subinterp.txt", "w").write("x")
        os.system("touch {out}/subinterp-system.txt")
        for _ in range(300):
            if os.fork() == 0:
                os._exit(0)
        """
    )
    return textwrap.dedent(
        f"""
        import os, socket
        def attempt(fn):
            try:
                fn()
            except BaseException as e:
                print("BLOCKED", type(e).__name__, flush=True)
        def dirfd_write():
            fd = os.open({out!r}, os.O_RDONLY)
            os.close(os.open("dirfd.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
        def subinterp():
            import _xxsubinterpreters as si
            si.run_string(si.create(isolated=False), {inner!r})
        def bomb():
            for _ in range(300):
                if os.fork() == 0:
                    import time
                    time.sleep(5)
                    os._exit(0)
        attempt(dirfd_write)
        attempt(subinterp)
        attempt(lambda: os.system("touch {out}/system.txt"))
        attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
        attempt(lambda: os.kill({pid}, 9))
        attempt(bomb)
        attempt(lambda: open({out!r} + "/plain.txt", "w").write("x"))
        attempt(lambda: bytearray(4 << 30))  # memory: far past memory_mb
        """
    )


#: the second HumanEval item: never ends (time)
LOOP = "while True:\n    pass\n"


def _care_data(root: Path, *prompt_codes: str) -> Path:
    from dlmeval.models.tiny import TINY_WORDS

    words = [w for w in TINY_WORDS if w.isalpha()]
    (root / "reference-text").mkdir(parents=True)
    (root / "tasks").mkdir()
    with open(root / "reference-text" / "webtext_test.jsonl", "w") as fh:
        for i in range(12):
            fh.write(json.dumps({"text": " ".join(words[(i + j) % len(words)] for j in range(14))}) + "\n")
    with gzip.open(root / "tasks" / "HumanEval.jsonl.gz", "wt") as fh:
        for i, code in enumerate(prompt_codes):
            # the completion lands inside a string literal, so the payload runs whatever the tiny model writes
            he = {
                "task_id": f"HumanEval/{i}",
                "prompt": code + 'def one():\n    return 1\n_COMPLETION = """\n',
                "entry_point": "one",
                "canonical_solution": "",
                "test": '"""\ndef check(f):\n    assert f() == 1\n',
            }
            fh.write(json.dumps(he) + "\n")
    return root


@pytest.fixture
def hostile(tmp_path):
    """A world-writable directory under /tmp, a listener, an outside victim process of the child's user, and a Care
    data directory whose HumanEval prompt attacks all three."""
    out = tempfile.mkdtemp(prefix="dlmeval-public-", dir="/tmp")
    os.chmod(out, 0o777)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    victim = subprocess.Popen(["sleep", "300"], **sandbox.drop_to())
    (tmp_path / "s.toml").write_text(CARE_SPEC)
    data = _care_data(tmp_path / "data", _payload(out, srv.getsockname()[1], victim.pid), LOOP)
    yield {"out": out, "srv": srv, "victim": victim, "spec": tmp_path / "s.toml", "data": data}
    victim.kill()
    victim.wait()
    srv.close()
    shutil.rmtree(out, ignore_errors=True)


def _connected(srv: socket.socket) -> bool:
    try:
        srv.accept()[0].close()
        return True
    except BlockingIOError:
        return False


def _care(store: Path, h: dict, *extra: str) -> int:
    return main(
        [*extra, "--store", str(store), "--no-progress", "care", str(h["spec"]), "--data-dir", str(h["data"])]
    )


def _isolation_notes(store: Path) -> list[str]:
    with RunStore(store) as st:
        return [w for r in st.list_runs() for w in st.get_run(r["run_id"]).warnings() if "isolation" in w]


@pytest.mark.skipif(not ISOLATED, reason=f"no OS isolation here: {sandbox.isolation_problem()}")
def test_care_humaneval_payload_does_not_get_out(tmp_path, hostile, monkeypatch):
    monkeypatch.setenv(sandbox.UNSAFE_ENV, "0")  # main() sets it for --sandbox-unsafe; undone after
    assert _care(tmp_path / "runs.sqlite", hostile) == 0
    assert os.listdir(hostile["out"]) == []  # no write: dir_fd, subinterpreter, os.system, plain
    assert not _connected(hostile["srv"])
    assert hostile["victim"].poll() is None
    (note,) = set(_isolation_notes(tmp_path / "runs.sqlite"))
    assert "fs+netns+pidns+proc+nproc" in note and "unsafe" not in note
    with RunStore(tmp_path / "runs.sqlite") as st:
        he = {
            k: v
            for r in st.list_runs()
            for k, v in st.get_run(r["run_id"]).results().items()
            if k.startswith("humaneval/")
        }
    statuses = {v["item"]: v["status"] for v in he.values()}
    # the payload item ends normally (each attempt refused: the file's check then passes), the loop is killed
    assert statuses == {"HumanEval/0": "passed", "HumanEval/1": "timeout"}, he


def test_care_without_isolation_refuses_and_unsafe_is_recorded(tmp_path, hostile, monkeypatch, capsys):
    """No bubblewrap: the probes find no file-system layer, `dlmeval care` refuses in one line before a store
    exists; with --sandbox-unsafe it runs and the run records `+unsafe`. The dir_fd write of issue 25 reached /tmp
    here; since issue 32 the plain launcher's seccomp filter refuses it (tests/bad_inputs/test_exec.py shows it
    reaching /tmp without the filter: the control)."""
    from dlmeval.sandbox import launch

    monkeypatch.setenv(launch.BWRAP_ENV, "0")
    monkeypatch.setenv(sandbox.UNSAFE_ENV, "0")  # main() sets it for --sandbox-unsafe; undone after
    monkeypatch.setenv(sandbox.SAME_USER_ENV, "0")
    for f in (launch.launcher, sandbox.layers):
        f.cache_clear()
    try:
        store = tmp_path / "runs.sqlite"
        assert _care(store, hostile) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "refusing to run generated code" in err and "lacks fs" in err
        assert not store.exists()
        assert _care(store, hostile, "--sandbox-unsafe") == 0
        notes = set(_isolation_notes(store))
        assert len(notes) == 1 and "plain:" in next(iter(notes)) and "+unsafe" in next(iter(notes))
        assert "dirfd.txt" not in os.listdir(hostile["out"])
    finally:
        monkeypatch.delenv(launch.BWRAP_ENV)
        for f in (launch.launcher, sandbox.layers):
            f.cache_clear()


# ---------------------------------------------------------------------------------------------- meta-eval data
META = ["meta-eval", "--benchmarks", "SFHOT", "--limit", "30", "--metrics", "lexical", "--bootstrap", "0"]


def _sfhot_copy(data_root: Path, dest: Path, edit=None) -> tuple[Path, Path]:
    import pickle

    from dlmeval.data.bartscore import bartscore_path
    from dlmeval.data.safepickle import safe_load_pickle

    src = bartscore_path("SFHOT", data_root)
    out = dest / src.relative_to(data_root)
    out.parent.mkdir(parents=True)
    data = safe_load_pickle(src)
    if edit is not None:
        edit(data)
    with open(out, "wb") as fh:
        pickle.dump(data, fh)
    return dest, out


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_human_score_is_refused_before_the_store_with_file_item_dimension(
    data_root, tmp_path, capsys, bad
):
    from dlmeval.data.bartscore import BARTSCORE_BENCHMARKS

    dim = BARTSCORE_BENCHMARKS["SFHOT"].dimensions[0]
    keys = {}

    def edit(data):  # SFHOT is a D2T set: one judged output per pickle key
        key = list(data)[3]
        data[key]["scores"][dim] = bad
        keys["item"] = key

    root, pkl = _sfhot_copy(data_root, tmp_path / "data", edit)
    store = tmp_path / "runs.sqlite"
    rc = main(
        ["--store", str(store), "--no-progress", *META, "--data-dir", str(root), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert str(pkl) in err and f"item {keys['item']!r}" in err
    assert f"human score {dim!r} is {bad!r}, not a finite number" in err
    assert not store.exists()


def test_a_directory_where_data_pkl_should_be_says_so(data_root, tmp_path, capsys):
    from dlmeval.data.bartscore import bartscore_path

    pkl = tmp_path / "data" / bartscore_path("SFHOT", data_root).relative_to(data_root)
    pkl.mkdir(parents=True)  # a directory named data.pkl
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "--no-progress", *META, "--data-dir", str(tmp_path / "data"), "--out", "o"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"{pkl} is a directory, not a file" in err and "not found" not in err
    assert not store.exists()


# ---------------------------------------------------------------------------------------------- adapters
def test_an_adapter_on_another_base_is_refused_and_the_override_is_recorded(tmp_path, capsys, monkeypatch):
    import torch

    from dlmeval.models.adapters import ANY_BASE_ENV

    monkeypatch.setenv(ANY_BASE_ENV, "0")  # main() sets it for --adapter-any-base; undone after the test

    from dlmeval.models.tiny import tiny_model
    from dlmeval.train.finetune import FinetuneConfig, finetune

    pairs = [{"source": "the cat sat on the mat .", "target": "a cat sat ."}] * 2
    finetune(
        tiny_model("bert"), pairs, FinetuneConfig(steps=1, batch_size=2, rank=2, alpha=4), tmp_path / "ad"
    )
    other = tiny_model("bert")  # the same shapes, other weights
    with torch.no_grad():
        next(other.module.parameters()).add_(0.01)
    other.module.save_pretrained(tmp_path / "other")
    other.tokenizer.save_pretrained(tmp_path / "other")
    store = tmp_path / "runs.sqlite"

    def score(model: str, *flags: str) -> tuple[int, str, str]:
        argv = [*flags, "--json", "--no-progress", "--store", str(store), "score", "--model", model]
        argv += [
            "--adapter",
            str(tmp_path / "ad"),
            "--text",
            "--candidates",
            "a cat",
            "--sources",
            "the cat sat",
        ]
        argv += ["-K", "2", "-T", "2"]
        rc = main(argv)
        out, err = capsys.readouterr()
        return rc, out, err.strip()

    rc, _, err = score(f"hf:{tmp_path / 'other'}")
    want = json.loads((tmp_path / "ad" / "dlmeval_train.json").read_text())["base_identity"]["weights_sha256"]
    assert rc == 2 and len(err.splitlines()) == 1
    assert "trained on tiny-bert from tiny:bert:seed=0 (weights sha256 " + want[:12] in err
    assert "is being loaded onto" in err
    assert str(tmp_path / "other") in err and "--adapter-any-base" in err
    assert not store.exists()
    rc, out, _ = score(f"hf:{tmp_path / 'other'}", "--adapter-any-base")
    assert rc == 0
    with RunStore(store) as st:
        (run,) = [st.get_run(r["run_id"]) for r in st.list_runs()]
        base = run.signature.models[0]["adapter"]["base"]
    assert base["check"].startswith("overridden") and base["expected"] == want != base["found"]
    rc, out, _ = score("tiny-bert")  # the base it was trained on: accepted, nothing extra in the identity
    assert rc == 0
    with RunStore(store) as st:
        ids = [st.get_run(r["run_id"]).signature.models[0]["adapter"] for r in st.list_runs()]
    assert len(ids) == 2 and "base" not in ids[1]


# ---------------------------------------------------------------------------------------------- two ranks
@pytest.mark.slow
def test_ranks_in_different_directories_with_different_inputs_refuse_in_one_line(tmp_path):
    """The issue's case: the same argv on 2 ranks (torchrun --standalone), each started in its own directory with
    its own good.txt: every rank stops in one line naming both files, nothing is scored, no store is made."""
    import sys

    for r, text in ((0, "the cat sat on the mat\n"), (1, "a dog ran home\n")):
        (tmp_path / f"r{r}").mkdir()
        (tmp_path / f"r{r}" / "good.txt").write_text(text)
    store = tmp_path / "runs.sqlite"
    # each rank changes into r<RANK> before dlmeval starts: a job whose ranks start in different directories
    boot = tmp_path / "in_rank_dir.py"
    boot.write_text(
        "import os, sys\nos.chdir('r' + os.environ['RANK'])\nfrom dlmeval.cli.main import main\nsys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", DLMEVAL_DIST_TIMEOUT="120")
    import dlmeval

    src = str(Path(dlmeval.__file__).resolve().parents[1])  # this checkout, whatever the ranks' directories
    env["PYTHONPATH"] = os.pathsep.join([src, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    argv = ["--store", str(store), "--no-progress", "score", "--model", "tiny-bert", "--config", "marginal"]
    argv += ["--candidates", "good.txt", "-K", "2", "-T", "2"]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(boot),
        *argv,
    ]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.startswith("dlmeval: error:")]
    assert len(lines) == 2 and lines[0] == lines[1], r.stderr[-3000:]  # each rank: the same one line
    msg = lines[0]
    assert "ranks read different inputs: good.txt" in msg
    assert str(tmp_path / "r0" / "good.txt") in msg and str(tmp_path / "r1" / "good.txt") in msg
    assert "Traceback" not in r.stderr.split("dlmeval: error:")[0] and "TypeError" not in r.stderr
    assert not store.exists()
    # the control: the same files behind the two paths start (and score) normally
    (tmp_path / "r1" / "good.txt").write_text((tmp_path / "r0" / "good.txt").read_text())
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_rank_inputs_are_the_named_paths_outputs_left_out(tmp_path, monkeypatch):
    from dlmeval.parallel.inputs import compare, local_inputs

    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("y")
    (tmp_path / "out").mkdir()
    (tmp_path / "s.sqlite").write_text("")
    monkeypatch.setenv("DLMEVAL_DATA", str(tmp_path / "d"))
    argv = [
        "--store",
        "s.sqlite",
        "score",
        "--candidates=a.txt",
        "--out",
        "out",
        "--sources",
        "nope.txt",
        "tiny",
    ]
    got = local_inputs(argv, cwd=str(tmp_path))
    assert sorted(got) == ["a.txt", "data directory"]  # outputs and missing names left out
    assert compare([got, dict(got)]) is None
    (tmp_path / "d" / "f").write_text("z")  # one file of the data directory changed on "another rank"
    msg = compare([got, local_inputs(argv, cwd=str(tmp_path))])
    assert msg.startswith("ranks read different inputs: data directory (rank 0: ") and "a.txt" not in msg
    assert "rank 1: not there" in compare([got, {"data directory": got["data directory"]}])


# ---------------------------------------------------------------------------------------------- downloads
def test_allow_download_without_network_fails_fast_in_one_line(tmp_path, capsys, monkeypatch):
    import time

    from dlmeval.models import hub

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()  # nothing listens there: connection refused, as on a machine without network
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub._unreachable.cache_clear()
    store = tmp_path / "runs.sqlite"
    t0 = time.monotonic()
    argv = ["--store", str(store), "--no-progress", "score", "--model", "hf:dlmeval-test/no-such-model"]
    rc = main([*argv, "--allow-download", "--text", "--candidates", "a cat", "--config", "marginal"])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err.strip()
    hub._unreachable.cache_clear()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"the Hugging Face hub at http://127.0.0.1:{port} is not reachable" in err
    assert "dlmeval-test/no-such-model" in err and "Retrying" not in err
    assert elapsed < 30 and not store.exists()  # not 5 retries of 8 s


# ---------------------------------------------------------------------------------------------- interrupted runs
WRITER = """
import os, sys, time
from dlmeval.store import RunStore
st = RunStore(sys.argv[1])
run = st.open_run("toy", {"n": 3}, [], 0, command_line="dlmeval toy --n 3")
run.put("item-0", {"x": 1})
print("WROTE", flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), 9)
time.sleep(120)
"""


def test_a_killed_run_shows_as_interrupted_with_how_to_resume(tmp_path, capsys):
    import signal
    import sys

    store = tmp_path / "runs.sqlite"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(sandbox.__file__).parents[2]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    r = subprocess.run(
        [sys.executable, "-c", WRITER, str(store), "kill"], env=env, capture_output=True, text=True
    )
    assert r.returncode == -signal.SIGKILL and "WROTE" in r.stdout
    assert main(["--store", str(store), "runs", "list"]) == 0
    out = capsys.readouterr().out
    (row,) = [x for x in out.splitlines() if x.split()[1:2] == ["toy"]]
    assert "interrupted" in row.split()
    assert "is gone" in out and "rerun `dlmeval toy --n 3` to resume" in out
    with RunStore(store, must_exist=True) as st:
        (info,) = st.list_runs()
    assert info["status"] == "interrupted" and info["lease"]["pid"] > 0 and "resume" in info
    assert main(["--store", str(store), "runs", "show", info["run_id"]]) == 0
    shown = capsys.readouterr().out
    assert "status interrupted" in shown and "rerun `dlmeval toy --n 3` to resume" in shown
    # a live writer is running, and the same run after its process is killed is interrupted
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "live.sqlite"), "sleep"], env=env,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert p.stdout.readline().strip() == "WROTE"
        with RunStore(tmp_path / "live.sqlite", must_exist=True) as st:
            assert [x["status"] for x in st.list_runs()] == ["running"]
    finally:
        p.kill()
        p.wait()
    with RunStore(tmp_path / "live.sqlite", must_exist=True) as st:
        assert [x["status"] for x in st.list_runs()] == ["interrupted"]
    # resuming writes: the lease is this process's, the run running again; finishing drops the lease
    with RunStore(store) as st:
        run = st.get_run(info["run_id"])
        run.put("item-1", {"x": 2})
        assert [x["status"] for x in st.list_runs()] == ["running"]
        run.finish()
        (after,) = st.list_runs()
    assert after["status"] == "done" and "lease" not in after


def test_a_lease_names_one_process_and_other_hosts_go_stale(tmp_path):
    import datetime as dt
    import socket as so

    from dlmeval.store import lease

    me = {"host": so.gethostname(), "pid": os.getpid(), "pid_start": lease.process_start(os.getpid())}
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert not lease.gone({**me, "heartbeat": now})
    parent = os.getppid()
    assert not lease.gone({**me, "pid": parent, "pid_start": lease.process_start(parent), "heartbeat": now})
    assert lease.gone({**me, "pid": parent, "pid_start": "1", "heartbeat": now})  # the pid was reused
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=lease.STALE_S + 60)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )
    assert not lease.gone({**me, "host": "elsewhere", "heartbeat": now})
    assert lease.gone({**me, "host": "elsewhere", "heartbeat": old})
