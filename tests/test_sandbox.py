"""The code-execution sandbox: limits, no network, clean environment, HumanEval checks."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

import pytest

from dlmeval.errors import InputError
from dlmeval.sandbox import check_humaneval, humaneval_program, netns_available, run_python


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 (a free port), accepting in the background: a connect succeeds unless blocked."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv.getsockname()[1]
    srv.close()


def connect_code(port: int) -> str:
    return textwrap.dedent(
        f"""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(("127.0.0.1", {port}))
        print("CONNECTED")
        """
    )


def test_listener_is_reachable_without_sandbox(listener):
    # the control: the same code in a plain child connects, so the sandbox tests below can fail
    r = subprocess.run(
        [sys.executable, "-c", connect_code(listener)], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0 and "CONNECTED" in r.stdout


@pytest.mark.parametrize("network", ["auto", "audit"])
def test_network_connect_fails(listener, network):
    r = run_python(connect_code(listener), network=network, timeout_s=20)
    assert r.status == "failed"
    assert "CONNECTED" not in r.stdout
    assert "audit" in r.isolation
    assert "dlmeval sandbox: socket" in r.stderr  # refused by the hook, before any packet


@pytest.mark.skipif(not netns_available(), reason="unshare --net does not work on this machine")
def test_network_namespace_alone_blocks_connect(listener):
    r = run_python(connect_code(listener), network="netns", audit_hook=False, timeout_s=20)
    assert r.isolation.startswith("netns") and "audit" not in r.isolation
    assert r.status == "failed"
    assert "CONNECTED" not in r.stdout
    assert "OSError" in r.stderr or "unreachable" in r.stderr.lower()


def test_infinite_loop_is_killed():
    t0 = time.monotonic()
    r = run_python("while True:\n    pass\n", timeout_s=1.5)
    elapsed = time.monotonic() - t0
    assert r.status == "timeout"
    assert not r.passed
    assert elapsed < 10


def test_sleeping_child_is_killed_by_wall_clock():
    # sleeping uses no CPU time: only the wall-clock limit stops it
    r = run_python("import time\ntime.sleep(60)\n", timeout_s=1.0)
    assert r.status == "timeout" and r.duration_s < 10


def test_memory_limit():
    r = run_python("x = bytearray(1024 * 1024 * 1024)\nprint('ALLOCATED')", memory_mb=200)
    assert not r.passed and "ALLOCATED" not in r.stdout
    assert "MemoryError" in r.stderr


def test_process_creation_and_ctypes_are_refused():
    r = run_python("import os\nos.system('echo ESCAPED')\n", network="audit")
    assert r.status == "failed" and "ESCAPED" not in r.stdout
    r = run_python("import ctypes\n", network="audit")
    assert r.status == "failed" and "importing ctypes is not allowed" in r.stderr


def test_clean_environment_and_throwaway_directory(monkeypatch):
    monkeypatch.setenv("DLMEVAL_SECRET_MARKER", "xyz")
    code = (
        "import os, sys\nprint(sorted(os.environ))\nprint(os.getcwd())\nprint(sys.flags.no_site, hash('abc'))"
    )
    r = run_python(code)
    assert r.passed, r.stderr
    env_line, cwd, flags = r.stdout.splitlines()
    assert "DLMEVAL_SECRET_MARKER" not in env_line
    assert eval(env_line) == ["HOME", "LANG", "LC_ALL", "PATH", "PYTHONHASHSEED", "TMPDIR"]
    assert "dlmeval-sandbox-" in cwd
    assert flags.split()[0] == "1"  # no site-packages
    assert run_python(code).stdout.splitlines()[2] == flags  # fixed hash seed: same str hash every run
    import os

    assert not os.path.exists(cwd)  # removed afterwards


def test_output_is_captured_and_exit_code_kept():
    r = run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (r.status, r.returncode, r.stdout, r.stderr) == ("failed", 3, "out\n", "err\n")


def test_bad_arguments_rejected():
    with pytest.raises(InputError, match="timeout_s"):
        run_python("pass", timeout_s=0)
    with pytest.raises(InputError, match="network"):
        run_python("pass", network="none")
    with pytest.raises(InputError, match="audit_hook=False"):
        run_python("pass", audit_hook=False)


PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


def test_humaneval_correct_solution_passes():
    assert check_humaneval(PROMPT, "    return a + b\n", TEST, "add").passed


def test_humaneval_wrong_and_looping_solutions_fail():
    assert check_humaneval(PROMPT, "    return a - b\n", TEST, "add").status == "failed"
    assert (
        check_humaneval(PROMPT, "    while True:\n        pass\n", TEST, "add", timeout_s=1.0).status
        == "timeout"
    )
    assert check_humaneval(PROMPT, "    return (\n", TEST, "add").status == "failed"  # syntax error


def test_humaneval_program_layout():
    assert humaneval_program("P", "C", "T", "f") == "PC\n\nT\n\ncheck(f)\n"


def test_real_humaneval_canonical_solutions_pass(data_root):
    from dlmeval.data.tasks import load_humaneval

    items = load_humaneval(data_root)[:3]
    for it in items:
        r = check_humaneval(it.prompt, it.canonical_solution, it.test, it.entry_point)
        assert r.passed, (it.item_id, r.stderr)
    # and an empty body fails them
    assert not check_humaneval(items[0].prompt, "    pass\n", items[0].test, items[0].entry_point).passed
