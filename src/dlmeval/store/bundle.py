"""Run bundles: one self-describing, tamper-evident archive per run, to hand a run to someone else or merge the runs
of independent jobs into one store (#39).

A bundle is a zip of JSON / JSON-lines members (never pickle), written deterministically (fixed member order and
timestamps, so the same run exports to the same bytes)::

    manifest.json                 format, version, the run id, the runs inside, the sha256 of every member and of
                                  every record (``records[run][key]``)
    runs/<id>/run.json            the run's row: kind, status, created / updated, first command line
    runs/<id>/signature.json      the whole stored signature (kind, config, models, seed, versions, and whatever
                                  else the signature carries), exactly as the store holds it
    runs/<id>/spec.json           the configuration that decides the numbers (the signature's config without inputs)
    runs/<id>/inputs.json         the digests of the inputs the run read (the config's ``data``)
    runs/<id>/code.json           the code identity: dlmeval and library versions, and any source digest the
                                  signature records
    runs/<id>/environment.json    every opening of the run (time, command line, versions) and the exporting
                                  machine's Python and platform
    runs/<id>/items.jsonl         every per-item record: {"key", "result", "written"}, one per line, in key order
    runs/<id>/tables.json         the summary tables as stored
    runs/<id>/warnings.json       the run's warnings

A bundle holds its run and the verification runs of it (``kind = "verify"``, :mod:`dlmeval.store.verification`),
so a row's status and its evidence travel with it. :func:`import_bundle` refuses a bundle whose record, signature
or member does not match the manifest (naming it), whose signature does not hash to its run id, whose runs
disagree on their id, or whose record differs from the one the store already holds; importing it twice changes
nothing; bundles of one run made by independent jobs (``--shard``) merge into one run.

The digests make a bundle tamper-evident, not tamper-proof: whoever rewrites a record and every digest makes a
consistent bundle, which :func:`dlmeval.store.verification` catches by recomputing a sample of its work units.
"""

from __future__ import annotations

import hashlib
import io
import platform
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlmeval.errors import InputError
from dlmeval.store import code as code_id
from dlmeval.store import jsonsafe
from dlmeval.store.db import Run, RunStore, _now, natural_key
from dlmeval.store.signature import Signature

FORMAT = "dlmeval-bundle"
VERSION = 1
#: the fixed member timestamp (zip needs one; the run's own times are inside the members)
_STAMP = (2020, 1, 1, 0, 0, 0)
#: the largest member read back (a bundle is untrusted input)
MAX_MEMBER_BYTES = 2 * 2**30


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_digest(result: Any) -> str:
    """The digest of one record: sha256 of its canonical strict JSON."""
    return sha256_text(jsonsafe.dumps(result, canonical=True))


def _json(obj: Any) -> str:
    return jsonsafe.dumps(obj, indent=1) + "\n"


# ------------------------------------------------------------------------------------------------ export
def _run_members(run: Run) -> tuple[dict[str, str], dict[str, str]]:
    """The members of one run (name -> text) and its record digests (key -> sha256)."""
    store, rid = run.store, run.run_id
    row = store.execute(
        "SELECT kind, signature, model_names, seed, created, updated, status, command_line FROM runs "
        "WHERE run_id = ?",
        (rid,),
    ).fetchone()
    kind, sig_text, names, seed, created, updated, status, cmd = row
    sig = jsonsafe.loads(sig_text)
    config = dict(sig.get("config", {}))
    known = {"run_id", "kind", "seed", "config", "config_sha256", "models", "versions", "short"}
    code = {
        "dlmeval": sig.get("versions", {}).get("dlmeval"),
        "versions": sig.get("versions", {}),
        **{k: v for k, v in sig.items() if k not in known},  # e.g. a source digest, whatever it is called
    }
    items = store.execute("SELECT key, result, written FROM items WHERE run_id = ?", (rid,)).fetchall()
    items.sort(key=lambda r: natural_key(r[0]))
    lines, digests = [], {}
    for key, result, written in items:
        value = jsonsafe.loads(result)
        digests[key] = record_digest(value)
        lines.append(jsonsafe.dumps({"key": key, "result": value, "written": written}) + "\n")
    tables = {
        name: jsonsafe.loads(data)
        for name, data in store.execute(
            "SELECT name, data FROM tables WHERE run_id = ? ORDER BY rowid", (rid,)
        )
    }
    p = f"runs/{rid}/"
    members = {
        p + "run.json": _json(
            {
                "run_id": rid,
                "kind": kind,
                "status": status,
                "created": created,
                "updated": updated,
                "command_line": cmd,
                "model_names": names,
                "seed": seed,
            }
        ),
        p + "signature.json": _json(sig),
        p + "spec.json": _json({k: v for k, v in config.items() if k != "data"}),
        p + "inputs.json": _json(config.get("data", {})),
        p + "code.json": _json(code),
        p + "environment.json": _json(
            {
                "sessions": run.sessions(),
                "exported": {
                    "python": platform.python_version(),
                    "machine": platform.machine(),
                    "system": platform.system(),
                },
            }
        ),
        p + "items.jsonl": "".join(lines),
        p + "tables.json": _json(tables),
        p + "warnings.json": _json(run.warning_records()),
    }
    return members, digests


def attached_runs(store: RunStore, run_id: str, index: dict[str, list] | None = None) -> list[str]:
    """The runs a bundle of ``run_id`` carries with it: its verification runs (``index``:
    :func:`dlmeval.store.verification.verification_index`, read once for many bundles)."""
    from dlmeval.store.verification import verification_runs

    return [r.run_id for r in verification_runs(store, run_id, index)]


def export_bundle(run: Run, path: str | Path, *, index: dict[str, list] | None = None) -> dict[str, Any]:
    """Write the bundle of ``run`` (and its verification runs) to ``path``; returns the manifest (``index``: see
    :func:`attached_runs`)."""
    store = run.store
    ids = [run.run_id, *attached_runs(store, run.run_id, index)]
    members: dict[str, str] = {}
    records: dict[str, dict[str, str]] = {}
    for rid in ids:
        m, d = _run_members(store.get_run(rid))
        members.update(m)
        records[rid] = d
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "run_id": run.run_id,
        "kind": run.signature.kind,
        "signature": run.signature.short(),
        "runs": ids,
        "members": {name: sha256_text(text) for name, text in members.items()},
        "records": records,
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, text in [("manifest.json", _json(manifest)), *members.items()]:
            info = zipfile.ZipInfo(name, date_time=_STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, text.encode("utf-8"))
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(buf.getvalue())
    except OSError as e:
        raise InputError(f"cannot write the bundle {path}: {e.strerror or e}") from None
    return manifest


# ------------------------------------------------------------------------------------------------ reading
@dataclass
class BundleRun:
    """One run read back from a bundle (checked against the manifest)."""

    run_id: str
    row: dict[str, Any]
    signature: dict[str, Any]
    items: list[tuple[str, Any, str]]
    tables: dict[str, Any]
    warnings: list[dict[str, Any]]
    sessions: list[dict[str, Any]]


@dataclass
class Bundle:
    path: Path
    manifest: dict[str, Any]
    runs: list[BundleRun] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]


def _refuse(path: Path, why: str) -> InputError:
    return InputError(f"bundle {path} refused: {why}")


def read_bundle(path: str | Path, *, expect_run: str | None = None) -> Bundle:
    """Read and check a bundle: every record and member against the manifest's digests, every signature against
    its run id. Refuses (:class:`InputError`, naming the record, member or run) anything that does not match."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no bundle at {path}; `dlmeval runs export RUN --bundle FILE` writes one")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(
            f"{path} is not a dlmeval bundle ({e}); export one with `dlmeval runs export`"
        ) from None
    with zf:
        texts: dict[str, str] = {}
        for info in zf.infolist():
            if info.file_size > MAX_MEMBER_BYTES:
                raise _refuse(path, f"member {info.filename} is {info.file_size} bytes")
            try:
                texts[info.filename] = zf.read(info).decode("utf-8")
            except (zipfile.BadZipFile, UnicodeDecodeError, OSError) as e:
                raise _refuse(path, f"member {info.filename} cannot be read ({e})") from None
    if "manifest.json" not in texts:
        raise _refuse(path, "no manifest.json (not a dlmeval bundle)")
    try:
        manifest = jsonsafe.loads(texts.pop("manifest.json"))
    except ValueError as e:
        raise _refuse(path, f"manifest.json is not JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _refuse(path, "manifest.json is not a dlmeval bundle manifest")
    if manifest.get("version") != VERSION:
        raise _refuse(
            path, f"bundle version {manifest.get('version')!r}; this dlmeval reads version {VERSION}"
        )
    rid = str(manifest.get("run_id", ""))
    if expect_run is not None and not rid.startswith(expect_run.lower()):
        raise _refuse(path, f"it holds run {rid}, not run {expect_run}")
    listed = manifest.get("members") or {}
    extra = sorted(set(texts) - set(listed))
    if extra:
        raise _refuse(path, f"member {extra[0]} is not in the manifest")
    missing = sorted(set(listed) - set(texts))
    if missing:
        raise _refuse(path, f"member {missing[0]} listed in the manifest is missing")
    runs = [_read_run(path, manifest, texts, r) for r in manifest.get("runs") or []]
    if not runs or runs[0].run_id != rid:
        raise _refuse(path, f"the manifest's run {rid} is not the bundle's first run")
    # records were checked one by one (naming the record); now every member as a whole
    for name, text in texts.items():
        if sha256_text(text) != listed[name]:
            raise _refuse(path, f"member {name} does not match its digest in the manifest (it was changed)")
    return Bundle(path, manifest, runs)


def _load(path: Path, texts: dict[str, str], name: str) -> Any:
    if name not in texts:
        raise _refuse(path, f"member {name} is missing")
    try:
        return jsonsafe.loads(texts[name])
    except ValueError as e:
        raise _refuse(path, f"member {name} is not JSON ({e})") from None


def _read_run(path: Path, manifest: dict[str, Any], texts: dict[str, str], rid: str) -> BundleRun:
    p = f"runs/{rid}/"
    row = _load(path, texts, p + "run.json")
    sig = _load(path, texts, p + "signature.json")
    if row.get("run_id") != rid:
        raise _refuse(
            path, f"{p}run.json is run {row.get('run_id')}, not run {rid} (a member of another run)"
        )
    try:
        hashed = Signature.from_dict(sig).run_id
    except (KeyError, TypeError, ValueError) as e:
        raise _refuse(path, f"the signature of run {rid} is malformed ({e})") from None
    if hashed != rid or sig.get("run_id", rid) != rid:
        raise _refuse(
            path,
            f"the signature of run {rid} hashes to run id {hashed}: the signature was changed "
            "or belongs to another run",
        )
    digests = (manifest.get("records") or {}).get(rid)
    if not isinstance(digests, dict):
        raise _refuse(path, f"the manifest has no record digests of run {rid}")
    items = []
    seen = set()
    for n, line in enumerate(texts.get(p + "items.jsonl", "").splitlines(), 1):
        try:
            d = jsonsafe.loads(line)
            key, result, written = str(d["key"]), d["result"], str(d.get("written", ""))
        except (ValueError, KeyError, TypeError):
            raise _refuse(path, f"{p}items.jsonl line {n} is not a record") from None
        if key not in digests:
            raise _refuse(path, f"record {key} of run {rid} is not in the manifest")
        if record_digest(result) != digests[key]:
            raise _refuse(
                path, f"record {key} of run {rid} does not match its digest in the manifest (it was changed)"
            )
        if not isinstance(result, dict):
            raise _refuse(path, f"record {key} of run {rid} is not a JSON object")
        seen.add(key)
        items.append((key, result, written))
    lost = sorted(set(digests) - seen, key=natural_key)
    if lost:
        raise _refuse(path, f"record {lost[0]} of run {rid} is in the manifest but not in the bundle")
    env = _load(path, texts, p + "environment.json")
    return BundleRun(
        rid,
        row,
        sig,
        items,
        _load(path, texts, p + "tables.json"),
        _load(path, texts, p + "warnings.json"),
        list(env.get("sessions") or []),
    )


# ------------------------------------------------------------------------------------------------ import
@dataclass
class Imported:
    """What :func:`import_bundle` did, per run: records added and already present, tables added."""

    run_id: str
    runs: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def added(self) -> int:
        return sum(r["added"] for r in self.runs.values())

    @property
    def present(self) -> int:
        return sum(r["present"] for r in self.runs.values())


def import_bundle(store: RunStore, path: str | Path, *, expect_run: str | None = None) -> Imported:
    """Load a bundle into ``store`` in one transaction (all of it or nothing). A record or table the store holds
    with other content is refused, naming it; records the store lacks are added, so bundles of one run's shards
    merge, and importing a bundle again adds nothing."""
    bundle = read_bundle(path, expect_run=expect_run)
    out = Imported(bundle.run_id)
    with store.transaction() as c:
        for br in bundle.runs:
            out.runs[br.run_id] = _import_run(c, bundle.path, br)
    return out


def _import_run(c, path: Path, br: BundleRun) -> dict[str, int]:
    rid, row = br.run_id, br.row
    now = _now()
    have = c.execute("SELECT status, signature FROM runs WHERE run_id = ?", (rid,)).fetchone()
    if have is not None:
        # the same run id: the same kind, config, models and seed; what else the signatures carry (library
        # versions) may differ, as when a run is resumed after an upgrade: kept as the store has it, and said
        old = jsonsafe.loads(have[1])
        # records of other code join the run only as a resume by other code may (--allow-code-change)
        note = code_id.check_same_code(rid, old.get("code"), br.signature.get("code"), code_id.allowed())
        if note:
            c.execute(
                "INSERT INTO warnings (run_id, message, first_seen, last_seen, count) VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (run_id, message) DO UPDATE SET last_seen = excluded.last_seen",
                (rid, f"bundle {path.name} {note}", now, now),
            )
        moved = sorted(
            k for k in set(old) | set(br.signature) if old.get(k) != br.signature.get(k) and k != "short"
        )
        if moved:
            msg = f"imported a bundle whose signature differs from the stored one in {', '.join(moved)}"
            c.execute(
                "INSERT INTO warnings (run_id, message, first_seen, last_seen, count) VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (run_id, message) DO UPDATE SET last_seen = excluded.last_seen",
                (rid, msg, now, now),
            )
    if have is None:
        c.execute(
            "INSERT INTO runs (run_id, kind, signature, model_names, seed, created, updated, status, command_line) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rid,
                br.signature["kind"],
                jsonsafe.dumps(br.signature),
                str(row.get("model_names") or ""),
                int(br.signature["seed"]),
                str(row.get("created") or now),
                str(row.get("updated") or now),
                str(row.get("status") or "done"),
                row.get("command_line"),
            ),
        )
    stored = dict(c.execute("SELECT key, result FROM items WHERE run_id = ?", (rid,)).fetchall())
    added = present = 0
    new = []
    for key, result, written in br.items:
        old = stored.get(key)
        if old is None:
            new.append((rid, key, jsonsafe.dumps(result), written or now))
            added += 1
        elif record_digest(jsonsafe.loads(old)) == record_digest(result):
            present += 1
        else:
            raise _refuse(path, f"record {key} of run {rid} differs from the one already in the store")
    c.executemany("INSERT INTO items (run_id, key, result, written) VALUES (?, ?, ?, ?)", new)
    tables = dict(c.execute("SELECT name, data FROM tables WHERE run_id = ?", (rid,)).fetchall())
    n_tables = 0
    for name, data in br.tables.items():
        if name in tables:
            if record_digest(jsonsafe.loads(tables[name])) != record_digest(data):
                raise _refuse(path, f"table {name} of run {rid} differs from the one already in the store")
            continue
        c.execute(
            "INSERT INTO tables (run_id, name, data, written) VALUES (?, ?, ?, ?)",
            (rid, name, jsonsafe.dumps(data), now),
        )
        n_tables += 1
    for w in br.warnings:
        c.execute(
            "INSERT INTO warnings (run_id, message, first_seen, last_seen, count) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id, message) DO UPDATE SET count = max(count, excluded.count)",
            (rid, str(w["message"]), str(w["first_seen"]), str(w["last_seen"]), int(w["count"])),
        )
    known = {
        (s, cl) for s, cl in c.execute("SELECT started, command_line FROM sessions WHERE run_id = ?", (rid,))
    }
    for s in br.sessions:
        if (s.get("started"), s.get("command_line")) not in known:
            c.execute(
                "INSERT INTO sessions (run_id, started, command_line, versions) VALUES (?, ?, ?, ?)",
                (rid, s.get("started"), s.get("command_line"), jsonsafe.dumps(s.get("versions") or {})),
            )
    if have is not None and have[0] != "done" and row.get("status") == "done":
        c.execute("UPDATE runs SET status = 'done', updated = ? WHERE run_id = ?", (now, rid))
    return {"added": added, "present": present, "tables": n_tables}


__all__ = [
    "Bundle",
    "BundleRun",
    "FORMAT",
    "Imported",
    "VERSION",
    "export_bundle",
    "import_bundle",
    "read_bundle",
    "record_digest",
]
