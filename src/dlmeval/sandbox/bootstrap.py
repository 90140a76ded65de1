"""The child's first code (run as the main script inside the sandbox): resource limits, then the audit hook, then
the untrusted file.

The limits (address space, CPU seconds, file size, no core dumps, ``RLIMIT_NPROC``) are the process's own and hold
for everything it starts, a subinterpreter included. The audit hook is defence in depth only: audit hooks are not a
security boundary (an ``os.open`` with ``dir_fd`` is judged by its relative name, a subinterpreter has no hook), so
what keeps code in is the operating system (:mod:`dlmeval.sandbox.bwrap`); the hook turns the common attempts into a
clear error message.

The end token (issue 32): a run counts as passed only when the program ran to its last line, not merely when it
exited with status 0 (``sys.exit(0)``, ``os._exit(0)`` or a ``SystemExit`` before the tests would otherwise pass). The
parent draws a fresh token per run and hands it over through a pipe; the bootstrap reads it before the code runs
and runs the code in a thread of its own through a pipeline of C callables (``starmap(operator.call, ...)``):
release the waiting main thread, ``exec`` the program, write the token to a second pipe. Only when ``exec``
returned does the pipeline write the token; the code cannot call that step itself because no Python frame of the
bootstrap is an ancestor of the code's frames (its first frame's ``f_back`` is None) and the hook refuses the other
ways to the harness's objects (``gc.get_objects`` / ``get_referrers`` / ``get_referents``,
``sys._current_frames``, ``/proc/PID/mem``). It also refuses ``sys.settrace`` / ``sys.setprofile`` (a trace
function can skip the asserts of ``check``), and the code may start no thread (one could swap ``check`` for a no-op
between its definition and its call). The token is never in the code's source, argv, environment or files. What
remains open: code that breaks out of Python itself (the hook is no boundary; see above) could read the token out
of its process's memory; the operating-system layers still hold it in.

It deletes its own globals before ``exec`` so the untrusted code sees a clean namespace. The hook keeps every
function it calls as a default argument, so rebinding ``os.path.realpath`` & co. from the untrusted code does not
change what the hook does.
"""

# fmt: off
BOOTSTRAP = r"""
import _thread, collections, functools, itertools, json, operator, os, resource, sys, time

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


def _load_seccomp(fd):
    # the plain launcher's filter (libseccomp's program, dlmeval.sandbox.seccomp): no new privileges, then
    # PR_SET_SECCOMP; ctypes is dropped from sys.modules after, so the code's `import ctypes` meets the hook
    import ctypes
    prog = b""
    while True:
        part = os.read(fd, 65536)
        if not part:
            break
        prog += part
    os.close(fd)

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    fprog = _Fprog(len(prog) // 8, prog)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP failed")
    for name in [m for m in sys.modules if m == "ctypes" or m.startswith("ctypes.") or m == "_ctypes"]:
        del sys.modules[name]


if _cfg.get("seccomp_fd") is not None:
    _load_seccomp(_cfg["seccomp_fd"])
del _load_seccomp

with open(_path, encoding="utf-8") as _f:
    _source = _f.read()

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork")
_BLOCKED = {"os.system", "os.forkpty", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
            "_posixsubprocess.fork_exec", "os.startfile", "os.killpg", "gc.get_objects", "gc.get_referrers",
            "gc.get_referents", "sys._current_frames", "sys.settrace", "sys.setprofile"}
_BLOCKED_MODULES = {"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters", "_interpreters",
                    "_xxinterpchannels", "_interpchannels", "_interpqueues", "_thread"}
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


def _memory(p, _resolve=_resolve):
    # whether p names a process's memory (/proc/PID/mem, map_files): the end token lives there
    if isinstance(p, int):
        return False
    try:
        full = _resolve(p, None)
    except Exception:
        return True
    return full.startswith("/proc/") and ("/mem" in full or "/map_files" in full)


def _hook(event, args, _p=_BLOCKED_PREFIXES, _b=_BLOCKED, _m=_BLOCKED_MODULES, _pe=_PATH_EVENTS,
          _wf=_WRITE_FLAGS, _inside=_inside, _getpid=os.getpid, _dirname=os.path.dirname, _dec=os.fsdecode,
          _join=os.path.join, _memory=_memory):
    if event == "import":
        if args and str(args[0]).split(".")[0] in _m:
            raise ImportError(f"dlmeval sandbox: importing {args[0]} is not allowed")
        return
    if event in _b or event.startswith(_p):
        raise PermissionError(f"dlmeval sandbox: {event} is not allowed (no network, no processes, no signals)")
    if event == "open":
        path, mode, flags = args
        if _memory(path):
            raise PermissionError(f"dlmeval sandbox: reading {path!r} (process memory) is not allowed")
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


def _refuse_thread(*args, **kwargs):
    raise RuntimeError("dlmeval sandbox: starting a thread is not allowed")


def _to_the_end(code, ns, tin, tout, _t=_thread, _c=collections, _i=itertools, _o=operator, _p=functools,
                _sleep=time.sleep):
    # The end token (see the module docstring): read from a pipe before the code runs, kept only by C objects
    # that the code cannot reach (the code runs in a thread of its own whose first Python frame is the
    # program's: no frame of ours is an ancestor of its frames), written to another pipe by the same C pipeline
    # right after exec returned. The code may start no thread (one could swap `check` for a no-op between its
    # definition and its call): _thread's starters are replaced before the code runs, and the hook refuses a
    # fresh import of _thread.
    tok = b""
    while True:
        part = os.read(tin, 256)
        if not part:
            break
        tok += part
    os.close(tin)
    ready, seen = _t.allocate_lock(), []
    ready.acquire()
    run = _i.starmap(_o.call, [(ready.release,), (exec, code, ns), (os.write, tout, tok), (seen.append, "end")])
    del tok, code, ns
    joinable = getattr(_t, "start_joinable_thread", None)  # Python >= 3.13
    start = _t.start_new_thread
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_t, name):
            setattr(_t, name, _refuse_thread)
    if joinable is not None:
        handle = joinable(_p.partial(_c.deque, run, 0))
        del run
        ready.acquire()
        handle.join()
    else:
        start(_c.deque, (run, 0))
        del run
        ready.acquire()  # the thread is counted from here on
        while _t._count():  # until it has ended, however it ended (a sentinel lock would be taken over by
            _sleep(0.002)  # threading's, should the code import threading)
    if not seen or seen[-1] != "end":
        raise SystemExit(1)  # the program did not reach its end (an exception, SystemExit, ...)


if _cfg["audit"]:
    sys.addaudithook(_hook)
_code = compile(_source, "solution.py", "exec")
_ns = {"__name__": "__main__", "__builtins__": __builtins__}
_tin, _tout = _cfg.get("token_in"), _cfg.get("token_out")
del _cfg, _path, _f, _source, _limit, _hook, _BLOCKED_PREFIXES, _BLOCKED, _BLOCKED_MODULES, _PATH_EVENTS
del _WRITE_FLAGS, _ROOT, _resolve, _inside, _memory
if _tin is None:
    del _tin, _tout, _to_the_end, _refuse_thread
    exec(_code, _ns)
else:
    _to_the_end(_code, _ns, _tin, _tout)
"""
# fmt: on
