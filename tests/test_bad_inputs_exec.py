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
