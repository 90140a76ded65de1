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

Run states (issue 32): ``running``, ``done``, ``failed`` (the command stopped on an input error or an exception;
the message is kept in the ``stops`` table and shown by ``dlmeval runs list / show``) and ``interrupted`` (a signal,
a kill, a lost lease). :func:`stop_all` records ``failed`` / ``interrupted`` for every run this process was writing
when the command ends that way (``dlmeval.cli.main``); a kill -9 leaves no record, and the lease shows it.

Two processes writing one run: the first keeps the run's lease; the second sees it, says so in one line, and the
work loop (:func:`dlmeval.parallel.work.work_loop`) shares the chunks through ``claims`` (one row per chunk being
computed, with its holder): a process computes only the chunks it claimed, skips those another live process holds
and waits for them at the end, taking over a chunk whose holder is gone. No chunk is computed twice.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import logging
import os
import re
import shlex
import socket
import sqlite3
from collections.abc import Callable
from typing import Any

log = logging.getLogger("dlmeval.store")

#: seconds without a heartbeat after which a lease held on another host counts as gone (a heartbeat is written
#: with every result, so a live run refreshes it far more often)
STALE_S = 6 * 3600.0

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY REFERENCES runs(run_id), host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, pid_start TEXT, heartbeat TEXT NOT NULL)"
)
STOPS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS stops (run_id TEXT PRIMARY KEY REFERENCES runs(run_id), status TEXT NOT NULL, "
    "error TEXT, at TEXT NOT NULL, host TEXT, pid INTEGER)"
)
CLAIMS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims (run_id TEXT NOT NULL REFERENCES runs(run_id), chunk TEXT NOT NULL, "
    "host TEXT NOT NULL, pid INTEGER NOT NULL, pid_start TEXT, heartbeat TEXT NOT NULL, PRIMARY KEY (run_id, chunk))"
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


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the store has table ``name`` (``leases``, ``stops`` and ``claims`` are created on the first write
    that needs them; a store from before them lacks them)."""
    q = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(q, (name,)).fetchone() is not None


#: (store file, run id) of every run this process wrote (took or shared the lease of) and has not finished
_WRITING: set[tuple[str, str]] = set()
#: runs whose other writer this process has already named (one line per run)
_ANNOUNCED: set[str] = set()


def forget() -> None:
    """Start a command afresh: the runs written before it (a library caller's) are not its own to mark."""
    _WRITING.clear()


def _db_file(conn: sqlite3.Connection) -> str:
    rows = conn.execute("PRAGMA database_list").fetchall()
    return next((r[2] for r in rows if r[1] == "main"), "") or ""


def _mine(lease: dict[str, Any] | None) -> bool:
    return lease is not None and (lease["host"], int(lease["pid"]), lease.get("pid_start")) == holder()


def other_holder(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The lease of ``run_id`` when another live process holds it (None when none, or it is ours or gone)."""
    held = leases(conn).get(run_id)
    if held is None or _mine(held) or gone(held):
        return None
    return held


def take(conn: sqlite3.Connection, run_id: str, now: str) -> None:
    """Take or refresh the lease of ``run_id`` (inside the caller's write transaction). A lease that another
    live process holds stays its own: this process writes beside it (the chunks are shared by claims)."""
    if not _has_table(conn, "leases"):
        conn.execute(SCHEMA)
    _WRITING.add((_db_file(conn), run_id))
    if other_holder(conn, run_id) is not None:
        return
    host, pid, start = holder()
    conn.execute(_UPSERT, (run_id, host, pid, start, now))


def release(conn: sqlite3.Connection, run_id: str) -> None:
    _WRITING.discard((_db_file(conn), run_id))
    if _has_table(conn, "leases"):
        held = leases(conn).get(run_id)
        if held is None or _mine(held) or gone(held):
            conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
    if _has_table(conn, "stops"):
        conn.execute("DELETE FROM stops WHERE run_id = ?", (run_id,))


def announce(conn: sqlite3.Connection, run_id: str) -> bool:
    """Say once (one line) that another live process is writing ``run_id`` (it holds the run's lease, or a chunk
    of it); whether one is."""
    held = other_holder(conn, run_id)
    if held is None and _has_table(conn, "claims"):
        q = "SELECT host, pid, pid_start, heartbeat FROM claims WHERE run_id = ?"
        for h, p, s, hb in conn.execute(q, (run_id,)).fetchall():
            c = {"host": h, "pid": p, "pid_start": s, "heartbeat": hb}
            if not _mine(c) and not gone(c):
                held = c
                break
    if held is None:
        return False
    if run_id not in _ANNOUNCED:
        _ANNOUNCED.add(run_id)
        log.warning(
            f"run {run_id} is also being written by process {held['pid']} on {held['host']} (since "
            f"{held['heartbeat'][:19]}Z): this process computes the chunks that one has not claimed and waits "
            "for the rest"
        )
    return True


# ---------------------------------------------------------------------------------------------- stops
def stops(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """{run_id: {status, error, at, host, pid}} of the runs recorded as failed or interrupted."""
    if not _has_table(conn, "stops"):
        return {}
    q = "SELECT run_id, status, error, at, host, pid FROM stops"
    return {
        r: {"status": s, "error": e, "at": a, "host": h, "pid": p} for r, s, e, a, h, p in conn.execute(q)
    }


def stop_all(status: str, error: str, now: str) -> list[str]:
    """Record ``status`` (``failed`` / ``interrupted``) and ``error`` for every run this process is writing and
    holds the lease of (or whose holder is gone); the ids recorded. A run another live process still writes is
    left to it. Opens each store anew (the command may have closed its own)."""
    done: list[str] = []
    for path, run_id in sorted(_WRITING):
        if not path:  # an in-memory store: nothing outlives the process
            continue
        try:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        except sqlite3.Error:
            continue
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None and row[0] == "running" and other_holder(conn, run_id) is None:
                conn.execute(
                    "UPDATE runs SET status = ?, updated = ? WHERE run_id = ?", (status, now, run_id)
                )
                conn.execute(STOPS_SCHEMA)
                host, pid, _ = holder()
                conn.execute(
                    "INSERT OR REPLACE INTO stops (run_id, status, error, at, host, pid) VALUES (?, ?, ?, ?, ?, ?)",
                    (run_id, status, str(error)[:2000], now, host, pid),
                )
                if _has_table(conn, "leases"):
                    conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
                if _has_table(conn, "claims"):
                    conn.execute(
                        "DELETE FROM claims WHERE run_id = ? AND pid = ? AND host = ?", (run_id, pid, host)
                    )
                done.append(run_id)
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            conn.close()
    _WRITING.clear()
    return done


# ---------------------------------------------------------------------------------------------- claims
def chunk_id(keys) -> str:
    """A chunk's name in ``claims``: a digest of its keys."""
    return hashlib.sha256("\n".join(map(str, keys)).encode("utf-8")).hexdigest()[:24]


def claim(conn: sqlite3.Connection, run_id: str, keys, since: str, now: str) -> str:
    """Claim the chunk of ``keys`` for this process (inside the caller's write transaction): ``"mine"`` (claimed,
    or taken over from a holder that is gone), ``"held"`` (another live process computes it) or ``"done"`` (every
    key was written since ``since``, the start of this work loop: another process computed it)."""
    if not _has_table(conn, "claims"):
        conn.execute(CLAIMS_SCHEMA)
    cid = chunk_id(keys)
    row = conn.execute(
        "SELECT host, pid, pid_start, heartbeat FROM claims WHERE run_id = ? AND chunk = ?", (run_id, cid)
    ).fetchone()
    if row is not None:
        held = {"host": row[0], "pid": row[1], "pid_start": row[2], "heartbeat": row[3]}
        if not _mine(held) and not gone(held):
            return "held"
    keys = [str(k) for k in keys]
    fresh = 0
    for i in range(0, len(keys), 500):
        part = keys[i : i + 500]
        marks = ",".join("?" * len(part))
        fresh += conn.execute(
            f"SELECT COUNT(*) FROM items WHERE run_id = ? AND written >= ? AND key IN ({marks})",
            (run_id, since, *part),
        ).fetchone()[0]
    if fresh == len(keys):
        return "done"
    host, pid, start = holder()
    conn.execute(
        "INSERT OR REPLACE INTO claims (run_id, chunk, host, pid, pid_start, heartbeat) VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, cid, host, pid, start, now),
    )
    return "mine"


def unclaim(conn: sqlite3.Connection, run_id: str, keys) -> None:
    if _has_table(conn, "claims"):
        conn.execute("DELETE FROM claims WHERE run_id = ? AND chunk = ?", (run_id, chunk_id(keys)))


def leases(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """{run_id: {host, pid, pid_start, heartbeat}} (empty for a store without the table)."""
    if not _has_table(conn, "leases"):
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


#: the commands that take ``--threads`` (cli/options.py's runtime group): the fallback when no reader is given or
#: the recorded command line does not parse
_THREADED = {"score", "sample", "care", "robust", "meta-eval", "train", "demo", "leaderboard", "check-model"}

#: what the CLI's own parser reads in a recorded command's arguments (the words after the program's name):
#: ``(its command takes --threads, they state it)``, or None where they do not parse
#: (:func:`dlmeval.cli.main.command_reader`; the store never imports the CLI)
CommandReader = Callable[[list[str]], tuple[bool, bool] | None]


def _threads_words(command_line: str) -> tuple[bool, bool]:
    """The word heuristic: some word after the first names a command of :data:`_THREADED` (global options may
    precede the command); some word is ``--threads`` or ``--threads=N``."""
    words = command_line.split()
    stated = any(w == "--threads" or w.startswith("--threads=") for w in words)
    return any(w in _THREADED for w in words[1:]), stated


def resume_hint(
    command_line: str | None, signature: str | None = None, read: CommandReader | None = None
) -> str:
    """How to resume a stopped run: its command line, with ``--threads N`` added when the run recorded a thread
    count the command did not state (the count is part of the run id, so a machine with other cores would
    otherwise open a new run instead of resuming this one). ``read`` (the CLI's own parser) decides whether the
    command takes ``--threads`` and states it; without it, or where the line does not parse, a word heuristic
    does."""
    if not command_line:
        return "rerun its command to resume"
    m = re.search(r"(?:^|\|)threads:(\d+)(?:\||$)", signature or "")
    parsed = None
    if m and read is not None:
        try:
            parsed = read(shlex.split(command_line)[1:])
        except ValueError:  # unbalanced quotes: not a line shlex.join wrote
            parsed = None
    takes, stated = parsed if parsed is not None else _threads_words(command_line)
    if m and takes and not stated:
        command_line = f"{command_line} --threads {m.group(1)}"
    return f"rerun `{command_line}` to resume"
