"""A small seccomp filter for the sandbox child (bubblewrap's ``--seccomp FD`` loads it).

bubblewrap takes a compiled classic-BPF program; the usual way to build one is libseccomp, whose Python binding
is not on PyPI for every platform (Debian ships it only for the system Python). The filter needed here is a
short deny list, so it is written out as BPF instructions below: on x86_64 only (the syscall numbers are that
architecture's; a process of another ABI is killed), elsewhere :func:`filter_program` returns None and the
sandbox records no ``seccomp`` layer.

What it refuses (``EPERM``, ``ENOSYS`` for ``clone3``): sockets of any family but ``AF_UNIX`` (the network
namespace already has no way out; this also stops code that gets a socket another way), namespace and mount
calls, ``ptrace`` and cross-process memory access, kernel keyrings, ``bpf``, ``perf_event_open``, ``io_uring``
(it can issue socket calls that seccomp does not see), ``userfaultfd``, module loading, ``kexec``, ``reboot``,
swap, clock setting and handle-based opens. Everything else HumanEval code does is allowed.
"""

from __future__ import annotations

import errno
import platform
import struct

# classic BPF opcodes (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
# seccomp return values (linux/seccomp.h)
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_SOCKET = 41
_AF_UNIX = 1
_CLONE3 = 435

#: x86_64 syscall numbers refused with EPERM
DENIED_X86_64: dict[str, int] = {
    "ptrace": 101, "syslog": 103, "personality": 135, "adjtimex": 159, "chroot": 161, "acct": 163,
    "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "clock_settime": 227, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}  # fmt: skip


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)  # struct sock_filter


def filter_program() -> bytes | None:
    """The compiled filter (``struct sock_filter`` array), or None where it is not written for this machine."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    eperm = _ERRNO | errno.EPERM
    p = [
        _ins(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _ins(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _ins(_RET_K, 0, 0, _KILL_PROCESS),
        _ins(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        _ins(_JGE_K, 0, 1, _X32_BIT),  # the x32 ABI: its numbers are not the ones checked below
        _ins(_RET_K, 0, 0, eperm),
        _ins(_JEQ_K, 0, 1, _CLONE3),  # clone3's flags live in memory a filter cannot read: ENOSYS, glibc
        _ins(_RET_K, 0, 0, _ERRNO | errno.ENOSYS),  # falls back to clone
    ]
    for nr in sorted(DENIED_X86_64.values()):
        p += [_ins(_JEQ_K, 0, 1, nr), _ins(_RET_K, 0, 0, eperm)]
    p += [
        _ins(_JEQ_K, 0, 4, _SOCKET),
        _ins(_LD_W_ABS, 0, 0, 16),  # args[0] (low 32 bits on little-endian): the address family
        _ins(_JEQ_K, 0, 1, _AF_UNIX),
        _ins(_RET_K, 0, 0, _ALLOW),
        _ins(_RET_K, 0, 0, eperm),
        _ins(_RET_K, 0, 0, _ALLOW),
    ]
    return b"".join(p)
