"""Issue 32: the same stand-ins on every machine, the code and numerics behind every number in its signature, one
signature per run.

* the shipped stand-in weights are the same bytes under two CPU instruction sets (``ATEN_CPU_CAPABILITY``), match
  their manifest, and a damaged cache entry or an interrupted build leaves nothing wrong behind;
* every signature carries the code (version + source digest) and the numerics (threads, deterministic flag,
  device kinds, dtypes); ``runs show`` prints them; a run made by other code is refused unless
  ``--allow-code-change``, which the run records;
* two thread counts give identical bits or two run ids (here: two run ids, the thread count is in the id);
* what ``score`` / ``sample`` / ``care`` print is the stored signature.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlmeval.models import standin_regen
from dlmeval.models import standin_weights as sw
from dlmeval.store import RunStore
from dlmeval.store.code import ALLOW_ENV, code_identity

PY = sys.executable
SRC = Path(__file__).resolve().parents[2] / "src"
TEXTS = [
    "the cat sat on the mat",
    "a dog",
    "one two three four five",
    "it rains",
    "the river runs to the sea",
]


def _env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", ALLOW_ENV)}
    env.update({"PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, **extra)
    return env


def dlmeval(args, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "dlmeval", *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=600
    )


def _capabilities() -> list[str]:
    caps = ["default", "avx2"]
    try:
        if "avx512f" in Path("/proc/cpuinfo").read_text():
            caps.append("avx512")
    except OSError:
        pass
    return caps


# ------------------------------------------------------------------------------------------------ stand-ins
DIGEST_SCRIPT = """
import hashlib, json
from dlmeval.models.standins import standin_checkpoint
from dlmeval.models.standin_families import standin_dir
from dlmeval.models.tiny import tiny_model
from dlmeval.models.base import state_dict_sha256
out = {
    "tiny-llada": hashlib.sha256((standin_checkpoint("llada") / "model.safetensors").read_bytes()).hexdigest(),
    "tiny-bert-chat": hashlib.sha256((standin_dir("bert-chat") / "model.safetensors").read_bytes()).hexdigest(),
    "tiny-bert": state_dict_sha256(tiny_model("bert").module),
    "tiny-causal": state_dict_sha256(tiny_model("causal").module),
}
print(json.dumps(out))
"""


def test_stand_in_weights_are_the_same_bytes_under_every_cpu_capability(tmp_path):
    """Trained stand-ins (and even torch.nn.init) give other bits under another instruction set; the shipped
    weights do not: each capability materialises the stand-ins in its own empty cache."""
    got = {}
    for cap in _capabilities():
        r = subprocess.run(
            [PY, "-c", DIGEST_SCRIPT],
            env=_env(ATEN_CPU_CAPABILITY=cap, DLMEVAL_CACHE=str(tmp_path / cap), OMP_NUM_THREADS="2"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        got[cap] = json.loads(r.stdout.strip().splitlines()[-1])
    first = got["default"]
    for cap, d in got.items():
        assert d == first, f"{cap} gave other weights than default: {d} vs {first}"
    m = sw.manifest()
    assert first["tiny-llada"] == m["tiny-llada-s0-l2-h32"]["sha256"]
    assert first["tiny-bert-chat"] == m["tiny-bert-chat-s0-l2-h32"]["sha256"]


def test_shipped_weights_match_their_manifest_and_stay_small():
    m = sw.manifest()
    assert set(m) == {f"tiny-{k}-{sw.DEFAULT}" for k in sw.SHIPPED}
    total = 0
    for stem, entry in m.items():
        path = sw.WEIGHTS / f"{stem}.safetensors"
        assert sw.file_sha256(path) == entry["sha256"], stem
        assert path.stat().st_size == entry["bytes"]
        total += entry["bytes"]
    assert total < 2_000_000  # about 1.2 MB for ten stand-ins


def test_a_damaged_cached_stand_in_is_rebuilt_from_the_shipped_file(tmp_path):
    from dlmeval.models.standins import cached_checkpoint, standin_checkpoint

    d = standin_checkpoint("llada", root=tmp_path)
    want = sw.manifest()["tiny-llada-s0-l2-h32"]["sha256"]
    assert sw.file_sha256(d / "model.safetensors") == want
    (d / "model.safetensors").write_bytes(b"not weights")
    cached_checkpoint.cache_clear()
    d2 = standin_checkpoint("llada", root=tmp_path)
    assert sw.file_sha256(d2 / "model.safetensors") == want


def test_a_shipped_file_that_does_not_match_the_manifest_is_refused(tmp_path, monkeypatch):
    from dlmeval.errors import InputError

    fake = tmp_path / "weights"
    fake.mkdir()
    shutil.copyfile(sw.WEIGHTS / "manifest.json", fake / "manifest.json")
    (fake / "tiny-llada-s0-l2-h32.safetensors").write_bytes(b"tampered")
    monkeypatch.setattr(sw, "WEIGHTS", fake)
    with pytest.raises(InputError, match="tiny-llada-s0-l2-h32.*regenerate"):
        sw.install("tiny-llada-s0-l2-h32", tmp_path / "model.safetensors")


def test_a_failed_build_leaves_no_part_directory(tmp_path):
    from dlmeval.models.standins import built_once

    def build(tmp: Path) -> None:
        (tmp / "half.bin").write_bytes(b"x" * 100)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        built_once("tiny-x", build, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


KILLED_BUILD = """
import sys, time
from pathlib import Path
from dlmeval.models.standins import built_once
def build(tmp):
    (tmp / "half.bin").write_bytes(b"x")
    time.sleep(600)
built_once("tiny-killed", build, sys.argv[1])
"""


def test_a_killed_build_leaves_no_part_directory(tmp_path):
    """SIGKILL runs no cleanup: the next build removes the dead process's ``.part-<pid>-*`` directory."""
    from dlmeval.models.standins import built_once

    proc = subprocess.Popen([PY, "-c", KILLED_BUILD, str(tmp_path)], env=_env())
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*.part-*/half.bin")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(tmp_path.glob("tiny-killed.part-*")), "the build never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(tmp_path.glob("*.part-*"))  # left behind by the killed process
    out = built_once("tiny-killed", lambda tmp: (tmp / "model.safetensors").write_bytes(b"w"), str(tmp_path))
    assert (out / "model.safetensors").read_bytes() == b"w"
    assert not list(tmp_path.glob("*.part-*"))


@pytest.mark.slow
def test_regenerating_a_stand_in_reproduces_its_shipped_weights(tmp_path):
    """``python -m dlmeval.models.standin_regen`` trains under ATEN_CPU_CAPABILITY=default, one thread: the
    training code still produces the shipped bytes (a change to it must regenerate them)."""
    path = standin_regen.rebuild("llada", tmp_path)
    assert sw.file_sha256(path) == sw.manifest()["tiny-llada-s0-l2-h32"]["sha256"]


# ------------------------------------------------------------------------------------------------ code identity
def _open(store, **kw):
    return store.open_run(
        "toy", {"n": 1}, [{"name": "m", "dtype": "float32", "device": "cpu"}], 0, "toy", **kw
    )


def _set_code(path: Path, rid: str, code: dict | None) -> None:
    con = sqlite3.connect(path)
    sig = json.loads(con.execute("SELECT signature FROM runs WHERE run_id = ?", (rid,)).fetchone()[0])
    if code is None:
        sig.pop("code", None)
    else:
        sig["code"] = code
    con.execute("UPDATE runs SET signature = ? WHERE run_id = ?", (json.dumps(sig), rid))
    con.commit()
    con.close()


def test_every_signature_records_the_code_and_numerics(tmp_path):
    with RunStore(tmp_path / "s.sqlite") as store:
        run = _open(store)
        sig = run.signature
        assert sig.code == code_identity()
        assert len(sig.code["source_sha256"]) == 64 and sig.code["version"]
        n = sig.numerics
        import torch

        assert n["threads"] == torch.get_num_threads() and n["deterministic"] is False
        assert n["devices"] == ["cpu"] and n["dtypes"] == ["float32"]
        assert (
            f"src:{sig.code['source_sha256'][:8]}" in sig.short() and f"threads:{n['threads']}" in sig.short()
        )
        assert run.info()["sessions"][0]["versions"]["code"] == sig.code


def test_the_code_is_not_in_the_run_id_but_other_code_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    other = {"version": "0.0.9", "source_sha256": "ab" * 32}
    with RunStore(path) as store:
        rid = _open(store).run_id
    _set_code(path, rid, other)
    from dlmeval.errors import InputError

    with RunStore(path) as store:
        with pytest.raises(InputError) as e:
            _open(store, allow_code_change=False)
        msg = str(e.value)
        assert f"run {rid} was made by dlmeval 0.0.9 (source abababababab)" in msg
        assert code_identity()["source_sha256"][:12] in msg and "--allow-code-change" in msg
        run = _open(store, allow_code_change=True)
        assert run.run_id == rid  # the same run, resumed, and the run says so
        assert any("--allow-code-change" in w["message"] for w in run.warning_records())
        assert run.info()["sessions"][-1]["versions"]["allow_code_change"] is True


def test_a_run_stored_without_code_is_refused_as_unknown_code(tmp_path):
    path = tmp_path / "s.sqlite"
    with RunStore(path) as store:
        rid = _open(store).run_id
    _set_code(path, rid, None)
    from dlmeval.errors import InputError

    with RunStore(path) as store, pytest.raises(InputError, match="code not recorded"):
        _open(store, allow_code_change=False)


def test_resume_by_other_code_on_the_command_line(tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(TEXTS[:2]) + "\n")
    args = ["--store", "s.sqlite", "--json", "score", "--model", "tiny-llada", "--config", "marginal",
            "--candidates", "c.txt", "--masks", "2", "--rates", "2"]  # fmt: skip
    r = dlmeval(args, tmp_path)
    assert r.returncode == 0, r.stderr
    rid = json.loads(r.stdout)["run_id"]
    _set_code(tmp_path / "s.sqlite", rid, {"version": "0.0.9", "source_sha256": "cd" * 32})
    r = dlmeval(args, tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "dlmeval 0.0.9 (source cdcdcdcdcdcd)" in r.stderr
    r = dlmeval(["--allow-code-change", *args], tmp_path)
    assert r.returncode == 0, r.stderr
    show = dlmeval(["--store", "s.sqlite", "runs", "show", rid], tmp_path)
    assert "code: dlmeval " in show.stdout and "numerics: threads 1" in show.stdout
    assert "--allow-code-change]" in show.stdout  # the session resumed by other code
    info = json.loads(dlmeval(["--store", "s.sqlite", "--json", "runs", "show", rid], tmp_path).stdout)
    assert info["signature"]["code"]["version"] and info["signature"]["numerics"]["threads"] == 1


COPY_IMPORT = """
import json, dlmeval
from dlmeval.store.code import code_identity
print(json.dumps(code_identity()))
"""


def test_the_package_imports_from_a_plain_source_tree_and_its_digest_follows_the_files(tmp_path):
    """No git, not installed (PYTHONPATH only): a version still (the package's own), and a digest that changes
    with a source file."""
    tree = tmp_path / "tree"
    shutil.copytree(
        SRC / "dlmeval", tree / "dlmeval", ignore=shutil.ignore_patterns("__pycache__", "default-dlm")
    )

    def ident():
        r = subprocess.run(
            [PY, "-c", COPY_IMPORT],
            env=_env(PYTHONPATH=str(tree), DLMEVAL_CACHE=str(tmp_path / "cache")),
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    a = ident()
    assert a["version"] == __import__("dlmeval").__version__
    assert ident() == a  # from the digest cache
    assert json.loads((tmp_path / "cache" / "code-digest.json").read_text())
    f = tree / "dlmeval" / "stats" / "__init__.py"
    f.write_text(f.read_text() + "\n# changed\n")
    assert ident()["source_sha256"] != a["source_sha256"]


# ------------------------------------------------------------------------------------------------ numerics
def test_two_thread_counts_give_identical_bits_or_different_run_ids(tmp_path):
    """The thread count moves scores in the last bits (9 of 300 in issue 32): it is in the run id, so two thread
    counts are two runs, never one run holding both."""
    (tmp_path / "c.txt").write_text("\n".join(TEXTS) + "\n")
    args = ["--store", "s.sqlite", "--json", "score", "--model", "tiny-llada", "--config", "marginal",
            "--candidates", "c.txt", "--masks", "4", "--rates", "2"]  # fmt: skip
    got = {}
    for label, extra, env in (
        ("omp1", [], {"OMP_NUM_THREADS": "1"}),
        ("omp2", [], {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}),
        ("flag2", ["--threads", "2"], {"OMP_NUM_THREADS": "1"}),
    ):
        r = dlmeval([*args, *extra], tmp_path, **env)
        assert r.returncode == 0, r.stderr
        got[label] = json.loads(r.stdout)
    scores = {k: [it["score"] for it in v["items"]] for k, v in got.items()}
    ids = {k: v["run_id"] for k, v in got.items()}
    assert "threads:1|" in got["omp1"]["signature"] and "threads:2|" in got["omp2"]["signature"]
    assert (
        ids["omp2"] == ids["flag2"] and scores["omp2"] == scores["flag2"]
    )  # --threads 2 is OMP_NUM_THREADS=2
    assert ids["omp1"] != ids["omp2"] or scores["omp1"] == scores["omp2"]
    assert ids["omp1"] != ids["omp2"]  # the thread count is in the run id
    assert dlmeval(
        ["--store", "s.sqlite", "score", "--threads", "0", "--candidates", "c.txt"], tmp_path
    ).stderr == ("dlmeval: error: --threads must be at least 1, got 0\n")


# ------------------------------------------------------------------------------------------------ one signature
def _stored(tmp_path, rid: str) -> str:
    r = dlmeval(["--store", "s.sqlite", "--json", "runs", "show", rid], tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["signature"]["short"]


def test_score_prints_the_stored_signature(tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(TEXTS[:3]) + "\n")
    r = dlmeval(["--store", "s.sqlite", "--json", "score", "--model", "tiny-llada", "--config", "marginal",
                 "--candidates", "c.txt", "--masks", "2", "--rates", "2", "--output", "o.csv"], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    stored = _stored(tmp_path, out["run_id"])
    assert out["signature"] == stored
    assert "batching" in out["config"]  # the stored configuration, not the scorer's own
    import pandas as pd

    assert set(pd.read_csv(tmp_path / "o.csv")["signature"]) == {stored}


def test_sample_prints_the_stored_signature(tmp_path):
    r = dlmeval(["--store", "s.sqlite", "--json", "sample", "--model", "tiny-llada", "--prompt", "the cat",
                 "--length", "4", "--steps", "4"], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["signature"] == _stored(tmp_path, out["run_id"])


@pytest.mark.slow
def test_care_prints_the_stored_signature(tmp_path):
    r = dlmeval(["--store", "s.sqlite", "--json", "care", "care-tiny", "--out", "o"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["signature"] == _stored(tmp_path, out["sweep_run"])
    sweep_models = out["signature"].split("|model:")[1].split("|")[0].split("+")
    own = [_stored(tmp_path, rid).split("|model:")[1].split("|")[0] for rid in out["model_runs"].values()]
    # each model's run names its own model beside the evaluator they share; the sweep names all of them
    firsts = [o.split("+")[0] for o in own]
    shared = {o.split("+", 1)[1] for o in own}
    assert len(set(firsts)) == 2 and len(shared) == 1
    assert sorted(sweep_models) == sorted([*firsts, *shared])


def test_version_flag_prints_the_version_runs_record(capsys):
    """`dlmeval --version` is the code version a run signature records, not the package's fallback string."""
    from dlmeval.cli.main import main
    from dlmeval.store.code import code_version

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"dlmeval {code_version()}"


def test_the_install_time_version_file_is_not_part_of_the_source_digest():
    """setuptools-scm writes _version.py with the git node and a date at each install: a reinstall of the same
    sources must keep their digest (else every stored run is refused as other code)."""
    from dlmeval.store import code

    assert all(p.name != "_version.py" or p.parent != code.PACKAGE for p in code._files())
