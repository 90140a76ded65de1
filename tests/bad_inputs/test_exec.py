"""The bad-input battery, executed-code part (issue 32): a HumanEval completion passes only when the program reaches
its end, whatever it does to end early, fake the end or skip the tests.

Each completion below is checked against a problem it gets wrong (or it exits before the tests run), so that only
a trick could make it pass. openai/human-eval counts all of these as failures too: its ``unsafe_execute`` appends
"passed" only after ``exec`` returns, a ``SystemExit`` is caught as ``BaseException`` ("failed: ..."), and a child
that dies (``os._exit``, a signal) leaves no result, which ``check_correctness`` reports as "timed out" (and its
``reliability_guard`` sets ``os.kill`` to None, so a self-kill fails with a TypeError there).

The payloads are harmless (they exit, signal themselves, close their own descriptors), so the tests run with the
unsafe flag: they hold on a machine without bubblewrap too, where the plain launcher runs them.
"""

from __future__ import annotations

import textwrap

import pytest

from dlmeval.sandbox import check_humaneval, launch

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
WRONG = "    return a - b\n"


def run(completion: str, **kw):
    return check_humaneval(
        PROMPT, completion, TEST, "add", unsafe=True, timeout_s=kw.pop("timeout_s", 10), **kw
    )


def after(body: str) -> str:
    """A wrong function followed by module-level ``body`` (runs before the tests)."""
    return WRONG + textwrap.dedent(body)


def test_a_correct_completion_still_passes_with_the_end_token():
    body = """\
        from typing import List
        from collections import namedtuple
        import enum, dataclasses, re, math, threading, logging, random, queue
        P = namedtuple("P", "x y")
        class C(enum.Enum):
            A = 1
        print("some output", flush=True)
        def deep(n):
            return 0 if n == 0 else 1 + deep(n - 1)
        assert deep(500) == 500
    """
    r = run("    return a + b\n" + textwrap.dedent(body))
    assert (r.status, r.passed, r.reached_end, r.returncode) == ("passed", True, True, 0), r.stderr
    assert r.stdout == "some output\n"


def test_sys_exit_0_before_the_tests_is_failed():
    r = run("    import sys; sys.exit(0)\n" + after("import sys\nsys.exit(0)\n"))
    assert (r.status, r.passed, r.reached_end) == ("failed", False, False)


def test_sys_exit_0_as_the_whole_completion_is_failed():
    r = run("    pass\nimport sys\nsys.exit(0)\n")
    assert (r.status, r.passed) == ("failed", False)


def test_os_exit_0_is_failed():
    r = run(after("import os\nos._exit(0)\n"))
    assert (r.status, r.returncode, r.reached_end) == ("failed", 0, False)
    assert "did not reach its end" in r.stderr


def test_raise_systemexit_is_failed():
    for payload in ("raise SystemExit\n", "raise SystemExit(0)\n", "exit()\n", "quit(0)\n"):
        r = run(after(payload))
        assert (r.status, r.passed) == ("failed", False), payload


def test_kill_self_with_sigkill_is_failed():
    r = run(after("import os\nos.kill(os.getpid(), 9)\n"))
    # killed; or, where the plain launcher made it the init of a PID namespace (which ignores the signal), the
    # tests ran and failed
    assert r.status in ("killed", "failed") and not r.passed and not r.reached_end


def test_atexit_tricks_are_failed():
    # an exit status forced to 0 after the failing tests, and a handler that prints what a token might look like
    forced = run(WRONG + "import atexit, os\natexit.register(os._exit, 0)\n")
    assert (forced.status, forced.returncode, forced.passed) == ("failed", 0, False)
    printed = run(after("import atexit\natexit.register(print, '0' * 32)\nraise SystemExit(0)\n"))
    assert (printed.status, printed.passed) == ("failed", False)


def test_redefining_check_in_the_completion_is_failed():
    # the tests come after the completion, so its `check` is replaced by the real one
    r = run(after("def check(candidate):\n    pass\n"))
    assert (r.status, r.passed) == ("failed", False)


def test_a_trace_function_that_skips_check_is_refused():
    body = """\
        import sys
        def skip(frame, event, arg):
            if event == "call" and frame.f_code.co_name == "check":
                raise SystemExit(0)
            return None
        sys.settrace(skip)
    """
    r = run(after(body))
    assert (r.status, r.passed) == ("failed", False)
    assert "sys.settrace is not allowed" in r.stderr


def test_a_thread_that_swaps_check_for_a_no_op_is_refused():
    body = """\
        import threading
        g = globals()
        def swap():
            while "check" not in g:
                pass
            g["check"] = lambda candidate: None
        threading.Thread(target=swap, daemon=True).start()
    """
    r = run(after(body))
    assert (r.status, r.passed) == ("failed", False)
    assert "starting a thread is not allowed" in r.stderr
    # a fresh import of _thread (to get the real starter back) is refused too
    again = run(after("import sys\ndel sys.modules['_thread']\nimport _thread\n"))
    assert (again.status, again.passed) == ("failed", False) and "_thread is not allowed" in again.stderr


def test_monkey_patched_print_is_failed():
    body = """\
        import builtins
        real = builtins.print
        builtins.print = lambda *a, **k: real("passed", "0" * 32)
        print("anything")
    """
    r = run(after(body))
    assert (r.status, r.passed) == ("failed", False)


def test_closed_stdout_is_failed():
    # closing stdout and stderr hides the traceback of the failing tests; the exit is not 0 and no token came
    r = run(after("import os\nos.close(1)\nos.close(2)\n"))
    assert (r.status, r.passed, r.reached_end) == ("failed", False, False)
    closed_all = run(after("import os\nos.closerange(1, 256)\nos._exit(0)\n"))
    assert (closed_all.status, closed_all.passed) == ("failed", False)


def test_a_guessed_token_written_everywhere_is_failed():
    body = """\
        import os
        for guess in (b"0" * 32, b"f" * 32, b"passed"):
            for fd in range(1, 64):
                try:
                    os.write(fd, guess)
                except OSError:
                    pass
        os._exit(0)
    """
    r = run(after(body))
    assert (r.status, r.passed, r.reached_end) == ("failed", False, False)


def test_the_token_is_nowhere_the_code_can_read_it(monkeypatch):
    """Source, argv, environment, /proc/self (cmdline, environ, fds), frames, the garbage collector, process
    memory: the completion looks everywhere and prints what it found; the token is in none of it."""
    token = "5eed" * 8
    monkeypatch.setattr(launch.secrets, "token_hex", lambda n: token)
    body = """\
        import os, sys
        seen = [open(p).read() for p in ("/tmp/solution.py", "solution.py") if os.path.exists(p)]
        seen.append(repr(sys.argv))
        seen.append(repr(dict(os.environ)))
        for name in ("cmdline", "environ"):
            seen.append(open("/proc/self/" + name, "rb").read().decode("latin-1"))
        for fd in range(3, 64):
            try:
                seen.append(os.read(fd, 4096).decode("latin-1"))
            except OSError:
                pass
        print("FRAME", sys._getframe().f_back)
        for attempt in ("import gc; gc.get_objects()", "open('/proc/self/mem', 'rb')", "sys._current_frames()"):
            try:
                exec(attempt)
                print("REACHED", attempt)
            except Exception as e:
                print("REFUSED", type(e).__name__)
        print("SEEN", *seen, sep="\\n", flush=True)
        os._exit(0)
    """
    r = run(after(body))
    assert (r.status, r.passed) == ("failed", False)
    head, _, seen = r.stdout.partition("SEEN\n")
    assert head.splitlines() == ["FRAME None", *["REFUSED PermissionError"] * 3], r.stdout[:500]
    assert "return a - b" in seen and "PYTHONHASHSEED" in seen  # it did read its source and environment
    assert token not in r.stdout and token not in r.stderr


def test_the_token_is_fresh_for_every_run(monkeypatch):
    drawn: list[str] = []
    real = launch.secrets.token_hex
    monkeypatch.setattr(launch.secrets, "token_hex", lambda n: drawn.append(real(n)) or drawn[-1])
    assert run("    return a + b\n").passed and run("    return a + b\n").passed
    assert len(drawn) == 2 and drawn[0] != drawn[1] and len(drawn[0]) == 32


@pytest.mark.parametrize("completion", ["    return a + b\n", WRONG], ids=["right", "wrong"])
def test_passed_needs_exit_0_and_the_end(completion):
    r = run(completion)
    assert r.passed == (completion != WRONG) == r.reached_end


# ---------------------------------------------------------------------------------------------- launchers (item 8)
@pytest.fixture
def plain(monkeypatch):
    """The plain launcher (bubblewrap ignored), probed afresh; the caches are cleared again after."""
    from dlmeval import sandbox

    monkeypatch.setenv(launch.BWRAP_ENV, "0")
    for f in (launch.launcher, sandbox.layers):
        f.cache_clear()
    yield launch.launcher()
    monkeypatch.delenv(launch.BWRAP_ENV)
    for f in (launch.launcher, sandbox.layers):
        f.cache_clear()


def _attempts(code: str, **kw):
    from dlmeval.sandbox import run_python

    r = run_python(textwrap.dedent(code), unsafe=True, audit_hook=False, **kw)
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line), r


ATTEMPT = """\
    import os, socket, sys
    def attempt(name, fn):
        try:
            fn()
            print(name, "done")
        except BaseException as e:
            print(name, type(e).__name__)
"""


def test_the_sandbox_hides_the_machines_proc():
    import subprocess

    from dlmeval import sandbox

    la = launch.launcher()
    victim = subprocess.Popen(["sleep", "60"], **sandbox.drop_to())
    try:
        got, _ = _attempts(ATTEMPT + f"""\
    attempt("read", lambda: open("/proc/{victim.pid}/cmdline", "rb").read())
    print("pids", ",".join(sorted(p for p in os.listdir("/proc") if p.isdigit())))
""")  # fmt: skip
    finally:
        victim.kill()
        victim.wait()
    if la.kind == "plain" and not la.procns:  # no mount namespace here: the label must not claim the layer
        assert "proc" not in sandbox.layers().held
        return
    assert got["read"] == "FileNotFoundError"
    assert all(int(p) < 100 for p in got["pids"].split(",")), got  # only the sandbox's own namespace


def test_plain_launcher_hides_the_machines_proc(plain):
    test_the_sandbox_hides_the_machines_proc()


def test_plain_launcher_refuses_af_unix_and_inet_sockets(plain):
    got, _ = _attempts(ATTEMPT + """\
    attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    attempt("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("pair", lambda: socket.socketpair())
""")  # fmt: skip
    assert (got["unix"], got["inet"], got["pair"]) == ("PermissionError", "PermissionError", "done")


def test_plain_launcher_refuses_dir_fd_writes_and_mkfifo(plain, public_dir):
    import os

    from dlmeval import sandbox
    from dlmeval.sandbox.bootstrap import BOOTSTRAP

    code = ATTEMPT + f"""\
    out = os.open({public_dir!r}, os.O_RDONLY)
    attempt("openat", lambda: os.close(os.open("a.txt", os.O_WRONLY | os.O_CREAT, dir_fd=out)))
    attempt("mkdirat", lambda: os.mkdir("d", dir_fd=out))
    attempt("mkfifo", lambda: os.mkfifo("fifo"))
    attempt("read_via_dir_fd", lambda: os.listdir(out))
    attempt("plain_write_here", lambda: open("here.txt", "w").write("x"))
"""  # fmt: skip
    got, _ = _attempts(code)
    assert (got["openat"], got["mkdirat"], got["mkfifo"]) == ("PermissionError",) * 3
    assert (got["read_via_dir_fd"], got["plain_write_here"]) == ("done", "done")
    assert os.listdir(public_dir) == []
    # the control: the same code without the filter writes through the dir_fd into the machine's /tmp
    cfg = sandbox._cfg(256, 10, 1, audit=False)
    s = launch.spawn(plain, BOOTSTRAP, textwrap.dedent(code), cfg, 10, None, 1 << 20)
    assert "openat done" in s.stdout and sorted(os.listdir(public_dir)) == ["a.txt", "d"]


def test_plain_launcher_is_labelled_unsafe_in_every_table(plain):
    import pandas as pd

    from dlmeval import sandbox
    from dlmeval.protocols.care.frames import down_frame
    from dlmeval.protocols.care.leaderboard import paper_table_markdown
    from dlmeval.protocols.care.tables import table_downstream

    label = sandbox.isolation_label()
    assert label.startswith("plain:") and label.endswith("+unsafe")
    r = run("    return a + b\n")
    assert r.passed and r.isolation == label
    down = down_frame(
        [{"model": "m", "task": "humaneval", "strategy": "none", "steps": 4, "temperature": 0.0, "seed": 1, "n": 2,
          "accuracy": 0.5, "nfe": 4.0, "sandbox": label}]
    )  # fmt: skip
    assert table_downstream(down)["sandbox"].tolist() == [label]
    row = {"tier": "1", "model": "m", "scale": "8B", "temperature": 0.0, "strategy": "high_entropy",
           "humaneval_pass1": 0.5, "humaneval_sandbox": label}  # fmt: skip
    assert "50.0 (unsafe sandbox)" in paper_table_markdown(pd.DataFrame([row]))
    safe = {**row, "humaneval_sandbox": "bwrap:fs+netns+pidns+proc+nproc+seccomp+rlimits+audit"}
    assert "(unsafe sandbox)" not in paper_table_markdown(pd.DataFrame([safe]))


def test_seccomp_filter_is_libseccomps_program():
    import pyseccomp

    from dlmeval.sandbox import seccomp

    assert seccomp.unavailable() is None
    prog, strict = seccomp.filter_program(), seccomp.filter_program(strict=True)
    assert len(prog) % 8 == 0 and len(strict) > len(prog)  # struct sock_filter: 8 bytes each
    # the kept library's own rendering of the same rules names the calls it refuses
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    f.add_rule(pyseccomp.ERRNO(1), "ptrace")
    import tempfile

    with tempfile.TemporaryFile() as t:
        f.export_bpf(t)
        t.seek(0)
        one = t.read()
    assert one[:8] == prog[:8]  # the same architecture check opens both programs


def test_bwrap_caps_dev_shm():
    from dlmeval import sandbox

    if launch.launcher().kind != "bwrap":
        assert "--tmpfs" in launch.bwrap_argv("bwrap", 1 << 20, None)  # the options stand; no bubblewrap here
        return
    argv = launch.bwrap_argv("bwrap", 1 << 20, None)
    i = argv.index("/dev/shm")
    assert argv[i - 3 : i + 1] == ["--size", "1048576", "--tmpfs", "/dev/shm"] and i > argv.index("--dev")
    got, r = _attempts(ATTEMPT + """\
    for line in open("/proc/self/mounts"):
        if " /dev/shm " in line:
            print("mount", line.split()[3])
    def fill():
        for i in range(8):
            with open(f"/dev/shm/f{i}", "wb") as f:
                f.write(b"x" * (15 << 20))
    attempt("fill", fill)
""", file_size_mb=16)  # fmt: skip
    assert "size=" in got["mount"], r.stdout
    assert got["fill"] == "OSError", r.stdout  # ENOSPC at the cap (4 x 16 MB + 8 MB), before 8 x 15 MB
    assert sandbox.layers().ok


def test_system_deps_installs_bubblewrap_and_fails_under_ci_when_a_package_is_missing(tmp_path):
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "system-deps.sh"
    text = script.read_text()
    assert "need+=(bubblewrap)" in text and "need+=(libseccomp2)" in text
    bin_dir = tmp_path / "bin"  # a PATH with the shell tools but no bwrap (nor chromium)
    bin_dir.mkdir()
    for tool in ("bash", "grep", "ls", "id", "cat"):
        found = subprocess.run(
            ["bash", "-c", f"command -v {tool}"], capture_output=True, text=True
        ).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "DLMEVAL_NO_SYSTEM_DEPS": "1", "HOME": str(tmp_path)}
    for ci, rc in (("1", 1), ("true", 1), ("", 0)):
        r = subprocess.run(["bash", str(script)], env={**env, "CI": ci}, capture_output=True, text=True)
        assert r.returncode == rc and "bubblewrap" in r.stderr, (ci, r.stderr)
    assert os.access(script, os.X_OK)
