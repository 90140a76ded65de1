"""``dlmeval runs list|show|export|import``: look into the run store, and hand runs to other stores.

* ``list``                      one line per run: id, kind, models, created, status, items done
* ``show RUN``                  the full signature, sessions, warnings and summary tables of a run
* ``export RUN -o PATH``        per-item results (or ``--table NAME``) as CSV, or everything as JSON
* ``export RUN --bundle FILE``  the run as a self-describing, tamper-evident bundle (:mod:`dlmeval.store.bundle`)
* ``import FILE``               load a bundle into the store (refused, naming the record, when it was changed)

``RUN`` is a run id, any unique prefix of one, or ``last`` (the run written last). JSON exports are strict JSON: a non-finite float is written as
``{"$float": "nan"}`` (``"inf"``, ``"-inf"``); ``dlmeval.store.jsonsafe.loads`` reads them back.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dlmeval.errors import InputError
from dlmeval.store import RunStore, frame_records, jsonsafe

TABLE_ROWS = 20


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "runs",
        help="list, show and export stored runs",
        description="Look into the run store (--store PATH, DLMEVAL_STORE, or the user data "
        "directory). RUN is a run id or a unique prefix of one.",
    )
    sub = p.add_subparsers(dest="runs_action", metavar="ACTION")

    def common(sp: argparse.ArgumentParser) -> None:
        # also accepted after the action; SUPPRESS keeps the global value when absent here
        sp.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
        )
        sp.add_argument("--store", default=argparse.SUPPRESS, help="run store (SQLite file)")

    pl = sub.add_parser("list", help="one line per run (the default action)")
    pl.add_argument(
        "--kind", default=None, help="only runs of this kind (diffscore, care, robust, demo, ...)"
    )
    common(pl)
    ps = sub.add_parser("show", help="signature, sessions, warnings and tables of a run")
    ps.add_argument("run", metavar="RUN", help="run id, unique prefix, or last")
    ps.add_argument(
        "--rows", type=int, default=TABLE_ROWS, help=f"table rows to print (default {TABLE_ROWS})"
    )
    common(ps)
    pe = sub.add_parser("export", help="per-item results or a table as CSV, or the whole run as JSON")
    pe.add_argument("run", metavar="RUN", help="run id, unique prefix, or last")
    pe.add_argument(
        "--format",
        choices=("csv", "json"),
        default=None,
        help="default: from the suffix of -o (.json -> json), else csv",
    )
    pe.add_argument("-o", "--output", default="-", help="output file ('-' = stdout, the default)")
    pe.add_argument("--table", default=None, help="export this summary table instead of the per-item results")
    pe.add_argument(
        "--bundle",
        default=None,
        metavar="FILE",
        help="write the whole run (signature, spec, code identity, environment, every record, input digests, "
        "tables, verifications) as one bundle (a zip of JSON members with a manifest of digests)",
    )
    common(pe)
    pi = sub.add_parser("import", help="load a run bundle (runs export --bundle) into the store")
    pi.add_argument(
        "bundle", metavar="FILE", help="a bundle written by `dlmeval runs export RUN --bundle FILE`"
    )
    pi.add_argument("--run", default=None, help="refuse the bundle unless it holds this run (id or prefix)")
    common(pi)
    p.set_defaults(func=run, runs_action=None)


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "runs_action", None) or "list"
    store_arg = getattr(args, "store", None)
    as_json = bool(getattr(args, "json", False))
    if action == "list":
        return _list(store_arg, getattr(args, "kind", None), as_json)
    if action == "import":
        return _import(store_arg, args.bundle, args.run, as_json)
    with RunStore(store_arg, must_exist=True) as store:
        r = store.get_run(_latest(store) if args.run == "last" else args.run)
        if action == "show":
            return _show(r, as_json, max(0, args.rows))
        return _export(r, args, as_json)


def _latest(store) -> str:
    """The id of the run written last (``RUN`` = ``last``)."""
    runs = store.list_runs()
    if not runs:
        raise InputError(f"no runs in {store.path}; run a command first (dlmeval score, sample, ...)")
    return max(runs, key=lambda r: (r["updated"], r["created"]))["run_id"]


def _list(store_arg: str | None, kind: str | None, as_json: bool) -> int:
    from dlmeval.store.access import resolve_store_path

    path = resolve_store_path(store_arg)
    runs: list[dict[str, Any]] = []
    if path.exists():
        from dlmeval.cli.main import command_reader

        with RunStore(path, must_exist=True) as store:  # read-only: lists a store it cannot write
            runs = store.list_runs(kind=kind, read_command=command_reader())
    if as_json:
        print(json.dumps({"store": str(path), "runs": runs}, indent=2))
        return 0
    if not runs:
        print(f"no runs in {path}" + (f" of kind {kind!r}" if kind else ""))
        return 0
    header = ("RUN ID", "KIND", "MODELS", "CREATED", "STATUS", "ITEMS")
    rows = [
        (
            r["run_id"],
            r["kind"],
            ",".join(r["models"]) or "-",
            _when(r["created"]),
            r["status"],
            str(r["n_items"]),
        )
        for r in runs
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(f"store: {path}")
    for row in (header, *rows):
        print(
            "  ".join(
                c.rjust(w) if i == 5 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
            ).rstrip()
        )
    for r in runs:
        if r["status"] == "interrupted" and "lease" in r:
            held = r["lease"]
            print(
                f"interrupted: {r['run_id']} (process {held['pid']} on {held['host']} is gone; last write "
                f"{_when(held['heartbeat'])} UTC); {r['resume']}"
            )
        elif r["status"] in ("failed", "interrupted"):
            why = f": {r['error']}" if r.get("error") else ""
            print(f"{r['status']}: {r['run_id']}{why}; {r['resume']}")
    return 0


def _when(stamp: str) -> str:
    return stamp.replace("T", " ")[:19]


def _show(r, as_json: bool, rows: int) -> int:
    from dlmeval.store.code import describe

    info = r.info()
    from dlmeval.cli.main import command_reader

    listed = next(
        (x for x in r.store.list_runs(read_command=command_reader()) if x["run_id"] == r.run_id), {}
    )
    info["status"] = listed.get("status", info["status"])  # `interrupted` when the writing process is gone
    info.update({k: listed[k] for k in ("error", "stopped", "resume") if k in listed})
    if as_json:
        info["tables"] = {name: frame_records(r.get_table(name)) for name in info["tables"]}
        print(jsonsafe.dumps(info, indent=2))
        return 0
    sig = r.signature
    status = info["status"]
    print(f"run {r.run_id}  kind {sig.kind}  status {status}  items {info['n_items']}")
    if "lease" in listed and "resume" in listed:
        print(
            f"interrupted: process {listed['lease']['pid']} on {listed['lease']['host']} is gone; {listed['resume']}"
        )
    elif status in ("failed", "interrupted"):
        why = f" ({_when(listed['stopped'])} UTC): {listed['error']}" if listed.get("error") else ""
        print(f"{status}{why}; {listed.get('resume', 'rerun its command to resume')}")
    print(f"signature: {sig.short()}")
    print(f"created {_when(info['created'])} UTC, updated {_when(info['updated'])} UTC")
    print("models:")
    for m in sig.models or [{"name": "none"}]:
        print("  " + ", ".join(f"{k}={v}" for k, v in m.items()))
    print(f"seed: {sig.seed}")
    print(f"versions: {', '.join(f'{k} {v}' for k, v in sig.versions.items())}")
    print(f"code: {describe(sig.code)}" + (f", sha256 {sig.code['source_sha256']}" if sig.code else ""))
    n = sig.numerics
    print(
        "numerics: "
        + (
            f"threads {n.get('threads')}, deterministic algorithms {'on' if n.get('deterministic') else 'off'}, "
            f"devices {'+'.join(n.get('devices') or []) or 'none'}, dtypes {'+'.join(n.get('dtypes') or []) or 'none'}, "
            f"cpu {n.get('cpu_capability')}"
            if n
            else "not recorded (a run made before dlmeval recorded them)"
        )
    )
    print(f"config (sha256 {sig.config_sha256[:16]}):")
    for line in jsonsafe.dumps(sig.config, indent=2).splitlines():
        print("  " + line)
    print("sessions:")
    for s in info["sessions"]:
        v = s.get("versions") or {}
        other = v.get("code") != sig.code and v.get("code") is not None
        note = f"  [{describe(v['code'])}" if other else ""
        note += (", --allow-code-change]" if v.get("allow_code_change") else "]") if other else ""
        print(f"  {_when(s['started'])}  {s['command_line'] or ''}{note}")
    print("warnings:" + ("" if info["warnings"] else " none"))
    for w in info["warnings"]:
        print(f"  - {w['message']}" + (f" (x{w['count']})" if w["count"] > 1 else ""))
    print("tables:" + ("" if info["tables"] else " none"))
    import pandas as pd

    for name in info["tables"]:
        df = r.get_table(name)
        print(f"  [{name}] {df.shape[0]} rows x {df.shape[1]} columns")
        with pd.option_context("display.width", 110, "display.max_columns", 20):
            text = df.head(rows).to_string() if rows else ""
        for line in text.splitlines():
            print("    " + line)
        if df.shape[0] > rows:
            print(f"    ... {df.shape[0] - rows} more rows (dlmeval runs export {r.run_id} --table {name})")
    return 0


def _items_with_texts(r):
    """The per-item results, with the run's texts beside them when it stored a ``texts`` table (``dlmeval score``
    keeps the scored texts there, keyed like its items)."""
    df = r.items()
    if "texts" in r.tables() and "key" in df.columns:
        texts = r.get_table("texts")
        texts = texts.rename(
            columns={c: f"text.{c}" for c in texts.columns if c != "key" and c in df.columns}
        )
        df = df.merge(texts, on="key", how="left")
    return df


def _import(store_arg: str | None, path: str, expect: str | None, as_json: bool) -> int:
    from dlmeval.store.access import check_writable_store
    from dlmeval.store.bundle import import_bundle

    check_writable_store(store_arg)
    with RunStore(store_arg) as store:
        done = import_bundle(store, path, expect_run=expect)
        if as_json:
            print(json.dumps({"store": str(store.path), "run_id": done.run_id, "runs": done.runs}))
            return 0
        for rid, n in done.runs.items():
            kind = store.get_run(rid).signature.kind
            print(
                f"run {rid} ({kind}): {n['added']} records added, {n['present']} already present, "
                f"{n['tables']} tables added"
            )
        print(f"imported {path} into {store.path}" + ("" if done.added else " (nothing new)"))
    return 0


def _bundle(r, path: str, as_json: bool) -> int:
    from dlmeval.store.bundle import export_bundle

    manifest = export_bundle(r, path)
    n = sum(len(d) for d in manifest["records"].values())
    if as_json:
        print(json.dumps({"run_id": r.run_id, "path": path, "runs": manifest["runs"], "records": n}))
    else:
        extra = len(manifest["runs"]) - 1
        print(
            f"wrote bundle of run {r.run_id} ({len(manifest['records'][r.run_id])} records"
            + (f"; with {extra} verification run(s)" if extra else "")
            + f") to {path}"
        )
        print(f"signature: {r.signature.short()}")
    return 0


def _export(r, args: argparse.Namespace, as_json: bool) -> int:
    if args.bundle:
        if args.output != "-" or args.table or args.format:
            raise InputError("--bundle writes the whole run: leave out -o, --table and --format")
        return _bundle(r, args.bundle, as_json)
    out = args.output
    fmt = args.format or ("json" if out != "-" and Path(out).suffix.lower() == ".json" else "csv")
    if fmt == "json":
        if args.table:
            payload: dict[str, Any] = {
                "run_id": r.run_id,
                "signature": r.signature.as_dict(),
                "table": args.table,
                **frame_records(r.get_table(args.table)),
            }
            n = len(payload["rows"])
        else:
            payload = r.info()
            payload["tables"] = {name: frame_records(r.get_table(name)) for name in payload["tables"]}
            payload["items"] = [{"key": k, "result": v} for k, v in r.results().items()]
            n = len(payload["items"])
        text = jsonsafe.dumps(payload, indent=2) + "\n"
    else:
        import pandas as pd

        df = r.get_table(args.table) if args.table else _items_with_texts(r)
        plain = isinstance(df.index, pd.RangeIndex) and df.index.name is None
        text = df.to_csv(index=not plain)
        n = len(df)
    if out == "-":
        sys.stdout.write(text)
        print(f"signature: {r.signature.short()}", file=sys.stderr)
        return 0
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write {out}: {e.strerror or e}") from None
    what = f"table {args.table!r}" if args.table else "items"
    if as_json:
        print(
            json.dumps(
                {
                    "run_id": r.run_id,
                    "path": str(out),
                    "format": fmt,
                    "what": what,
                    "rows": n,
                    "signature": r.signature.short(),
                }
            )
        )
    else:
        print(f"wrote {n} rows ({what}, {fmt}) of run {r.run_id} to {out}")
        print(f"signature: {r.signature.short()}")
    return 0
