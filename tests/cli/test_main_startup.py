"""Start-up cost (#36): commands that do nothing heavy import neither torch nor transformers, and the CLI's thread
policy (OMP_WAIT_POLICY=PASSIVE, a CPU quota caps the thread count) is set before torch loads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dlmeval.cli import main as cli_main

LIGHT = [["--help"], ["runs", "list"], ["data", "list"], ["models"], ["--json", "models"]]


@pytest.mark.parametrize("cmd", LIGHT, ids=lambda c: " ".join(c))
def test_light_commands_import_no_torch(cmd, tmp_path):
    code = f"""
import sys
from dlmeval.cli.main import main
try:
    rc = main({cmd!r})
except SystemExit as e:
    rc = e.code
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print("RC", rc, "HEAVY", heavy, file=sys.stderr)
"""
    env = {**os.environ, "DLMEVAL_STORE": str(tmp_path / "s.sqlite")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "RC 0 HEAVY []" in r.stderr, r.stderr[-2000:]


def test_thread_policy_sets_passive_wait_unless_the_user_chose():
    env: dict[str, str] = {}
    cli_main.thread_policy(env)
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "4"
    env = {"OMP_WAIT_POLICY": "ACTIVE", "OPENBLAS_THREAD_TIMEOUT": "28"}
    cli_main.thread_policy(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE", "OPENBLAS_THREAD_TIMEOUT": "28"}  # the user's choices stand


def test_thread_policy_caps_threads_at_the_cpu_quota(monkeypatch):
    monkeypatch.setattr(cli_main, "usable_cpus", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    env: dict[str, str] = {}
    cli_main.thread_policy(env)
    assert env["OMP_NUM_THREADS"] == "1"
    env = {"OMP_NUM_THREADS": "3"}
    cli_main.thread_policy(env)
    assert env["OMP_NUM_THREADS"] == "3"  # the user's choice stands
    monkeypatch.setattr(cli_main, "usable_cpus", lambda: 4)
    env = {}
    cli_main.thread_policy(env)
    assert "OMP_NUM_THREADS" not in env  # no quota below the affinity: torch's own default


def test_cli_process_runs_with_passive_wait_policy(tmp_path):
    code = """
import os, sys
from dlmeval.cli.main import main
try:
    main(["runs", "list"])
finally:
    print("POLICY", os.environ.get("OMP_WAIT_POLICY"), os.environ.get("OPENBLAS_THREAD_TIMEOUT"), file=sys.stderr)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT")}
    env["DLMEVAL_STORE"] = str(tmp_path / "s.sqlite")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "POLICY PASSIVE 4" in r.stderr, r.stderr[-2000:]


def test_numpy_is_not_loaded_before_the_thread_policy_is_set():
    """OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when numpy loads (as OpenMP reads OMP_WAIT_POLICY when torch loads):
    importing the CLI's entry point must load neither."""
    code = "import sys, dlmeval.cli.main; print(sorted({'numpy', 'torch'} & set(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr[-2000:]
