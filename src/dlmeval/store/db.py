"""The run store: one SQLite file (stdlib ``sqlite3``, WAL mode) that every protocol writes to.

Layout (``PRAGMA user_version`` = 1):

* ``runs``      one row per run: id, kind, the signature as JSON, created/updated, status, first command line
* ``items``     per-item results as strict JSON (``jsonsafe``: NaN/inf round-trip), primary key (run, key)
* ``tables``    named summary tables (a DataFrame as column-oriented JSON with dtypes)
* ``warnings``  deduplicated messages with a count
* ``sessions``  every (re)opening of a run: time, command line, library versions

Every write is one ``BEGIN IMMEDIATE ... COMMIT`` transaction, so a process killed at any point leaves either the
whole write or none of it; a rerun of the same command (same kind, config, models and seed) reopens the same run and
:func:`dlmeval.store.shard.pending` skips the keys already done. Several processes (data-parallel ranks) may write
to one store at a time: WAL lets readers run beside the one writer, and writers wait up to ``busy_timeout``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import re
import shlex
import sqlite3
import sys
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dlmeval.errors import InputError, StoreError
from dlmeval.store import jsonsafe, lease
from dlmeval.store.access import STORE_ENV, check_writable_store, resolve_store_path, store_message
from dlmeval.store.frames import _decode_frame, _encode_frame
from dlmeval.store.signature import Signature

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("dlmeval.store")

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    signature    TEXT NOT NULL,
    model_names  TEXT NOT NULL,
    seed         INTEGER NOT NULL,
    created      TEXT NOT NULL,
    updated      TEXT NOT NULL,
    status       TEXT NOT NULL,
    command_line TEXT
);
CREATE TABLE IF NOT EXISTS items (
    run_id  TEXT NOT NULL REFERENCES runs(run_id),
    key     TEXT NOT NULL,
    result  TEXT NOT NULL,
    written TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS tables (
    run_id  TEXT NOT NULL REFERENCES runs(run_id),
    name    TEXT NOT NULL,
    data    TEXT NOT NULL,
    written TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS warnings (
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    message    TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen  TEXT NOT NULL,
    count      INTEGER NOT NULL,
    PRIMARY KEY (run_id, message)
);
CREATE TABLE IF NOT EXISTS sessions (
    run_id       TEXT NOT NULL REFERENCES runs(run_id),
    started      TEXT NOT NULL,
    command_line TEXT,
    versions     TEXT NOT NULL
);
"""

_HEX = re.compile(r"^[0-9a-f]+$")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def natural_key(key: str) -> list[tuple[int, Any]]:
    """Sort key that orders ``item-2`` before ``item-10``."""
    return [(0, int(t)) if t.isdecimal() else (1, t) for t in re.split(r"(\d+)", key) if t != ""]


# ---------------------------------------------------------------------------------------------- store
class RunStore:
    """An SQLite run store. ``RunStore()`` opens the default store; ``RunStore(path)`` a given file.

    ``must_exist=True`` refuses to create a new file (for read-only commands: a mistyped path is an error, not a
    new empty store) and never writes: the file is opened read-only, so a store the user cannot write is still
    listed and an SQLite file that is not a dlmeval store is refused untouched. A file that holds tables but no
    dlmeval schema is refused in every mode (dlmeval never adds its tables to someone else's database).
    """

    def __init__(self, path: str | os.PathLike | None = None, *, must_exist: bool = False):
        self.path = resolve_store_path(path)
        self.read_only = bool(must_exist)
        if not self.path.exists():
            if must_exist:
                raise InputError(f"no run store at {self.path}; pass --store PATH or set {STORE_ENV}")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(
                    f"cannot create the run store directory {self.path.parent} ({e.strerror}); "
                    "pass a writable --store PATH"
                ) from None
        elif must_exist:
            if self.path.is_dir() or not os.access(self.path, os.R_OK):
                raise StoreError(f"cannot read the run store {self.path}; pass another --store PATH")
        else:
            check_writable_store(self.path)
        try:
            if self.read_only:
                self._conn = self._connect_read_only()
            else:
                self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._check_foreign()
            if not self.read_only:
                self._conn.execute("PRAGMA journal_mode = WAL")
                # NORMAL under WAL: a killed process never loses or tears a committed transaction
                self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._init_schema()
        except sqlite3.OperationalError as e:
            raise StoreError(store_message(self.path, e)) from None
        except sqlite3.DatabaseError as e:
            raise InputError(
                f"{self.path} is not a dlmeval run store ({e}); pass another --store PATH"
            ) from None

    def _connect_read_only(self) -> sqlite3.Connection:
        uri = "file:" + urllib.parse.quote(str(self.path.resolve())) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            # a WAL store in a directory this process cannot write (no -shm file can be made): read the file as
            # it is on disk (SQLite's immutable mode), which is what a read-only medium holds
            conn.close()
            conn = sqlite3.connect(
                uri + "&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
            )
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn

    def _check_foreign(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version == 0 and names and "runs" not in names:
            raise InputError(
                f"{self.path} is an SQLite database but not a dlmeval run store (tables: "
                f"{', '.join(sorted(names)[:5])}); it was left untouched; pass another --store PATH"
            )

    def _init_schema(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise InputError(
                f"the run store {self.path} has schema version {version}, newer than this dlmeval "
                f"understands ({SCHEMA_VERSION}); upgrade dlmeval"
            )
        if version < SCHEMA_VERSION and self.read_only:
            # an empty file opened read-only: no runs yet; the schema is created by the first writing command
            self._empty = True
            return
        self._empty = False
        if version < SCHEMA_VERSION:
            with self.transaction() as c:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        c.execute(stmt)
                c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ------------------------------------------------------------------ plumbing
    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside is committed together or not at all."""
        if self._conn.in_transaction:
            raise RuntimeError("run store transactions do not nest")
        if self.read_only:
            raise StoreError(
                f"the run store {self.path} was opened read-only; this command cannot write to it"
            )
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise StoreError(store_message(self.path, e)) from None
        try:
            yield self._conn
        except sqlite3.OperationalError as e:
            self._rollback()
            raise StoreError(store_message(self.path, e)) from None
        except BaseException:
            self._rollback()
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.OperationalError as e:
            self._rollback()
            raise StoreError(store_message(self.path, e)) from None

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, tuple(params))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    # ------------------------------------------------------------------ runs
    def open_run(
        self,
        kind: str,
        config: Mapping[str, Any],
        models: Iterable[Any] | None = None,
        seed: int = 0,
        command_line: str | None = None,
        *,
        allow_code_change: bool | None = None,
    ) -> Run:
        """Create the run for (kind, config, models, seed), or reopen it to resume.

        ``models`` are identities as dicts, :class:`~dlmeval.models.base.ModelIdentity` or models (their
        ``identity()``). A change of library versions since the run was created is recorded as a warning. A run
        created by other code (another source digest, :mod:`dlmeval.store.code`) is refused with both identities
        named, unless ``allow_code_change`` (default: ``dlmeval --allow-code-change``) is set; the run then records
        it (a warning, and the session's versions).
        """
        from dlmeval.store import code as code_id

        sig = Signature.create(kind, config, models, seed)
        rid = sig.run_id
        if command_line is None:
            command_line = shlex.join(sys.argv)
        if allow_code_change is None:
            allow_code_change = code_id.allowed()
        now = _now()
        code_note = None
        with self.transaction() as c:
            row = c.execute("SELECT signature FROM runs WHERE run_id = ?", (rid,)).fetchone()
            if row is not None:
                code_note = code_id.check_same_code(
                    rid, jsonsafe.loads(row[0]).get("code"), sig.code, allow_code_change
                )
            if row is None:
                names = ",".join(str(m.get("name", "?")) for m in sig.models)
                c.execute(
                    "INSERT INTO runs (run_id, kind, signature, model_names, seed, created, updated, status, "
                    "command_line) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?)",
                    (rid, sig.kind, jsonsafe.dumps(sig.as_dict()), names, sig.seed, now, now, command_line),
                )
                lease.take(c, rid, now)
                old_versions = None
            else:
                # a finished run keeps its status until something is written to it (put / put_many / put_table
                # mark it running again): reopening it to read it back, or failing before writing, changes nothing
                old_versions = jsonsafe.loads(row[0]).get("versions", {})
            session = {**sig.versions, "code": sig.code}
            if code_note:
                session["allow_code_change"] = True
            c.execute(
                "INSERT INTO sessions (run_id, started, command_line, versions) VALUES (?, ?, ?, ?)",
                (rid, now, command_line, jsonsafe.dumps(session)),
            )
        run = Run(self, rid)
        if old_versions is not None and not self.read_only:
            lease.announce(self._conn, rid)  # another live process writes it: say so once
        if code_note:
            run.warn(code_note)
        if old_versions is not None:
            changed = [
                f"{k} {old_versions.get(k, 'none')} -> {v}"
                for k, v in sorted(sig.versions.items())
                if old_versions.get(k) != v and not (k == "dlmeval" and code_note)
            ]
            if changed:
                run.warn(
                    "library versions changed since the run was created ("
                    + ", ".join(changed)
                    + "); results written before and after may differ"
                )
        return run

    def get_run(self, ref: str) -> Run:
        """The run with id ``ref`` or the only run whose id starts with ``ref``."""
        ref = str(ref).strip().lower()
        if not ref or not _HEX.match(ref):
            raise InputError(f"{ref!r} is not a run id (hex digits); `dlmeval runs list` shows the runs")
        if getattr(self, "_empty", False):
            raise InputError(f"no run {ref!r} in {self.path}: the store is empty")
        rows = self.execute(
            "SELECT run_id, kind, created FROM runs WHERE run_id LIKE ? ORDER BY created", (ref + "%",)
        ).fetchall()
        if not rows:
            raise InputError(f"no run {ref!r} in {self.path}; `dlmeval runs list` shows the runs there")
        if len(rows) > 1:
            exact = [r for r in rows if r[0] == ref]
            if exact:
                return Run(self, exact[0][0])
            shown = ", ".join(f"{r[0]} ({r[1]})" for r in rows[:10])
            raise InputError(f"run id prefix {ref!r} matches {len(rows)} runs: {shown}; give more digits")
        return Run(self, rows[0][0])

    def list_runs(
        self, kind: str | None = None, *, read_command: lease.CommandReader | None = None
    ) -> list[dict[str, Any]]:
        """One dict per run (oldest first): run_id, kind, models, seed, created, updated, status, n_items, signature
        (the short line); a stopped run also its ``resume`` hint (``read_command``: the CLI's own reading of its
        recorded command line, :func:`dlmeval.store.lease.resume_hint`)."""
        if getattr(self, "_empty", False):
            return []
        sql = (
            "SELECT r.run_id, r.kind, r.model_names, r.seed, r.created, r.updated, r.status, r.signature, "
            "(SELECT COUNT(*) FROM items i WHERE i.run_id = r.run_id) FROM runs r"
        )
        params: tuple[Any, ...] = ()
        if kind:
            sql += " WHERE r.kind = ?"
            params = (kind,)
        out = []
        held = lease.leases(self._conn)
        stopped = lease.stops(self._conn)
        cmds = dict(self.execute("SELECT run_id, command_line FROM runs"))
        # the latest opening's command line resumes (the first one may have had other options)
        cmds.update(
            (r, c)
            for r, c in self.execute("SELECT run_id, command_line FROM sessions ORDER BY started, rowid")
            if c
        )
        for rid, k, names, seed, created, updated, status, sig, n in self.execute(
            sql + " ORDER BY r.created", params
        ):
            extra: dict[str, Any] = {}
            if status == "running" and rid in held:
                extra["lease"] = held[rid]
                if lease.gone(held[rid]):  # its process is gone: say so, and how to go on
                    status = "interrupted"
                    extra["resume"] = lease.resume_hint(cmds.get(rid), sig, read_command)
            elif status in ("failed", "interrupted"):
                stop = stopped.get(rid)
                if stop is not None:
                    extra["error"] = stop["error"]
                    extra["stopped"] = stop["at"]
                extra["resume"] = lease.resume_hint(cmds.get(rid), sig, read_command)
            out.append(
                {
                    "run_id": rid,
                    "kind": k,
                    "models": names.split(",") if names else [],
                    "seed": seed,
                    "created": created,
                    "updated": updated,
                    "status": status,
                    "n_items": n,
                    "signature": Signature.from_dict(jsonsafe.loads(sig)).short(),
                    **extra,
                }
            )
        return out


class Run:
    """One run in a :class:`RunStore`: per-item results, summary tables, warnings and a status."""

    def __init__(self, store: RunStore, run_id: str):
        self.store = store
        self.run_id = run_id
        row = store.execute(
            "SELECT signature, created, command_line FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise InputError(f"no run {run_id!r} in {store.path}")
        self.signature = Signature.from_dict(jsonsafe.loads(row[0]))
        # a record written from here on by another process is that one's (work_loop claims)
        self.opened = _now()
        self.created: str = row[1]
        self.command_line: str | None = row[2]

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, {self.signature.short()!r})"

    # ------------------------------------------------------------------ status
    @property
    def status(self) -> str:
        return self.store.execute("SELECT status FROM runs WHERE run_id = ?", (self.run_id,)).fetchone()[0]

    @property
    def updated(self) -> str:
        return self.store.execute("SELECT updated FROM runs WHERE run_id = ?", (self.run_id,)).fetchone()[0]

    def finish(self, status: str = "done") -> None:
        if not isinstance(status, str) or not status.strip():
            raise ValueError("a run status is a non-empty string such as 'done' or 'failed'")
        with self.store.transaction() as c:
            c.execute(
                "UPDATE runs SET status = ?, updated = ? WHERE run_id = ?", (status, _now(), self.run_id)
            )
            lease.release(c, self.run_id)

    # ------------------------------------------------------------------ per-item results
    def _row(self, key: Any, result: Any, now: str) -> tuple[str, str, str, str]:
        if not isinstance(result, Mapping):
            raise TypeError(f"a result must be a dict, got {type(result).__name__} for key {key!r}")
        return (self.run_id, str(key), jsonsafe.dumps(dict(result)), now)

    _UPSERT = (
        "INSERT INTO items (run_id, key, result, written) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id, key) DO UPDATE SET result = excluded.result, written = excluded.written"
    )

    # a write marks the run running again (finish() marks it done)
    _TOUCH = "UPDATE runs SET updated = ?, status = 'running' WHERE run_id = ?"

    def _touch(self, c: sqlite3.Connection, now: str) -> None:
        c.execute(self._TOUCH, (now, self.run_id))
        lease.take(c, self.run_id, now)  # this process is writing the run (dlmeval.store.lease)

    def put(self, key: Any, result: Mapping[str, Any]) -> None:
        """Store (or replace) one item's result, in one transaction."""
        now = _now()
        row = self._row(key, result, now)
        with self.store.transaction() as c:
            c.execute(self._UPSERT, row)
            self._touch(c, now)

    def put_many(
        self, pairs: Iterable[tuple[Any, Mapping[str, Any]]] | Mapping[Any, Mapping[str, Any]]
    ) -> int:
        """Store many ``(key, result)`` pairs in ONE transaction: all of them or, on any error, none.

        ``pairs`` is consumed inside the transaction, so an exception raised while producing it also rolls back.
        Returns the number of pairs written.
        """
        if isinstance(pairs, Mapping):
            pairs = pairs.items()
        now = _now()
        n = 0
        with self.store.transaction() as c:
            for key, result in pairs:
                c.execute(self._UPSERT, self._row(key, result, now))
                n += 1
            self._touch(c, now)
        return n

    # an exact prefix match (LIKE would read % and _ in a key as wildcards), within one run
    _PREFIX = "FROM items WHERE run_id = ? AND substr(key, 1, ?) = ?"

    def done_keys(self, prefix: str | None = None) -> set[str]:
        """The keys stored so far (only those starting with ``prefix`` when given)."""
        if prefix is None:
            return {
                r[0] for r in self.store.execute("SELECT key FROM items WHERE run_id = ?", (self.run_id,))
            }
        args = (self.run_id, len(prefix), prefix)
        return {r[0] for r in self.store.execute(f"SELECT key {self._PREFIX}", args)}

    def results_with_prefix(self, prefix: str) -> dict[str, dict[str, Any]]:
        """``{key: result}`` of the items whose key starts with ``prefix`` (one query), in key order."""
        args = (self.run_id, len(prefix), prefix)
        rows = self.store.execute(f"SELECT key, result {self._PREFIX} ORDER BY key", args).fetchall()
        return {k: jsonsafe.loads(v) for k, v in rows}

    def __len__(self) -> int:
        return self.store.execute("SELECT COUNT(*) FROM items WHERE run_id = ?", (self.run_id,)).fetchone()[0]

    def get(self, key: Any, default: Any = None) -> dict[str, Any] | Any:
        row = self.store.execute(
            "SELECT result FROM items WHERE run_id = ? AND key = ?", (self.run_id, str(key))
        ).fetchone()
        return default if row is None else jsonsafe.loads(row[0])

    def results(self) -> dict[str, dict[str, Any]]:
        """``{key: result}`` in natural key order (``item-2`` before ``item-10``)."""
        rows = self.store.execute("SELECT key, result FROM items WHERE run_id = ?", (self.run_id,)).fetchall()
        rows.sort(key=lambda r: natural_key(r[0]))
        return {k: jsonsafe.loads(v) for k, v in rows}

    def items(self) -> pd.DataFrame:
        """One row per item in natural key order: ``key`` then the result's fields (nested dicts flattened to
        ``a.b`` columns). A result field called ``key`` becomes ``result.key``."""
        import pandas as pd

        res = self.results()
        if not res:
            return pd.DataFrame({"key": pd.Series([], dtype=object)})
        df = pd.json_normalize(list(res.values()), sep=".")
        if "key" in df.columns:
            df = df.rename(columns={"key": "result.key"})
        df.insert(0, "key", list(res.keys()))
        return df

    # ------------------------------------------------------------------ summary tables
    def put_table(self, name: str, df: pd.DataFrame) -> None:
        """Store (or replace) a named summary table."""
        import pandas as pd

        if not isinstance(name, str) or not name:
            raise ValueError("a table name is a non-empty string")
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"put_table takes a pandas DataFrame, got {type(df).__name__}")
        data = jsonsafe.dumps(_encode_frame(df))
        now = _now()
        with self.store.transaction() as c:
            c.execute(
                "INSERT INTO tables (run_id, name, data, written) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id, name) DO UPDATE SET data = excluded.data, written = excluded.written",
                (self.run_id, name, data, now),
            )
            self._touch(c, now)

    def get_table(self, name: str) -> pd.DataFrame:
        row = self.store.execute(
            "SELECT data FROM tables WHERE run_id = ? AND name = ?", (self.run_id, name)
        ).fetchone()
        if row is None:
            have = ", ".join(self.tables()) or "none"
            raise InputError(f"run {self.run_id} has no table {name!r} (tables: {have})")
        return _decode_frame(jsonsafe.loads(row[0]))

    def tables(self) -> list[str]:
        return [
            r[0]
            for r in self.store.execute(
                "SELECT name FROM tables WHERE run_id = ? ORDER BY rowid", (self.run_id,)
            )
        ]

    # ------------------------------------------------------------------ warnings and sessions
    def warn(self, message: str) -> bool:
        """Record a warning with the run (once per distinct message; repeats raise its count). Returns whether
        it was new; a new warning is also logged."""
        message = str(message)
        now = _now()
        with self.store.transaction() as c:
            new = (
                c.execute(
                    "SELECT 1 FROM warnings WHERE run_id = ? AND message = ?", (self.run_id, message)
                ).fetchone()
                is None
            )
            c.execute(
                "INSERT INTO warnings (run_id, message, first_seen, last_seen, count) VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (run_id, message) DO UPDATE SET count = count + 1, last_seen = excluded.last_seen",
                (self.run_id, message, now, now),
            )
        if new:
            log.warning("run %s: %s", self.run_id, message)
        return new

    def warnings(self) -> list[str]:
        return [
            r[0]
            for r in self.store.execute(
                "SELECT message FROM warnings WHERE run_id = ? ORDER BY first_seen, rowid", (self.run_id,)
            )
        ]

    def warning_records(self) -> list[dict[str, Any]]:
        return [
            {"message": m, "count": n, "first_seen": f, "last_seen": last}
            for m, n, f, last in self.store.execute(
                "SELECT message, count, first_seen, last_seen FROM warnings WHERE run_id = ? "
                "ORDER BY first_seen, rowid",
                (self.run_id,),
            )
        ]

    def sessions(self) -> list[dict[str, Any]]:
        """Every opening of the run: time, command line, library versions."""
        return [
            {"started": s, "command_line": cl, "versions": jsonsafe.loads(v)}
            for s, cl, v in self.store.execute(
                "SELECT started, command_line, versions FROM sessions WHERE run_id = ? "
                "ORDER BY started, rowid",
                (self.run_id,),
            )
        ]

    def info(self) -> dict[str, Any]:
        """Everything but the items, as plain JSON values."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "created": self.created,
            "updated": self.updated,
            "n_items": len(self),
            "signature": self.signature.as_dict(),
            "sessions": self.sessions(),
            "warnings": self.warning_records(),
            "tables": self.tables(),
        }


__all__ = ["RunStore", "Run", "natural_key"]
