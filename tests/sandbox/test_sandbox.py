"""The code-execution sandbox: limits, no network, clean environment, HumanEval checks."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

import pytest

from dlmeval import sandbox
from dlmeval.errors import InputError
from dlmeval.sandbox import check_humaneval, humaneval_program, run_python

#: the operating-system layers hold on this machine (else every test below that needs them is skipped, and
#: test_missing_layers_refuse_to_run_code shows the sandbox refusing instead)
ISOLATED = sandbox.layers().ok
needs_isolation = pytest.mark.skipif(
    not ISOLATED, reason=f"no OS isolation on this machine: {sandbox.isolation_problem()}"
)


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


@needs_isolation
@pytest.mark.parametrize("audit", [True, False])
def test_network_connect_fails(listener, audit):
    r = run_python(connect_code(listener), audit_hook=audit, timeout_s=20)
    assert r.status == "failed"
    assert "CONNECTED" not in r.stdout
    assert ("audit" in r.isolation) == audit and "netns" in r.isolation
    if audit:
        assert "dlmeval sandbox: socket" in r.stderr  # refused by the hook, before any packet
    else:
        assert "PermissionError" in r.stderr or "OSError" in r.stderr or "Refused" in r.stderr


@needs_isolation
def test_infinite_loop_is_killed():
    t0 = time.monotonic()
    r = run_python("while True:\n    pass\n", timeout_s=1.5)
    elapsed = time.monotonic() - t0
    assert r.status == "timeout"
    assert not r.passed
    assert elapsed < 10


@needs_isolation
def test_sleeping_child_is_killed_by_wall_clock():
    # sleeping uses no CPU time: only the wall-clock limit stops it
    r = run_python("import time\ntime.sleep(60)\n", timeout_s=1.0)
    assert r.status == "timeout" and r.duration_s < 10


@needs_isolation
def test_memory_limit():
    r = run_python("x = bytearray(1024 * 1024 * 1024)\nprint('ALLOCATED')", memory_mb=200)
    assert not r.passed and "ALLOCATED" not in r.stdout
    assert "MemoryError" in r.stderr


@needs_isolation
def test_process_creation_and_ctypes_are_refused():
    r = run_python("import os\nos.system('echo ESCAPED')\n")
    assert r.status == "failed" and "ESCAPED" not in r.stdout
    r = run_python("import ctypes\n")
    assert r.status == "failed" and "importing ctypes is not allowed" in r.stderr


@needs_isolation
def test_clean_environment_and_throwaway_directory(monkeypatch):
    monkeypatch.setenv("DLMEVAL_SECRET_MARKER", "xyz")
    code = (
        "import os, sys\nprint(sorted(os.environ))\nprint(os.getcwd())\nprint(sys.flags.no_site, hash('abc'))"
    )
    r = run_python(code)
    assert r.passed, r.stderr
    env_line, cwd, flags = r.stdout.splitlines()
    assert "DLMEVAL_SECRET_MARKER" not in env_line
    # PWD: bubblewrap sets it to the work directory
    assert [k for k in eval(env_line) if k != "PWD"] == [
        "HOME",
        "LANG",
        "LC_ALL",
        "PATH",
        "PYTHONHASHSEED",
        "TMPDIR",
    ]
    assert cwd == "/tmp/work"  # the private tmpfs
    assert flags.split()[0] == "1"  # no site-packages
    assert run_python(code).stdout.splitlines()[2] == flags  # fixed hash seed: same str hash every run


@needs_isolation
def test_output_is_captured_and_exit_code_kept():
    # an os._exit keeps its status; a SystemExit before the end is status 1 (the bootstrap's: the program's
    # thread ended without reaching its end) and "failed" either way
    r = run_python("import os, sys\nprint('out', flush=True)\nprint('err', file=sys.stderr)\nos._exit(3)")
    assert (r.status, r.returncode, r.stdout, r.stderr, r.reached_end) == (
        "failed",
        3,
        "out\n",
        "err\n",
        False,
    )
    r = run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (r.status, r.returncode, r.stdout, r.stderr, r.reached_end) == (
        "failed",
        1,
        "out\n",
        "err\n",
        False,
    )
    r = run_python("print('out')")
    assert (r.status, r.returncode, r.stdout, r.stderr, r.reached_end) == ("passed", 0, "out\n", "", True)


def test_bad_arguments_rejected():
    with pytest.raises(InputError, match="timeout_s"):
        run_python("pass", timeout_s=0)
    with pytest.raises(InputError, match="memory_mb"):
        run_python("pass", memory_mb=10)


PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


@needs_isolation
def test_humaneval_correct_solution_passes():
    assert check_humaneval(PROMPT, "    return a + b\n", TEST, "add").passed


@needs_isolation
def test_humaneval_wrong_and_looping_solutions_fail():
    assert check_humaneval(PROMPT, "    return a - b\n", TEST, "add").status == "failed"
    assert (
        check_humaneval(PROMPT, "    while True:\n        pass\n", TEST, "add", timeout_s=1.0).status
        == "timeout"
    )
    assert check_humaneval(PROMPT, "    return (\n", TEST, "add").status == "failed"  # syntax error


def test_humaneval_program_layout():
    assert humaneval_program("P", "C", "T", "f") == "PC\n\nT\n\ncheck(f)\n"


@needs_isolation
def test_real_humaneval_canonical_solutions_pass(data_root):
    from dlmeval.data.tasks import load_humaneval

    items = load_humaneval(data_root)[:3]
    for it in items:
        r = check_humaneval(it.prompt, it.canonical_solution, it.test, it.entry_point)
        assert r.passed, (it.item_id, r.stderr)
    # and an empty body fails them
    assert not check_humaneval(items[0].prompt, "    pass\n", items[0].test, items[0].entry_point).passed


# ---------------------------------------------------------------------------------------------- escapes
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


@needs_isolation
@pytest.mark.parametrize("audit", [True, False])
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_generated_code_cannot_write_outside_its_directory(public_dir, name, audit):
    import os

    r = run_python(ESCAPES[name].format(out=public_dir), audit_hook=audit)
    assert r.status == "failed", (r.stdout, r.stderr)
    if audit:
        assert "outside the sandbox directory" in r.stderr
    assert os.listdir(public_dir) == []


@needs_isolation
def test_writes_inside_the_directory_still_work():
    code = (
        "import os, shutil, tempfile\nopen('a.txt', 'w').write('x')\nos.rename('a.txt', 'b.txt')\n"
        "os.mkdir('d')\nshutil.copy('b.txt', 'd/c.txt')\nos.symlink('b.txt', 'l')\nos.remove('l')\n"
        "with tempfile.NamedTemporaryFile('w') as f:\n    f.write('y')\nprint(sorted(os.listdir('.')))"
    )
    r = run_python(code)
    assert r.passed, r.stderr
    assert "'b.txt', 'd'" in r.stdout


# ------------------------------------------------------------------ the probes of issue 25, hook on and off
@pytest.fixture
def victim():
    """A process of the child's own user outside the sandbox: only a PID namespace keeps a kill from it."""
    p = subprocess.Popen(["sleep", "60"], **sandbox.drop_to())
    yield p
    p.kill()
    p.wait()


def _payload(out: str, port: int, pid: int) -> str:
    """Every way out the issue found: dir_fd writes, os.system, forks, a socket, a kill."""
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
        attempt(dirfd_write)
        attempt(lambda: os.system("touch {out}/system.txt"))
        attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
        attempt(lambda: os.kill({pid}, 9))
        attempt(lambda: open({out!r} + "/plain.txt", "w").write("x"))
        """
    )


@needs_isolation
@pytest.mark.parametrize("audit", [True, False])
def test_dir_fd_write_to_tmp_does_not_reach_the_machine(public_dir, audit):
    import os

    code = (
        f"import os\nfd = os.open({public_dir!r}, os.O_RDONLY)\n"
        "os.close(os.open('t.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\nprint('WROTE')"
    )
    r = run_python(code, audit_hook=audit)
    assert os.listdir(public_dir) == []
    assert not r.passed  # the directory is not even there: /tmp is the sandbox's own tmpfs


@needs_isolation
@pytest.mark.parametrize("audit", [True, False])
def test_subinterpreter_cannot_get_out(public_dir, listener, victim, audit):
    import os

    inner = _payload(public_dir, listener, victim.pid) + textwrap.dedent(
        """
        n = 0
        for _ in range(500):
            try:
                if os.fork() == 0:
                    import time
                    time.sleep(10)
                    os._exit(0)
                n += 1
            except (OSError, RuntimeError):
                break
        print("FORKS", n, flush=True)
        """
    )
    code = (  # not isolated: forks are allowed there (Python 3.11)
        f"import os, _xxsubinterpreters as si\ni = si.create(isolated=False)\nsi.run_string(i, {inner!r})\n"
        "print('RAN', flush=True)\nos._exit(0)"
    )
    r = run_python(code, audit_hook=audit)
    assert os.listdir(public_dir) == []
    assert victim.poll() is None
    if audit:
        assert r.status == "failed" and "importing _xxsubinterpreters is not allowed" in r.stderr
    else:  # it ran, and the OS layers held: no file, no kill, forks stopped below 500 by RLIMIT_NPROC
        assert "RAN" in r.stdout, r.stderr
        forks = [int(x.split()[1]) for x in r.stdout.splitlines() if x.startswith("FORKS")]
        assert forks and 0 < forks[0] < sandbox.launch.NPROC
        assert r.stdout.count("BLOCKED") >= 3


@needs_isolation
def test_fork_bomb_stops_at_the_process_limit():
    code = textwrap.dedent(
        """
        import os, time
        n = 0
        try:
            for _ in range(1000):
                if os.fork() == 0:
                    time.sleep(20)
                    os._exit(0)
                n += 1
        finally:
            print("FORKS", n)
        """
    )
    r = run_python(code, audit_hook=False, timeout_s=20)
    assert r.status == "failed" and "BlockingIOError" in r.stderr
    assert 0 < int(r.stdout.split()[1]) < sandbox.launch.NPROC


@needs_isolation
@pytest.mark.parametrize("audit", [True, False])
def test_exec_signals_and_sockets_do_not_get_out(public_dir, listener, victim, audit):
    import os

    r = run_python(_payload(public_dir, listener, victim.pid), audit_hook=audit)
    assert os.listdir(public_dir) == []
    assert victim.poll() is None
    assert (
        r.stdout.count("BLOCKED") >= 4
    )  # dir_fd, socket, kill, plain write; os.system runs on a read-only fs


@needs_isolation
def test_the_layers_are_probed_and_recorded():
    ly = sandbox.layers()
    assert set(sandbox.probes.REQUIRED) <= set(ly.held)
    assert "fs" in ly.report and "on the machine: nothing" in ly.report["fs"]
    assert "lived on" in ly.report["pidns"]
    r = run_python("print(1)")
    assert r.isolation == f"{sandbox.launch.launcher().kind}:" + "+".join([*ly.held, "audit"])


def test_missing_layers_refuse_to_run_code(public_dir):
    """Without bubblewrap (``DLMEVAL_SANDBOX_BWRAP=0``: the plain launcher, whose /tmp is the machine's) the probes
    find no file-system layer: the sandbox refuses, names the layer, and runs only with the unsafe flag, which the
    result records. On a machine without the kernel features the same holds for the real launcher."""
    import os

    public = public_dir
    script = textwrap.dedent(
        f"""
        from dlmeval import sandbox
        from dlmeval.errors import SandboxError
        try:
            sandbox.run_python("print(1)")
            print("RAN")
        except SandboxError as e:
            print("REFUSED", e)
        r = sandbox.run_python("open({str(public)!r} + '/x', 'w')", unsafe=True, audit_hook=False)
        print("UNSAFE", r.isolation)
        """
    )
    env = {**os.environ, "DLMEVAL_SANDBOX_BWRAP": "0"}
    env.pop(sandbox.UNSAFE_ENV, None)
    env.pop(sandbox.SAME_USER_ENV, None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert "REFUSED" in out.stdout and "RAN" not in out.stdout, out.stderr
    assert "lacks fs" in out.stdout and "--sandbox-unsafe" in out.stdout
    assert "UNSAFE plain:" in out.stdout and out.stdout.strip().endswith("+unsafe")
    # the control: this is the escape the real sandbox stops (the tests above can fail)
    assert os.listdir(public) == ["x"]


@needs_isolation
def test_code_runs_as_nobody_when_dlmeval_is_root():
    import os

    r = run_python("import os\nprint(os.getuid(), os.getgid())")
    assert r.passed, r.stderr
    if os.geteuid() == 0:
        assert r.stdout.split() == ["65534", "65534"] and r.isolation.endswith("+nobody+audit")
