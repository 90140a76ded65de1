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


# ---------------------------------------------------------------------------------------------- escapes
@pytest.fixture
def public_dir():
    """A world-writable directory under /tmp (like /tmp itself): only the sandbox's own rules keep code out."""
    import os
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="dlmeval-public-", dir="/tmp")
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


ESCAPES = {
    "write": "open({out!r} + '/w.txt', 'w').write('ESCAPED')",
    "os.open": "import os\nos.close(os.open({out!r} + '/o.txt', os.O_WRONLY | os.O_CREAT))",
    "append-relative": "import os\nrel = os.path.relpath({out!r}, os.getcwd())\nopen(rel + '/a.txt', 'a').write('x')",
    "rename": "import os\nopen('mine.txt', 'w').write('x')\nos.rename('mine.txt', {out!r} + '/r.txt')",
    "replace": "import os\nopen('mine.txt', 'w').write('x')\nos.replace('mine.txt', {out!r} + '/r.txt')",
    "copy": "import shutil\nopen('mine.txt', 'w').write('x')\nshutil.copy('mine.txt', {out!r} + '/c.txt')",
    "symlink-outside": "import os\nos.symlink('/etc/hostname', {out!r} + '/s.txt')",
    "symlink-to-outside": "import os\nos.symlink({out!r}, 'door')\nopen('door/d.txt', 'w').write('x')",
    "mkdir": "import os\nos.mkdir({out!r} + '/m')",
    "hardlink": "import os\nopen('mine.txt', 'w').write('x')\nos.link('mine.txt', {out!r} + '/l.txt')",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_generated_code_cannot_write_outside_its_directory(public_dir, name):
    import os

    r = run_python(ESCAPES[name].format(out=public_dir))
    assert r.status == "failed", (r.stdout, r.stderr)
    assert "outside the sandbox directory" in r.stderr
    assert os.listdir(public_dir) == []


def test_writes_inside_the_directory_still_work():
    code = (
        "import os, shutil, tempfile\nopen('a.txt', 'w').write('x')\nos.rename('a.txt', 'b.txt')\n"
        "os.mkdir('d')\nshutil.copy('b.txt', 'd/c.txt')\nos.symlink('b.txt', 'l')\nos.remove('l')\n"
        "with tempfile.NamedTemporaryFile('w') as f:\n    f.write('y')\nprint(sorted(os.listdir('.')))"
    )
    r = run_python(code)
    assert r.passed, r.stderr
    assert "'b.txt', 'd'" in r.stdout


@pytest.mark.skipif(not netns_available(), reason="unshare --net does not work on this machine")
def test_the_write_rule_is_what_stops_it(public_dir):
    # the control: without the audit hook a world-writable directory is writable, so the escape tests can fail
    import os

    r = run_python(ESCAPES["write"].format(out=public_dir), network="netns", audit_hook=False)
    assert r.passed, r.stderr
    assert os.listdir(public_dir) == ["w.txt"]


@pytest.mark.parametrize("network", ["auto", "audit"])
def test_generated_code_cannot_signal_other_processes(network):
    import signal

    from dlmeval.sandbox import _drop_to

    # a victim of the same user as the child (nobody when there is a user switch): only the sandbox stops a kill
    victim = subprocess.Popen(["sleep", "60"], **_drop_to())
    try:
        for call in (f"os.kill({victim.pid}, 15)", f"os.killpg({victim.pid}, 15)"):
            r = run_python(f"import os\n{call}\nprint('SENT')", network=network)
            assert r.status == "failed" and "SENT" not in r.stdout, r.stderr
        assert victim.poll() is None  # still running
        r = run_python(
            "import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: print('OWN'))\n"
            "os.kill(os.getpid(), signal.SIGUSR1)"
        )
        assert r.passed and "OWN" in r.stdout  # its own process is fine
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()


def test_isolation_is_reported_and_never_the_callers_privileges_by_default(monkeypatch):
    from dlmeval import sandbox
    from dlmeval.errors import SandboxError

    r = run_python("import os\nprint(os.getuid())")
    assert r.passed, r.stderr
    assert r.isolation.endswith("+nobody") and r.interpreter
    if "netns" not in r.isolation:  # without a user namespace the uid is nobody's as seen from outside, too
        assert r.stdout.strip() == "65534"
    # where no user switch is possible the sandbox refuses, and says why, unless the caller opts out
    monkeypatch.delenv(sandbox.SAME_USER_ENV, raising=False)
    monkeypatch.setattr(
        sandbox, "_launch", lambda: sandbox._Launch({}, sys.executable, "no interpreter nobody can run")
    )
    with pytest.raises(SandboxError, match="no interpreter nobody can run.*--sandbox-same-user"):
        run_python("print(1)")
    r = run_python("print(1)", same_user=True)
    assert r.passed and r.isolation.endswith("+same-user")
    monkeypatch.setenv(sandbox.SAME_USER_ENV, "1")
    assert run_python("print(1)").isolation.endswith("+same-user")
