"""How a sandbox child is started: the interpreter, the user switch, and the operating-system isolation around it.

Two launchers:

* ``bwrap`` (bubblewrap, Debian package ``bubblewrap``, installed by ``scripts/system-deps.sh``): the child runs
  as the user ``nobody`` (when dlmeval is root: bubblewrap itself is started as ``nobody`` and makes an
  unprivileged user namespace, so the code is ``nobody`` seen from outside too; otherwise it is the caller's uid
  outside), in new user, mount, PID, network, IPC, UTS and cgroup namespaces (``--unshare-all``), no capabilities,
  no further user namespaces (``--disable-userns``), its own session (``--new-session``: no terminal injection),
  killed with its parent (``--die-with-parent``). The file system is the machine's, read-only
  (``--ro-bind / /``), with a fresh ``/dev`` and ``/proc``, a size-limited tmpfs on ``/dev/shm`` and a private,
  size-limited tmpfs on ``/tmp`` that holds the work directory ``/tmp/work`` (the code's cwd, ``HOME`` and
  ``TMPDIR``); nothing it writes reaches the machine. The seccomp filter of :mod:`dlmeval.sandbox.seccomp`
  (libseccomp), where libseccomp is available.
* ``plain`` (no working bubblewrap): the earlier layers, ``nobody`` by ``setuid`` when root and ``unshare --net
  --pid --mount --mount-proc`` when that works (a ``/proc`` of the child's own PID namespace: the machine's
  processes are not in it), plus the strict seccomp filter, which the bootstrap loads (no sockets, ``AF_UNIX``
  included; no write through a ``dir_fd``; no ``mkfifo``). World-writable places (``/tmp``, ``/dev/shm``) stay writable, so the start-up probes
  (:mod:`dlmeval.sandbox.probes`) find no file-system layer and the sandbox refuses to run code unless the caller
  passes the explicit unsafe flag.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

NOBODY = 65534
#: an interpreter that ``nobody`` can execute, tried before the system ones
PYTHON_ENV = "DLMEVAL_SANDBOX_PYTHON"
#: set to ``0`` to ignore bubblewrap (tests of the fallback; a machine where it misbehaves)
BWRAP_ENV = "DLMEVAL_SANDBOX_BWRAP"
CHILD_FLAGS = ("-s", "-S", "-B", "-P")
#: bytes of stdout / stderr kept in an :class:`ExecResult`
OUTPUT_LIMIT = 8192
#: processes the child may have at once (``RLIMIT_NPROC``; HumanEval code starts none)
NPROC = 16
#: where the code works inside bubblewrap (a tmpfs)
WORK = "/tmp/work"


@dataclass(frozen=True)
class Launcher:
    """How children start. ``kind``: ``bwrap`` or ``plain``; ``drop``: Popen keywords of the user switch (empty:
    none); ``python``: the interpreter; ``problem``: why there is no user switch (None when there is one);
    ``netns`` / ``pidns``: whether the plain launcher wraps the child in ``unshare``."""

    kind: str
    drop: dict
    python: str
    problem: str | None
    netns: bool = False
    pidns: bool = False
    procns: bool = False  # the plain launcher mounts a /proc of the child's own PID namespace


def _candidates() -> list[str]:
    out = [os.environ.get(PYTHON_ENV, ""), sys.executable]
    out += [shutil.which(n, path="/usr/bin:/usr/local/bin:/bin") or "" for n in ("python3", "python3.11")]
    return list(dict.fromkeys(p for p in out if p))


def _quiet_run(argv: list[str], **kw) -> bool:
    try:
        r = subprocess.run(
            argv,
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


def _starts(python: str, **kw) -> bool:
    check = "import json, os, resource, sys; assert sys.version_info >= (3, 11)"
    return _quiet_run([python, *CHILD_FLAGS, "-c", check], **kw)


def _user_switch() -> tuple[dict, str, str | None]:
    """(Popen keywords that run a child as nobody, the interpreter, why not possible)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return (
            {},
            sys.executable,
            "dlmeval is not running as root, so it cannot start generated code as the unprivileged user nobody",
        )
    kw = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    tried = _candidates()
    for python in tried:
        if _starts(python, **kw):
            return kw, python, None
    return (
        {},
        sys.executable,
        f"no Python interpreter that the user nobody can execute ({', '.join(tried)} tried; an interpreter under a "
        f"directory only root can read, such as /root, is not executable by nobody); set {PYTHON_ENV} to one "
        "(Python >= 3.11, the standard library suffices)",
    )


#: the plain launcher's namespaces when ``unshare`` works: network, PID, and a mount namespace whose /proc is the
#: child's PID namespace's (the machine's processes are not in it)
PLAIN_UNSHARE = ("unshare", "--net", "--pid", "--fork", "--mount", "--mount-proc", "--map-root-user")


def bwrap_argv(exe: str, tmpfs_bytes: int, seccomp_fd: int | None) -> list[str]:
    """bubblewrap's options (see the module docstring); the program and its arguments follow."""
    argv = [exe, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    argv += ["--cap-drop", "ALL", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # /dev/shm (POSIX shared memory) is a tmpfs of its own, capped like /tmp: bubblewrap's --dev gives it none
    argv += ["--size", str(int(tmpfs_bytes)), "--tmpfs", "/dev/shm"]
    argv += ["--size", str(int(tmpfs_bytes)), "--tmpfs", "/tmp", "--dir", WORK, "--chdir", WORK]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv


def _bwrap_exe() -> str | None:
    if os.environ.get(BWRAP_ENV, "").strip() == "0":
        return None
    return shutil.which("bwrap", path="/usr/bin:/usr/local/bin:/bin")


@functools.cache
def launcher() -> Launcher:
    """Probed once per process: bubblewrap when it starts the interpreter here, else the plain launcher."""
    drop, python, problem = _user_switch()
    exe = _bwrap_exe()
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    # root without an interpreter nobody can run: the plain launcher, whose probes then say what is missing
    if exe is not None and not (root and problem is not None):
        if _quiet_run([*bwrap_argv(exe, 1 << 20, None), python, *CHILD_FLAGS, "-c", "pass"], **drop):
            return Launcher("bwrap", drop, python, problem)
    netns = bool(shutil.which("unshare")) and _quiet_run(
        ["unshare", "--net", "--map-root-user", "true"], **drop
    )
    pidns = netns and _quiet_run(["unshare", "--net", "--pid", "--fork", "--map-root-user", "true"], **drop)
    procns = pidns and _quiet_run([*PLAIN_UNSHARE, "true"], **drop)
    return Launcher("plain", drop, python, problem, netns, pidns, procns)


def read_capped(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(OUTPUT_LIMIT + 1)
    except OSError:
        return ""
    text = data[:OUTPUT_LIMIT].decode("utf-8", errors="replace")
    return text + ("\n[... output cut]" if len(data) > OUTPUT_LIMIT else "")


@dataclass(frozen=True)
class Spawned:
    status: str
    returncode: int | None
    duration_s: float
    stdout: str
    stderr: str
    reached_end: bool | None = None  # the end token came back (None: not asked for)


def spawn(
    la: Launcher,
    bootstrap: str,
    code: str,
    cfg: dict,
    timeout_s: float,
    seccomp: bytes | None,
    tmpfs_bytes: int,
    end_token: bool = False,
) -> Spawned:
    """Run ``code`` under ``bootstrap`` with launcher ``la`` and collect what it did.

    ``end_token``: the run passes only when the program reached its end. A fresh random token
    (:func:`secrets.token_hex`) goes to the child through a pipe (never in its source, argv, environment or a
    file); the bootstrap reads it before the code runs and writes it to a second pipe only after the whole program
    returned (:mod:`dlmeval.sandbox.bootstrap`); ``passed`` needs exit status 0 *and* exactly that token back."""
    cfg = dict(cfg)
    token = secrets.token_hex(16).encode("ascii") if end_token else None
    fds: list[int] = []  # the child's ends of the token pipes: closed here once it started
    mine: list[int] = []  # this process's ends
    if token is not None:
        tin_r, tin_w = os.pipe()
        out_r, out_w = os.pipe()
        os.write(tin_w, token)
        os.close(tin_w)  # the child reads the token and then end of file
        fds, mine = [tin_r, out_w], [out_r]
        cfg["token_in"], cfg["token_out"] = tin_r, out_w
    try:
        s = _spawn_in_dir(la, bootstrap, code, cfg, timeout_s, seccomp, tmpfs_bytes, tuple(fds))
    finally:
        for fd in fds:
            os.close(fd)
    if token is None:
        return s
    try:
        back = _read_available(mine[0], 4 * len(token))
    finally:
        os.close(mine[0])
    reached = back == token
    if s.status == "passed" and not reached:
        note = "the program did not reach its end (it exited before `check` returned, or its end token was wrong)"
        return Spawned(
            "failed", s.returncode, s.duration_s, s.stdout, (s.stderr + "\n" + note).lstrip(), False
        )
    return Spawned(s.status, s.returncode, s.duration_s, s.stdout, s.stderr, reached)


def _read_available(fd: int, limit: int) -> bytes:
    """What is in the pipe ``fd`` now, at most ``limit`` bytes (never waits: a grandchild may hold its write
    end)."""
    os.set_blocking(fd, False)
    out = b""
    while len(out) <= limit:
        try:
            part = os.read(fd, limit + 1 - len(out))
        except BlockingIOError:
            break
        if not part:
            break
        out += part
    return out


def _spawn_in_dir(la, bootstrap, code, cfg, timeout_s, seccomp, tmpfs_bytes, extra_fds) -> Spawned:
    with tempfile.TemporaryDirectory(prefix="dlmeval-sandbox-") as tmp:
        boot, sol = os.path.join(tmp, "_bootstrap.py"), os.path.join(tmp, "solution.py")
        with open(boot, "w", encoding="utf-8") as f:
            f.write(bootstrap)
        with open(sol, "w", encoding="utf-8") as f:
            f.write(code)
        if la.drop:  # the child (nobody) owns its directory and nothing else
            for path in (tmp, boot, sol):
                os.chown(path, NOBODY, NOBODY)
        pass_fds: tuple[int, ...] = tuple(extra_fds)
        sfd = None
        if la.kind == "bwrap":
            if seccomp is not None:
                sfd = os.memfd_create("dlmeval-seccomp", 0)
                os.write(sfd, seccomp)
                os.lseek(sfd, 0, os.SEEK_SET)
                pass_fds += (sfd,)
            argv = bwrap_argv(shutil.which("bwrap") or "bwrap", tmpfs_bytes, sfd)
            argv += ["--ro-bind", boot, "/tmp/_bootstrap.py", "--ro-bind", sol, "/tmp/solution.py", "--"]
            argv += [la.python, *CHILD_FLAGS, "/tmp/_bootstrap.py", json.dumps(cfg), "/tmp/solution.py"]
            home, cwd = WORK, tmp
        else:
            if seccomp is not None:  # the bootstrap loads it (PR_SET_SECCOMP) before the code runs
                sfd = os.memfd_create("dlmeval-seccomp", 0)
                os.write(sfd, seccomp)
                os.lseek(sfd, 0, os.SEEK_SET)
                pass_fds += (sfd,)
                cfg = {**cfg, "seccomp_fd": sfd}
            argv = [la.python, *CHILD_FLAGS, boot, json.dumps(cfg), sol]
            if la.procns:
                argv = [shutil.which("unshare") or "unshare", *PLAIN_UNSHARE[1:], *argv]
            elif la.netns:
                ns = ["--net", *(["--pid", "--fork"] if la.pidns else [])]
                argv = [shutil.which("unshare") or "unshare", *ns, "--map-root-user", *argv]
            home, cwd = tmp, tmp
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0",
        }
        out_path, err_path = os.path.join(tmp, "_stdout"), os.path.join(tmp, "_stderr")
        t0 = time.monotonic()
        timed_out = False
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,  # its own process group: a timeout kills everything it started
                    pass_fds=pass_fds,
                    **la.drop,
                )
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(proc)
                finally:
                    if proc.poll() is None:
                        _kill_group(proc)
        finally:
            if sfd is not None:
                os.close(sfd)
        duration = time.monotonic() - t0
        rc = proc.returncode
        if timed_out:
            status = "timeout"
        elif rc == 0:
            status = "passed"
        elif rc is not None and rc < 0:
            status = "timeout" if -rc == signal.SIGXCPU else "killed"
        elif (
            la.kind == "bwrap"
            and rc is not None
            and rc > 128
            and rc - 128 in (signal.SIGXCPU, signal.SIGKILL)
        ):
            # bubblewrap's init reports a child killed by a signal as 128 + the signal
            status = "timeout" if rc - 128 == signal.SIGXCPU else "killed"
        else:
            status = "failed"
        return Spawned(status, rc, round(duration, 4), read_capped(out_path), read_capped(err_path))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bubblewrap dies, and its namespace with it (--die-with-parent)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
