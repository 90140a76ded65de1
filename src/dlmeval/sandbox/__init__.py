"""Run untrusted generated Python (HumanEval completions) isolated from the operating system.

What keeps the code in is the operating system, not Python (:mod:`dlmeval.sandbox.launch`): bubblewrap with the
user ``nobody``, new user / mount / PID / network namespaces, a read-only root with a private tmpfs work
directory, no capabilities, a seccomp filter built with libseccomp (:mod:`dlmeval.sandbox.seccomp`), and resource limits
(address space, CPU seconds, file size, ``RLIMIT_NPROC``, no core dumps) plus a wall-clock limit (the whole process
group is killed). The child is a fresh interpreter without site packages (``python -s -S -B -P``; not ``-I``,
which would ignore the fixed ``PYTHONHASHSEED``) with a minimal environment (``PATH``, ``LANG``, ``LC_ALL``,
``PYTHONHASHSEED=0``, ``HOME`` and ``TMPDIR`` at the work directory). The audit hook of
:mod:`dlmeval.sandbox.bootstrap` stays as defence in depth only: it turns the common attempts (a socket, a
process, a write outside) into a clear error, but audit hooks are no boundary.

At first use in a process the sandbox tries every layer it claims (:mod:`dlmeval.sandbox.probes`: a write
outside, a connect, a signal out, a fork past the limit, ...) and records only those that held. When a required
layer (``fs``, ``netns``, ``pidns``, ``nproc``, and ``nobody`` when dlmeval is root) did not hold, :func:`run_python`
raises :class:`~dlmeval.errors.SandboxError` naming what failed, unless the caller passes the explicit unsafe flag
(``unsafe=True``, ``DLMEVAL_SANDBOX_UNSAFE=1``, CLI ``--sandbox-unsafe``); :attr:`ExecResult.isolation` then ends in
``+unsafe`` and lists only what held (the plain launcher is always ``+unsafe``). ``isolation`` is e.g.
``"bwrap:fs+netns+pidns+proc+nproc+seccomp+rlimits+nobody+audit"``; every run that executes code records it (Care as a run note, which the report shows).
"""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass

from dlmeval.errors import InputError, SandboxError
from dlmeval.sandbox import launch as _la
from dlmeval.sandbox.bootstrap import BOOTSTRAP
from dlmeval.sandbox.probes import Layers, probe
from dlmeval.sandbox.seccomp import filter_program

OUTPUT_LIMIT = _la.OUTPUT_LIMIT
NOBODY = _la.NOBODY
#: the explicit opt-out: run generated code with whatever isolation the probes found
UNSAFE_ENV = "DLMEVAL_SANDBOX_UNSAFE"
#: the earlier name of the same opt-out (``--sandbox-same-user``), still read
SAME_USER_ENV = "DLMEVAL_SANDBOX_SAME_USER"
PYTHON_ENV = _la.PYTHON_ENV


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one sandboxed execution."""

    # "passed" (exit 0 and the program reached its end), "failed" (non-zero exit, or an exit before the end),
    # "timeout", "killed" (signal: memory, CPU, ...)
    status: str
    returncode: int | None
    duration_s: float
    stdout: str
    stderr: str
    isolation: str  # the launcher and the layers that held, e.g. "bwrap:fs+netns+pidns+nproc+nobody+audit"
    interpreter: str = ""  # the Python that ran the code
    reached_end: bool | None = None  # the run's end token came back (the program ran to its last line)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def as_dict(self) -> dict:
        return asdict(self)


def _cfg(memory_mb: int, timeout_s: float, file_size_mb: int, audit: bool) -> dict:
    return {
        "audit": bool(audit),
        "memory_bytes": int(memory_mb) * 1024 * 1024,
        "cpu_s": int(timeout_s) + 1,
        "fsize_bytes": int(file_size_mb) * 1024 * 1024,
        "nproc": _la.NPROC,
    }


def _spawn(
    code: str, cfg: dict, seccomp: bool = True, timeout_s: float = 20.0, end_token: bool = False
) -> _la.Spawned:
    # the plain launcher's work directory is on the machine's disk: its filter also refuses dir_fd writes and mkfifo
    bpf = filter_program(strict=_la.launcher().kind == "plain") if seccomp else None
    tmpfs = 4 * cfg["fsize_bytes"] + (8 << 20)
    return _la.spawn(_la.launcher(), BOOTSTRAP, code, cfg, timeout_s, bpf, tmpfs, end_token)


@functools.cache
def layers() -> Layers:
    """The isolation layers that held on this machine (probed once per process; see the module docstring)."""
    return probe(_spawn, _la.launcher(), _cfg(256, 10, 1, audit=False), _la.NPROC)


def isolation_problem() -> str | None:
    """Why generated code cannot run with the sandbox's isolation here (None when it can)."""
    la, ly = _la.launcher(), layers()
    if ly.ok:
        return None
    parts = [f"{name}: {ly.report.get(name, 'not probed')}" for name in ly.missing]
    if "nobody" in ly.missing and la.problem:
        parts.append(la.problem)
    if la.kind != "bwrap":
        parts.append("install bubblewrap (apt-get install bubblewrap; scripts/system-deps.sh)")
    return f"the {la.kind} sandbox lacks {', '.join(ly.missing)} (" + "; ".join(parts) + ")"


def _unsafe_allowed(unsafe: bool | None) -> bool:
    if unsafe is not None:
        return bool(unsafe)
    return any(
        os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
        for k in (UNSAFE_ENV, SAME_USER_ENV)
    )


def require_isolation(unsafe: bool | None = None) -> None:
    """Raise :class:`~dlmeval.errors.SandboxError` now if :func:`run_python` would refuse to run code: protocols
    call it before they open a run."""
    problem = isolation_problem()
    if problem is not None and not _unsafe_allowed(unsafe):
        raise SandboxError(
            f"refusing to run generated code: {problem}; or accept the risk with --sandbox-unsafe "
            f"({UNSAFE_ENV}=1, unsafe=True)"
        )


def isolation_label(audit: bool = True) -> str:
    """What a run records: the launcher, the layers that held, ``audit``, and ``unsafe`` when required ones did
    not or the launcher is the plain one (its work directory is on the machine's disk: it only runs with
    ``--sandbox-unsafe``). Care's downstream and leaderboard tables carry it (``sandbox`` columns)."""
    ly, la = layers(), _la.launcher()
    unsafe = not ly.ok or la.kind == "plain"
    parts = [*ly.held, *(["audit"] if audit else []), *(["unsafe"] if unsafe else [])]
    return f"{la.kind}:" + "+".join(parts)


def run_python(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    file_size_mb: int = 16,
    audit_hook: bool = True,
    unsafe: bool | None = None,
) -> ExecResult:
    """Run the Python source ``code`` in the sandbox (see the module docstring).

    ``passed`` needs exit status 0 and the run's end token (:mod:`dlmeval.sandbox.bootstrap`): the program ran to
    its last line. A ``SystemExit`` before the end gives status ``failed`` with return code 1.

    ``audit_hook=False`` leaves the defence-in-depth hook out (to test the operating-system layers on their own).
    ``unsafe``: run even where required layers did not hold (default: ``DLMEVAL_SANDBOX_UNSAFE``); otherwise that
    case raises :class:`~dlmeval.errors.SandboxError`.
    """
    if not isinstance(code, str):
        raise InputError(f"code must be a string, got {type(code).__name__}")
    if not timeout_s > 0:
        raise InputError(f"timeout_s must be positive, got {timeout_s!r}")
    if memory_mb < 64:
        raise InputError(f"memory_mb must be at least 64 (the interpreter needs it), got {memory_mb!r}")
    if file_size_mb < 1:
        raise InputError(f"file_size_mb must be at least 1, got {file_size_mb!r}")
    require_isolation(unsafe)
    s = _spawn(
        code, _cfg(memory_mb, timeout_s, file_size_mb, audit_hook), timeout_s=timeout_s, end_token=True
    )
    return ExecResult(
        status=s.status,
        returncode=s.returncode,
        duration_s=s.duration_s,
        stdout=s.stdout,
        stderr=s.stderr,
        isolation=isolation_label(audit_hook),
        interpreter=_la.launcher().python,
        reached_end=s.reached_end,
    )


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program that checks one HumanEval completion: prompt + completion, the test code, ``check(entry)``
    (the layout of openai/human-eval's ``check_correctness``).

    It passes only when it runs to its end (:func:`run_python`'s end token): openai/human-eval's
    ``unsafe_execute`` records "passed" only after ``exec`` of this program returned, counts a ``SystemExit``
    (``sys.exit(0)``, ``exit()``) as "failed: ..." (it catches ``BaseException``) and a child that died
    (``os._exit(0)``, a signal) as "timed out" (no result came back), so none of them passes there either."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\n"


def check_humaneval(
    prompt: str,
    completion: str,
    test: str,
    entry_point: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    unsafe: bool | None = None,
) -> ExecResult:
    """Execute one HumanEval completion against its tests in the sandbox; ``.passed`` is pass@1 for that sample."""
    return run_python(
        humaneval_program(prompt, completion, test, entry_point),
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        unsafe=unsafe,
    )


def drop_to() -> dict:
    """Popen keywords that start a process as the user sandboxed code runs as (empty: the caller's)."""
    return _la.launcher().drop


__all__ = [
    "ExecResult",
    "SAME_USER_ENV",
    "UNSAFE_ENV",
    "check_humaneval",
    "drop_to",
    "humaneval_program",
    "isolation_label",
    "isolation_problem",
    "layers",
    "require_isolation",
    "run_python",
]
