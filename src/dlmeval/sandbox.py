"""Run untrusted generated Python (HumanEval completions) in a sandboxed child process.

What a child gets:

* a fresh Python interpreter without site packages (``python -s -S -B -P``: no site-packages, user site or
  ``sitecustomize``, no script directory on ``sys.path``, no bytecode written): the standard library only, which
  is all HumanEval needs. Not ``-I``: that would also ignore ``PYTHONHASHSEED``, and a fixed hash seed keeps
  results that depend on set order reproducible,
* a throwaway temporary directory as working directory, ``HOME`` and ``TMPDIR`` (removed afterwards),
* never the caller's privileges: the child runs as the unprivileged user ``nobody`` (uid/gid 65534), owning only
  its directory. That needs a parent running as root and an interpreter ``nobody`` can execute: this one when it
  can, else the first of ``$DLMEVAL_SANDBOX_PYTHON`` and the system ``python3`` (``/usr/bin``, ``/usr/local/bin``)
  that starts as ``nobody`` with the flags above (the child needs the standard library only, so any Python >= 3.11
  does; a virtual environment or a pyenv Python under root's home is often not executable by ``nobody``). When no
  user switch is possible :func:`run_python` raises :class:`~dlmeval.errors.SandboxError` saying why, unless the
  caller accepts the risk with ``same_user=True`` (or ``DLMEVAL_SANDBOX_SAME_USER=1``; the CLI flag
  ``--sandbox-same-user`` sets it); :attr:`ExecResult.isolation` then ends in ``same-user`` instead of ``nobody``,
* no writes outside its directory: the audit hook below refuses opening a file for writing, renaming, linking,
  symlinking, removing, making directories and changing modes, owners or times of any path that does not resolve
  (symbolic links followed) into the directory (``/dev/null`` excepted). ``nobody`` cannot write root's files in
  the first place; the hook covers the world-writable places (``/tmp``, ``/dev/shm``) and a ``same-user`` child,
* no signals to other processes: a PID namespace (``unshare --pid --fork``) when it works, in which no process
  outside exists, and always the audit hook, which refuses ``os.kill`` of any process but the child itself and
  ``os.killpg``,
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
     loading ``ctypes`` (which could call libc's ``connect`` directly), besides the file and signal rules above.

:attr:`ExecResult.isolation` says which layers were active, e.g. ``"netns+pidns+audit+nobody"`` (``netns`` /
``pidns``: the namespaces; ``audit``: the hook; ``nobody`` or ``same-user``: whose privileges the code had), and
:attr:`ExecResult.interpreter` which Python ran it; every run that executes code records the isolation (the Care
protocol as a run note, which the report shows).

This is a containment layer for benchmark code written by a model, not a security boundary against a determined
attacker: the audit hook is bypassable by code that corrupts the interpreter (the user switch and the namespaces
are not). Run evaluations of untrusted models in a disposable container as well.
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

from dlmeval.errors import InputError, SandboxError

#: bytes of stdout / stderr kept in an :class:`ExecResult`
OUTPUT_LIMIT = 8192
#: the opt-out: run generated code with the caller's own privileges when no user switch is possible
SAME_USER_ENV = "DLMEVAL_SANDBOX_SAME_USER"
#: an interpreter that ``nobody`` can execute, tried before the system ones
PYTHON_ENV = "DLMEVAL_SANDBOX_PYTHON"
_CHILD_FLAGS = ("-s", "-S", "-B", "-P")

# The child's first code: limits, then the audit hook, then the untrusted file. Written to the temp directory and
# run as the main script; it deletes its own globals before exec so the untrusted code sees a clean namespace.
# The hook keeps every function it calls as a default argument, so rebinding os.path.realpath & co. from the
# untrusted code does not change what the hook does.
_BOOTSTRAP = r"""
import json, os, resource, sys

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
            "_posixsubprocess.fork_exec", "os.startfile", "os.killpg"}
_BLOCKED_MODULES = {"ctypes", "_ctypes", "_posixsubprocess"}
# event -> positions of the path arguments (with the dir_fd argument that each is relative to, or None)
_PATH_EVENTS = {
    "os.rename": ((0, 2), (1, 3)), "os.link": ((0, 2), (1, 3)), "os.symlink": ((1, 2),),
    "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),), "os.utime": ((0, 3),), "os.truncate": ((0, None),), "os.chflags": ((0, None),),
    "os.lchflags": ((0, None),), "os.lchmod": ((0, None),), "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),), "os.mkfifo": ((0, 2),), "os.mknod": ((0, 3),),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_ROOT = os.path.realpath(os.getcwd())


def _resolve(p, dir_fd, _real=os.path.realpath, _join=os.path.join, _cwd=os.getcwd, _dec=os.fsdecode,
             _readlink=os.readlink, _isabs=os.path.isabs):
    p = _dec(p)
    if not _isabs(p):
        base = _cwd() if dir_fd in (None, -1) else _readlink(f"/proc/self/fd/{int(dir_fd)}")
        p = _join(base, p)
    return _real(p)


def _inside(p, dir_fd=None, _root=_ROOT, _sep=os.sep, _resolve=_resolve):
    if isinstance(p, int):  # an already open descriptor
        return True
    try:
        full = _resolve(p, dir_fd)
    except Exception:
        return False
    return full == _root or full.startswith(_root + _sep) or full == "/dev/null"


def _hook(event, args, _p=_BLOCKED_PREFIXES, _b=_BLOCKED, _m=_BLOCKED_MODULES, _pe=_PATH_EVENTS,
          _wf=_WRITE_FLAGS, _inside=_inside, _getpid=os.getpid, _dirname=os.path.dirname, _dec=os.fsdecode,
          _join=os.path.join):
    if event == "import":
        if args and str(args[0]).split(".")[0] in _m:
            raise ImportError(f"dlmeval sandbox: importing {args[0]} is not allowed")
        return
    if event in _b or event.startswith(_p):
        raise PermissionError(f"dlmeval sandbox: {event} is not allowed (no network, no processes, no signals)")
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(flags, int) and flags & _wf) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
        if writes and not _inside(path):
            raise PermissionError(f"dlmeval sandbox: writing {path!r} outside the sandbox directory is not allowed")
        return
    if event == "os.kill":
        if args[0] != _getpid():
            raise PermissionError("dlmeval sandbox: signalling another process is not allowed")
        return
    spec = _pe.get(event)
    if spec is not None:
        for i, fd_i in spec:
            if i < len(args) and not _inside(args[i], None if fd_i is None else args[fd_i]):
                raise PermissionError(f"dlmeval sandbox: {event} on {args[i]!r} outside the sandbox directory is not allowed")
        if event == "os.symlink":  # the link's target too, relative to the link's directory
            target = args[0]
            if not isinstance(target, int) and not _dec(target).startswith("/"):
                target = _join(_dirname(_dec(args[1])), _dec(target))
            if not _inside(target, args[2]):
                raise PermissionError(f"dlmeval sandbox: a symbolic link to {args[0]!r} outside the sandbox directory is not allowed")


if _cfg["audit"]:
    sys.addaudithook(_hook)
_code = compile(_source, "solution.py", "exec")
_ns = {"__name__": "__main__", "__builtins__": __builtins__}
del _cfg, _path, _f, _source, _limit, _hook, _BLOCKED_PREFIXES, _BLOCKED, _BLOCKED_MODULES, _PATH_EVENTS
del _WRITE_FLAGS, _ROOT, _resolve, _inside
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
    isolation: (
        str  # e.g. "netns+pidns+audit+nobody"; "same-user" in place of "nobody" when the caller opted out
    )
    interpreter: str = ""  # the Python that ran the code

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def as_dict(self) -> dict:
        return asdict(self)


NOBODY = 65534


@dataclass(frozen=True)
class _Launch:
    """How children start: Popen keywords for the user switch (empty: none), the interpreter, and why there is no
    user switch (None when there is one)."""

    drop: dict
    python: str
    problem: str | None


def _candidates() -> list[str]:
    out = [os.environ.get(PYTHON_ENV, ""), sys.executable]
    out += [shutil.which(n, path="/usr/bin:/usr/local/bin:/bin") or "" for n in ("python3", "python3.11")]
    return list(dict.fromkeys(p for p in out if p))


def _starts(python: str, **kw) -> bool:
    try:
        r = subprocess.run(
            [
                python,
                *_CHILD_FLAGS,
                "-c",
                "import json, os, resource, sys; assert sys.version_info >= (3, 11)",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            **kw,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


@functools.cache
def _launch() -> _Launch:
    """Probed once per process: the first candidate interpreter that ``nobody`` can run (see the module
    docstring)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return _Launch(
            {},
            sys.executable,
            "dlmeval is not running as root, so it cannot start generated code as the unprivileged user nobody",
        )
    kw = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    tried = _candidates()
    for python in tried:
        if _starts(python, **kw):
            return _Launch(kw, python, None)
    return _Launch(
        {},
        sys.executable,
        f"no Python interpreter that the user nobody can execute ({', '.join(tried)} tried; an interpreter under a "
        f"directory only root can read, such as /root, is not executable by nobody); set {PYTHON_ENV} to one "
        "(Python >= 3.11, the standard library suffices)",
    )


def _drop_to() -> dict:
    """Popen keywords that run the child as ``nobody`` (empty when that is not possible here)."""
    return _launch().drop


def isolation_problem() -> str | None:
    """Why generated code cannot run as an unprivileged user here (None when it can)."""
    return _launch().problem


def require_isolation(same_user: bool | None = None) -> None:
    """Raise :class:`~dlmeval.errors.SandboxError` now if :func:`run_python` would refuse to run code (no user
    switch possible and no opt-out): protocols call it before they open a run."""
    problem = isolation_problem()
    if problem is not None and not _same_user_allowed(same_user):
        raise SandboxError(
            f"refusing to run generated code with the caller's privileges: {problem}; or accept the risk "
            f"with --sandbox-same-user ({SAME_USER_ENV}=1, same_user=True)"
        )


def _same_user_allowed(same_user: bool | None) -> bool:
    if same_user is not None:
        return bool(same_user)
    return os.environ.get(SAME_USER_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@functools.cache
def _unshare_works(*flags: str) -> bool:
    exe = shutil.which("unshare")
    if exe is None:
        return False
    try:
        r = subprocess.run(
            [exe, *flags, "--map-root-user", "true"],
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


def netns_available() -> bool:
    """Whether ``unshare --net --map-root-user`` can start a process here, as the user the child runs as (probed
    once per process)."""
    return _unshare_works("--net")


def pidns_available() -> bool:
    """Whether a PID namespace can be added (``unshare --net --pid --fork``), probed once per process."""
    return _unshare_works("--net", "--pid", "--fork")


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
    same_user: bool | None = None,
) -> ExecResult:
    """Run the Python source ``code`` in a sandboxed child process (see the module docstring).

    ``network``: ``"auto"`` (a network namespace when available, plus the audit hook), ``"netns"`` (require the
    namespace: InputError if ``unshare`` does not work here), ``"audit"`` (the audit hook only).
    ``audit_hook=False`` leaves the hook out (only to test the namespace layer on its own; needs ``"netns"``).
    ``same_user``: run with the caller's privileges when no switch to ``nobody`` is possible (default: the
    ``DLMEVAL_SANDBOX_SAME_USER`` environment variable); otherwise that case raises
    :class:`~dlmeval.errors.SandboxError`.
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
    require_isolation(same_user)
    launch = _launch()
    use_pidns = use_netns and pidns_available()
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
        drop = launch.drop
        if drop:  # the child (nobody) owns its directory and nothing else
            for path in (tmp, boot, sol):
                os.chown(path, NOBODY, NOBODY)
        argv = [launch.python, *_CHILD_FLAGS, boot, json.dumps(cfg), sol]
        if use_netns:
            ns = ["--net", *(["--pid", "--fork"] if use_pidns else [])]
            argv = [shutil.which("unshare") or "unshare", *ns, "--map-root-user", *argv]
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
                    *(["pidns"] if use_pidns else []),
                    *(["audit"] if audit_hook else []),
                    "nobody" if drop else "same-user",
                ]
            ),
            interpreter=launch.python,
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
    same_user: bool | None = None,
) -> ExecResult:
    """Execute one HumanEval completion against its tests in the sandbox; ``.passed`` is pass@1 for that sample."""
    return run_python(
        humaneval_program(prompt, completion, test, entry_point),
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        network=network,
        same_user=same_user,
    )


__all__ = [
    "ExecResult",
    "SAME_USER_ENV",
    "check_humaneval",
    "humaneval_program",
    "isolation_problem",
    "netns_available",
    "pidns_available",
    "require_isolation",
    "run_python",
]
