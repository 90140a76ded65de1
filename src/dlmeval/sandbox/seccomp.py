"""The seccomp filter of the sandbox child, built with libseccomp (its Python binding ``pyseccomp``, a ctypes
interface to the system's ``libseccomp.so.2``; Debian's ``python3-seccomp`` module ``seccomp`` has the same API and
is used where pyseccomp is missing). bubblewrap loads the compiled program (``--seccomp FD``); the plain launcher's
bootstrap loads it itself (:mod:`dlmeval.sandbox.bootstrap`) before the code runs.

libseccomp resolves the system calls by name for the machine's architecture (a call that does not exist there is
left out) and kills a process of another ABI (x32 on x86_64 included); where libseccomp or its binding is missing,
:func:`filter_program` returns None and the sandbox records no ``seccomp`` layer (:func:`unavailable` says why).

What it refuses (``EPERM``; ``ENOSYS`` for ``clone3``, whose flags live in memory a filter cannot read, so glibc
falls back to ``clone``): every ``socket`` (the network namespace already has no way out; this also refuses
``AF_UNIX`` sockets, which could reach a host service through a socket file), namespace and mount calls,
``ptrace`` and cross-process memory access, kernel keyrings, ``bpf``, ``perf_event_open``, ``io_uring`` (it can
issue calls that seccomp does not see), ``userfaultfd``, module loading, ``kexec``, ``reboot``, swap, clock setting
and handle-based opens. With ``strict=True`` (the plain launcher, whose work directory is on the machine's disk)
also: creating special files (``mknod`` / ``mknodat``: ``os.mkfifo``), and every write through a directory
descriptor (``openat`` for writing and ``mkdirat``, ``unlinkat``, ``renameat``, ``linkat``, ``symlinkat``,
``fchmodat``, ``fchownat``, ``utimensat`` with a ``dir_fd``), which the audit hook can only judge by a name; plain
paths (``AT_FDCWD``) stay allowed. A ``dir_fd`` is told from ``AT_FDCWD`` (-100) by its value: a descriptor is at
most ``0x7fffffff`` however the 32-bit ``int`` reaches the register, ``AT_FDCWD`` is above it either way.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

#: system calls refused with EPERM (names, resolved by libseccomp for the machine's architecture)
DENIED: tuple[str, ...] = (
    "ptrace", "syslog", "personality", "adjtimex", "chroot", "acct", "settimeofday", "mount", "umount2",
    "swapon", "swapoff", "reboot", "init_module", "delete_module", "quotactl", "clock_settime", "kexec_load",
    "add_key", "request_key", "keyctl", "unshare", "perf_event_open", "name_to_handle_at", "open_by_handle_at",
    "setns", "process_vm_readv", "process_vm_writev", "finit_module", "kexec_file_load", "bpf", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "socket",
)  # fmt: skip
#: strict: refused outright (special files, opens whose flags a filter cannot read)
STRICT_DENIED: tuple[str, ...] = ("mknod", "mknodat", "openat2")
#: strict: (call, positions of its directory-descriptor arguments) refused when one is a real descriptor
STRICT_DIR_FD: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("mkdirat", (0,)), ("unlinkat", (0,)), ("renameat", (0, 2)), ("renameat2", (0, 2)), ("linkat", (0, 2)),
    ("symlinkat", (1,)), ("fchmodat", (0,)), ("fchmodat2", (0,)), ("fchownat", (0,)), ("utimensat", (0,)),
    ("futimesat", (0,)),
)  # fmt: skip
#: ``openat`` flags that write (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND)
WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
#: the largest value a real descriptor can have in a system call argument
MAX_FD = 0x7FFFFFFF


@functools.cache
def _binding():
    """(the libseccomp binding module, None) or (None, why not)."""
    try:
        import pyseccomp as sc

        return sc, None
    except (ImportError, RuntimeError, OSError) as e:  # RuntimeError: pyseccomp found no libseccomp.so
        first = f"pyseccomp: {e}"
    try:
        import seccomp as sc  # Debian's python3-seccomp (the system Python only)

        return sc, None
    except (ImportError, OSError) as e:
        return None, f"{first}; seccomp: {e}"


def unavailable() -> str | None:
    """Why no filter can be built here (None when one can)."""
    return _binding()[1]


def _rule(f, sc, action, name: str, *args) -> None:
    try:
        if sc.resolve_syscall(sc.Arch.NATIVE, name) < 0:  # not a system call of this architecture
            return
        f.add_rule(action, name, *args)
    except (RuntimeError, ValueError, OSError):  # not a system call of this architecture (or kernel headers)
        pass


@functools.cache
def filter_program(strict: bool = False) -> bytes | None:
    """The compiled filter (a ``struct sock_filter`` array, as bubblewrap and ``PR_SET_SECCOMP`` take it), or None
    where libseccomp is not available."""
    sc, _ = _binding()
    if sc is None:
        return None
    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    try:
        f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # another ABI (x32, i386 on x86_64): killed
    except (AttributeError, RuntimeError, ValueError, OSError):
        pass  # libseccomp's default for another ABI is to kill the thread
    _rule(f, sc, sc.ERRNO(errno.ENOSYS), "clone3")
    for name in DENIED:
        _rule(f, sc, eperm, name)
    if strict:
        for name in STRICT_DENIED:
            _rule(f, sc, eperm, name)
        for bit in WRITE_FLAGS:
            _rule(f, sc, eperm, "openat", sc.Arg(0, sc.LE, MAX_FD), sc.Arg(2, sc.MASKED_EQ, bit, bit))
        for name, positions in STRICT_DIR_FD:
            for i in positions:
                _rule(f, sc, eperm, name, sc.Arg(i, sc.LE, MAX_FD))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


__all__ = ["DENIED", "STRICT_DENIED", "STRICT_DIR_FD", "filter_program", "unavailable"]
