"""Which process is writing a run: a lease (host, pid, the process's start time, heartbeat) per running run, so a
run whose process is gone shows as ``interrupted`` instead of ``running`` forever.

Every write that marks a run running (a new run, ``put``, ``put_many``, ``put_table``) takes or refreshes the lease
in the same transaction; ``finish`` drops it. Reading a run's state never writes: a run stored as ``running`` is

* ``running`` while its lease holder lives (same host: the pid exists and started when the lease says; another
  host: a heartbeat younger than :data:`STALE_S`),
* ``interrupted`` when the holder is gone (same host: no such process, or the pid now belongs to another process;
  another host: no heartbeat for :data:`STALE_S` seconds),
* ``running`` with no lease at all (a store written before leases existed: nothing can be said).

The table is created on the first write that needs it (stores from before it stay readable as they are).
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import sqlite3
from typing import Any

#: seconds without a heartbeat after which a lease held on another host counts as gone (a heartbeat is written
#: with every result, so a live run refreshes it far more often)
STALE_S = 6 * 3600.0

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY REFERENCES runs(run_id), host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, pid_start TEXT, heartbeat TEXT NOT NULL)"
)
_UPSERT = (
    "INSERT INTO leases (run_id, host, pid, pid_start, heartbeat) VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO "
    "UPDATE SET host = excluded.host, pid = excluded.pid, pid_start = excluded.pid_start, "
    "heartbeat = excluded.heartbeat"
)


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22; None where
    there is no ``/proc``): with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


_HOLDER: tuple[str, int, str | None] | None = None


def holder() -> tuple[str, int, str | None]:
    global _HOLDER
    if _HOLDER is None or _HOLDER[1] != os.getpid():  # a forked child is another holder
        _HOLDER = (socket.gethostname(), os.getpid(), process_start(os.getpid()))
    return _HOLDER


def _has_table(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'leases'").fetchone()
        is not None
    )


def take(conn: sqlite3.Connection, run_id: str, now: str) -> None:
    """Take or refresh the lease of ``run_id`` (inside the caller's write transaction)."""
    if not _has_table(conn):
        conn.execute(SCHEMA)
    host, pid, start = holder()
    conn.execute(_UPSERT, (run_id, host, pid, start, now))


def release(conn: sqlite3.Connection, run_id: str) -> None:
    if _has_table(conn):
        conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))


def leases(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """{run_id: {host, pid, pid_start, heartbeat}} (empty for a store without the table)."""
    if not _has_table(conn):
        return {}
    return {
        rid: {"host": h, "pid": p, "pid_start": s, "heartbeat": hb}
        for rid, h, p, s, hb in conn.execute("SELECT run_id, host, pid, pid_start, heartbeat FROM leases")
    }


def _age_s(stamp: str) -> float:
    try:
        t = _dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=_dt.UTC)
    except ValueError:
        return float("inf")
    return (_dt.datetime.now(_dt.UTC) - t).total_seconds()


def gone(lease: dict[str, Any]) -> bool:
    """Whether the process holding ``lease`` no longer runs (see the module docstring)."""
    host, pid = lease["host"], int(lease["pid"])
    if host != socket.gethostname():
        return _age_s(lease["heartbeat"]) > STALE_S
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another user exists under that pid
    start = process_start(pid)
    return bool(lease.get("pid_start")) and start is not None and start != lease["pid_start"]


def resume_hint(command_line: str | None) -> str:
    return f"rerun `{command_line}` to resume" if command_line else "rerun its command to resume"
