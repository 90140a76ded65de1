"""Run untrusted generated Python (HumanEval completions) in a sandboxed child process.

What a child gets:

* a fresh Python interpreter without site packages (``python -s -S -B -P``: no site-packages, user site or
  ``sitecustomize``, no script directory on ``sys.path``, no bytecode written): the standard library only, which
  is all HumanEval needs. Not ``-I``: that would also ignore ``PYTHONHASHSEED``, and a fixed hash seed keeps
  results that depend on set order reproducible,
* a throwaway temporary directory as working directory, ``HOME`` and ``TMPDIR`` (removed afterwards),
* when the parent runs as root and ``nobody`` can execute the interpreter: the unprivileged user ``nobody``
  (uid/gid 65534), owning only that directory (:attr:`ExecResult.isolation` then ends in ``+nobody``),
* a minimal environment (``PATH=/usr/bin:/bin``, ``LANG=C.UTF-8``, ``PYTHONHASHSEED=0``, ``HOME`` and ``TMPDIR``;
  nothing of ours),
* resource limits set with :func:`resource.setrlimit` before the code runs: address space (``memory_mb``), CPU
  seconds, size of written files, no core dumps,
* a wall-clock limit: the whole process group is killed (SIGKILL) when ``timeout_s`` passes,
* no network. Two layers:

  1. ``unshare --net --map-root-user`` (a new, empty network namespace: not even loopback is up) when the
     ``unshare`` tool works on this machine (:func:`netns_available` probes once);
  2. always, an audit hook (:func:`sys.addaudithook`; it cannot be removed from inside the process) installed by
     the bootstrap before the untrusted code runs. It refuses socket creation, connect/bind/getaddrinfo, process
     creation (fork, exec, spawn, ``os.system``, ``subprocess``: a child process would not carry the hook) and
     loading ``ctypes`` (which could call libc's ``connect`` directly).

  :attr:`ExecResult.isolation` says which layers were active (``"netns+audit"`` or ``"audit"``); when only the
  audit hook is available the caller should say so (the Care protocol records it as a run warning).

This is a containment layer for benchmark code written by a model, not a security boundary against a determined
attacker: the audit hook is bypassable by code that corrupts the interpreter. Run evaluations of untrusted models in
a disposable container as well.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from dlmeval.errors import InputError

#: bytes of stdout / stderr kept in an :class:`ExecResult`
OUTPUT_LIMIT = 8192

# The child's first code: limits, then the audit hook, then the untrusted file. Written to the temp directory and
# run as the main script; it deletes its own globals before exec so the untrusted code sees a clean namespace.
_BOOTSTRAP = r"""
import json, resource, sys

_cfg = json.loads(sys.argv[1])
_path = sys.argv[2]


def _limit(which, value):
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


_limit(resource.RLIMIT_AS, _cfg["memory_bytes"])
_limit(resource.RLIMIT_CPU, _cfg["cpu_s"])
_limit(resource.RLIMIT_FSIZE, _cfg["fsize_bytes"])
_limit(resource.RLIMIT_CORE, 0)

with open(_path, encoding="utf-8") as _f:
    _source = _f.read()

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork")
_BLOCKED = {"os.system", "os.forkpty", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
            "_posixsubprocess.fork_exec", "os.startfile"}
_BLOCKED_MODULES = {"ctypes", "_ctypes", "_posixsubprocess"}


def _hook(event, args, _p=_BLOCKED_PREFIXES, _b=_BLOCKED, _m=_BLOCKED_MODULES):
    if event == "import":
        if args and str(args[0]).split(".")[0] in _m:
            raise ImportError(f"dlmeval sandbox: importing {args[0]} is not allowed")
        return
    if event in _b or event.startswith(_p):
        raise PermissionError(f"dlmeval sandbox: {event} is not allowed (no network, no processes)")


if _cfg["audit"]:
    sys.addaudithook(_hook)
_code = compile(_source, "solution.py", "exec")
_ns = {"__name__": "__main__", "__builtins__": __builtins__}
del _cfg, _path, _f, _source, _limit, _hook, _BLOCKED_PREFIXES, _BLOCKED, _BLOCKED_MODULES
exec(_code, _ns)
"""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one sandboxed execution."""

    status: str  # "passed" (exit 0), "failed" (non-zero exit), "timeout", "killed" (signal: memory, CPU, ...)
    returncode: int | None
    duration_s: float
    stdout: str
    stderr: str
    isolation: str  # "netns+audit" or "audit", with "+nobody" when the child ran as that user

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def as_dict(self) -> dict:
        return asdict(self)


NOBODY = 65534


@functools.cache
def _drop_to() -> dict:
    """Popen keywords that run the child as ``nobody`` when we are root and ``nobody`` can run this interpreter
    (it cannot when Python lives under root's home, e.g. pyenv in /root); nothing otherwise."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return {}
    kw = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    try:
        r = subprocess.run(
            [sys.executable, "-I", "-S", "-c", "pass"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            **kw,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return kw if r.returncode == 0 else {}


@functools.cache
def netns_available() -> bool:
    """Whether ``unshare --net --map-root-user`` can start a process here, as the user the child runs as (probed
    once per process)."""
    exe = shutil.which("unshare")
    if exe is None:
        return False
    try:
        r = subprocess.run(
            [exe, "--net", "--map-root-user", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            **_drop_to(),
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _read_capped(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(OUTPUT_LIMIT + 1)
    except OSError:
        return ""
    text = data[:OUTPUT_LIMIT].decode("utf-8", errors="replace")
    return text + ("\n[... output cut]" if len(data) > OUTPUT_LIMIT else "")


def run_python(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    file_size_mb: int = 16,
    network: str = "auto",
    audit_hook: bool = True,
) -> ExecResult:
    """Run the Python source ``code`` in a sandboxed child process (see the module docstring).

    ``network``: ``"auto"`` (a network namespace when available, plus the audit hook), ``"netns"`` (require the
    namespace: InputError if ``unshare`` does not work here), ``"audit"`` (the audit hook only).
    ``audit_hook=False`` leaves the hook out (only to test the namespace layer on its own; needs ``"netns"``).
    """
    if not isinstance(code, str):
        raise InputError(f"code must be a string, got {type(code).__name__}")
    if not timeout_s > 0:
        raise InputError(f"timeout_s must be positive, got {timeout_s!r}")
    if memory_mb < 64:
        raise InputError(f"memory_mb must be at least 64 (the interpreter needs it), got {memory_mb!r}")
    if network not in ("auto", "netns", "audit"):
        raise InputError(f"network must be 'auto', 'netns' or 'audit', got {network!r}")
    use_netns = network == "netns" or (network == "auto" and netns_available())
    if network == "netns" and not netns_available():
        raise InputError(
            "network='netns' needs a working `unshare --net --map-root-user` (user namespaces); "
            "use network='auto' to fall back to the audit hook"
        )
    if not audit_hook and network != "netns":
        raise InputError(
            "audit_hook=False would leave the child without network isolation; use network='netns'"
        )
    cfg = {
        "audit": bool(audit_hook),
        "memory_bytes": int(memory_mb) * 1024 * 1024,
        "cpu_s": int(timeout_s) + 1,
        "fsize_bytes": int(file_size_mb) * 1024 * 1024,
    }
    with tempfile.TemporaryDirectory(prefix="dlmeval-sandbox-") as tmp:
        boot, sol = os.path.join(tmp, "_bootstrap.py"), os.path.join(tmp, "solution.py")
        with open(boot, "w", encoding="utf-8") as f:
            f.write(_BOOTSTRAP)
        with open(sol, "w", encoding="utf-8") as f:
            f.write(code)
        drop = _drop_to()
        if drop:  # the child (nobody) owns its directory and nothing else
            for path in (tmp, boot, sol):
                os.chown(path, NOBODY, NOBODY)
        argv = [sys.executable, "-s", "-S", "-B", "-P", boot, json.dumps(cfg), sol]
        if use_netns:
            argv = [shutil.which("unshare") or "unshare", "--net", "--map-root-user", *argv]
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": tmp,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0",
        }
        out_path, err_path = os.path.join(tmp, "_stdout"), os.path.join(tmp, "_stderr")
        t0 = time.monotonic()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv,
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: a timeout kills everything it started
                **drop,
            )
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
            finally:
                if proc.poll() is None:
                    _kill_group(proc)
        duration = time.monotonic() - t0
        rc = proc.returncode
        if timed_out:
            status = "timeout"
        elif rc == 0:
            status = "passed"
        elif rc is not None and rc < 0:
            status = "timeout" if -rc == signal.SIGXCPU else "killed"
        else:
            status = "failed"
        return ExecResult(
            status=status,
            returncode=rc,
            duration_s=round(duration, 4),
            stdout=_read_capped(out_path),
            stderr=_read_capped(err_path),
            isolation="+".join(
                [
                    *(["netns"] if use_netns else []),
                    *(["audit"] if audit_hook else []),
                    *(["nobody"] if drop else []),
                ]
            ),
        )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program that checks one HumanEval completion: prompt + completion, the test code, ``check(entry)``
    (the layout of openai/human-eval's ``check_correctness``)."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\n"


def check_humaneval(
    prompt: str,
    completion: str,
    test: str,
    entry_point: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    network: str = "auto",
) -> ExecResult:
    """Execute one HumanEval completion against its tests in the sandbox; ``.passed`` is pass@1 for that sample."""
    return run_python(
        humaneval_program(prompt, completion, test, entry_point),
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        network=network,
    )


__all__ = ["ExecResult", "check_humaneval", "humaneval_program", "netns_available", "run_python"]
