"""The start-up probes: each isolation layer the sandbox claims is tried once per process, with the audit hook off,
and only the layers that held are recorded.

One probe program runs through the same launcher as generated code and attempts, as hostile code would:

* ``fs``: writing into two world-writable directories of the machine (one under ``/tmp``, one under ``/dev/shm``
  when it exists) and into ``/``; held when none of the files appears on the machine,
* ``netns``: a TCP connect to a listener the parent opened on ``127.0.0.1``; held when it fails,
* ``pidns``: ``os.kill`` of a process the parent started as the same user as the child; held when the kill fails
  and the process lives on,
* ``proc``: reading that process's ``/proc/PID/cmdline``; held when the child's ``/proc`` does not show it (a
  ``/proc`` of the child's own PID namespace),
* ``nproc``: forking past ``RLIMIT_NPROC``; held when a fork fails before the limit is passed,
* ``nobody``: the child's uid is ``nobody`` inside, and (when dlmeval is root) it was started as ``nobody``,
* ``seccomp``: an ``AF_INET`` and an ``AF_UNIX`` socket are refused with ``EPERM`` and ``/proc/self/status`` shows
  a filter,
* ``rlimits``: the address-space and CPU limits read back inside the child as they were set.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass, field

#: the layers without which generated code is not run (unless the caller passes the unsafe flag); ``nobody`` too
#: when dlmeval runs as root
REQUIRED = ("fs", "netns", "pidns", "nproc")
ORDER = ("fs", "netns", "pidns", "proc", "nproc", "seccomp", "rlimits", "nobody")

_PROBE = textwrap.dedent(
    """
    import json, os, resource, socket, time
    P = json.loads({params!r})
    r = {{}}
    def attempt(fn):
        try:
            fn()
            return "done"
        except BaseException as e:
            return type(e).__name__ + ": " + str(e)[:120]
    def write(path):
        with open(path, "w") as f:
            f.write("ESCAPED")
    r["write"] = {{d: attempt(lambda d=d: write(os.path.join(d, "probe.txt"))) for d in P["dirs"]}}
    r["write_root"] = attempt(lambda: write("/dlmeval-probe.txt"))
    r["connect"] = attempt(lambda: socket.create_connection(("127.0.0.1", P["port"]), timeout=3).close())
    r["kill"] = attempt(lambda: os.kill(P["victim"], 15))
    r["proc"] = attempt(lambda: open("/proc/%d/cmdline" % P["victim"], "rb").read())
    r["uid"] = os.getuid()
    r["inet_socket"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    r["unix_socket"] = attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    with open("/proc/self/status") as f:
        r["seccomp_mode"] = [l.split()[1] for l in f if l.startswith("Seccomp:")][:1]
    r["limits"] = [resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_CPU)[0],
                   resource.getrlimit(resource.RLIMIT_NPROC)[0]]
    pids, err = [], None
    for _ in range(P["forks"]):
        try:
            pid = os.fork()
        except OSError as e:
            err = type(e).__name__ + ": " + str(e)
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    r["forks"] = len(pids)
    r["fork_error"] = err
    print("PROBE" + json.dumps(r))
    """
)


@dataclass(frozen=True)
class Layers:
    """What the probes found: ``held`` in :data:`ORDER`, ``report`` one line per probe (what the attempt did)."""

    held: tuple[str, ...]
    report: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing


def probe(run, launcher, cfg: dict, nproc: int) -> Layers:
    """Run the probe program through ``run(code, cfg, seccomp) -> Spawned`` (the sandbox's own launch, audit hook
    off): once without the seccomp filter, so that each namespace and limit is seen on its own (the filter also
    refuses the probe's socket), and once with it; a layer counts when it held in both."""
    a = _probe_once(run, launcher, cfg, nproc, seccomp=False)
    b = _probe_once(run, launcher, cfg, nproc, seccomp=True)
    held = {x for x in a.held if x in b.held} | ({"seccomp"} & set(b.held))
    report = {**a.report, "seccomp": b.report.get("seccomp", "not probed")}
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    required = REQUIRED + (("nobody",) if root else ())
    missing = tuple(x for x in required if x not in held)
    return Layers(tuple(x for x in ORDER if x in held), report, missing)


def _probe_once(run, launcher, cfg: dict, nproc: int, seccomp: bool) -> Layers:
    dirs = [tempfile.mkdtemp(prefix="dlmeval-probe-", dir="/tmp")]
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        dirs.append(tempfile.mkdtemp(prefix="dlmeval-probe-", dir="/dev/shm"))
    for d in dirs:
        os.chmod(d, 0o777)  # world-writable, like /tmp itself: only the sandbox keeps the child out
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    # a victim of the child's own user: only a PID namespace stops the kill
    victim = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, **launcher.drop)
    params = {"dirs": dirs, "port": srv.getsockname()[1], "victim": victim.pid, "forks": nproc + 8}
    try:
        res = run(_PROBE.format(params=json.dumps(params)), cfg, seccomp)
        alive = victim.poll() is None
        leaked = [d for d in dirs if os.listdir(d)]
    finally:
        victim.kill()
        victim.wait()
        srv.close()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        try:
            os.unlink("/dlmeval-probe.txt")
        except OSError:
            pass
    line = next((x for x in res.stdout.splitlines() if x.startswith("PROBE")), None)
    if line is None:
        why = (res.stderr.strip().splitlines() or [res.status])[-1][:200]
        return Layers((), {"probe": f"the probe program did not run ({why})"}, REQUIRED)
    r = json.loads(line[len("PROBE") :])
    report: dict[str, str] = {}
    held: set[str] = set()
    wrote_root = r["write_root"] == "done"
    report["fs"] = (
        f"writes to {', '.join(dirs)} and / -> "
        + ("; ".join(f"{os.path.dirname(d)}: {v}" for d, v in r["write"].items()))
        + f"; /: {r['write_root']}; on the machine: {'files appeared in ' + ', '.join(leaked) if leaked else 'nothing'}"
    )
    if not leaked and not wrote_root:
        held.add("fs")
    report["netns"] = f"connect to 127.0.0.1:{params['port']} -> {r['connect']}"
    if r["connect"] != "done":
        held.add("netns")
    report["pidns"] = (
        f"kill of pid {victim.pid} (outside) -> {r['kill']}; it {'lived on' if alive else 'died'}"
    )
    if r["kill"] != "done" and alive:
        held.add("pidns")
    report["proc"] = f"read /proc/{victim.pid}/cmdline (a process outside) -> {r['proc']}"
    if r["proc"] != "done":
        held.add("proc")
    report["nproc"] = (
        f"{r['forks']} forks of {params['forks']} tried (limit {nproc}) -> {r['fork_error'] or 'all done'}"
    )
    if r["fork_error"] and r["forks"] < nproc:
        held.add("nproc")
    report["seccomp"] = (
        f"AF_INET socket -> {r['inet_socket']}; AF_UNIX socket -> {r['unix_socket']}; Seccomp mode "
        f"{r['seccomp_mode']}"
    )
    refused = all(r[k].startswith("PermissionError") for k in ("inet_socket", "unix_socket"))
    if refused and r["seccomp_mode"] == ["2"]:
        held.add("seccomp")
    report["rlimits"] = f"RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC read back as {r['limits']}"
    if r["limits"] == [cfg["memory_bytes"], cfg["cpu_s"], nproc]:
        held.add("rlimits")
    report["nobody"] = f"uid inside {r['uid']}, started as {'nobody' if launcher.drop else 'the caller'}"
    # the plain launcher's ``unshare --map-root-user`` maps nobody to root inside its namespace
    if launcher.drop and (r["uid"] == 65534 or launcher.kind == "plain" and launcher.netns and r["uid"] == 0):
        held.add("nobody")
    return Layers(tuple(x for x in ORDER if x in held), report)
