"""The child's first code (run as the main script inside the sandbox): resource limits, then the audit hook, then
the untrusted file.

The limits (address space, CPU seconds, file size, no core dumps, ``RLIMIT_NPROC``) are the process's own and hold
for everything it starts, a subinterpreter included. The audit hook is defence in depth only: audit hooks are not a
security boundary (an ``os.open`` with ``dir_fd`` is judged by its relative name, a subinterpreter has no hook), so
what keeps code in is the operating system (:mod:`dlmeval.sandbox.bwrap`); the hook turns the common attempts into a
clear error message.

It deletes its own globals before ``exec`` so the untrusted code sees a clean namespace. The hook keeps every
function it calls as a default argument, so rebinding ``os.path.realpath`` & co. from the untrusted code does not
change what the hook does.
"""

# fmt: off
BOOTSTRAP = r"""
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
_limit(resource.RLIMIT_NPROC, _cfg["nproc"])

with open(_path, encoding="utf-8") as _f:
    _source = _f.read()

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork")
_BLOCKED = {"os.system", "os.forkpty", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
            "_posixsubprocess.fork_exec", "os.startfile", "os.killpg"}
_BLOCKED_MODULES = {"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters", "_interpreters",
                    "_xxinterpchannels", "_interpchannels", "_interpqueues"}
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
# fmt: on
