"""``dlmeval data list|fetch``: the public data sets dlmeval reads, where they are, and how a clone gets them.

* ``list``              every catalogued file (:mod:`dlmeval.data.catalog`): present or missing in the data
                        directory, its size, and where it came from (the URL it was fetched from, else its source)
* ``fetch NAME...``     download files or groups (``demo``, ``bartscore``, ``tasks``, ``reference-text``, ``all``)
                        into the data directory, each kept only when its SHA-256 matches dlmeval's record
* ``import CHECKOUT``   copy the BARTScore repository's benchmark files (``{SUM,D2T,WMT}/<set>/data.pkl`` of a local
                        checkout: all seven WMT19 pairs, the SUM and D2T sets, any other set in that layout) into the
                        data directory, each checked with the restricted unpickler and the loader first

Nothing here touches the network except ``fetch``, and only for the files it is asked for. Each action is one
``add_<action>(sub)`` function that adds its parser and sets its ``func``, so further actions are added beside them.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data",
        help="list the data sets dlmeval reads and fetch them from their public sources",
        description="The benchmarks, task sets and reference texts dlmeval reads: which are present in the data "
        "directory (--data-dir, DLMEVAL_DATA, ../shared/data beside a checkout, or the user data directory), "
        "and `fetch` to download them, each verified against its recorded SHA-256.",
    )
    sub = p.add_subparsers(dest="data_action", metavar="ACTION")
    add_list(sub)
    add_fetch(sub)
    add_import(sub)
    p.set_defaults(func=run_list, data_dir=None, verify=False)


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--data-dir", default=None, help="the data directory (default: DLMEVAL_DATA, ...)")
    sp.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )


def add_list(sub) -> None:
    sp = sub.add_parser(
        "list", help="every catalogued file: present or missing, size, source (default action)"
    )
    sp.add_argument("--verify", action="store_true", help="hash every present file (slower)")
    _common(sp)
    sp.set_defaults(func=run_list)


def add_fetch(sub) -> None:
    sp = sub.add_parser("fetch", help="download files or groups, verifying each file's SHA-256")
    sp.add_argument("names", nargs="+", metavar="NAME", help="file or group names (dlmeval data list)")
    sp.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="fetch from a mirror holding the files under their data-directory paths instead of their sources",
    )
    sp.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing when the data directory dlmeval reads already holds every named file",
    )
    sp.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="give a file up after S seconds without a byte, connecting or reading (default 60)",
    )
    sp.add_argument(
        "--deadline",
        type=float,
        default=600.0,
        metavar="S",
        help="give a file up when it is not done after S seconds, however slowly bytes come (default 600)",
    )
    _common(sp)
    sp.set_defaults(func=run_fetch)


def _read_root(explicit):
    """The data directory dlmeval reads, or None when there is none yet."""
    from dlmeval.data.paths import data_dir
    from dlmeval.errors import InputError

    try:
        return data_dir(explicit)
    except InputError:
        return None


def run_list(args: argparse.Namespace) -> int:
    from dlmeval.cli.common import emit
    from dlmeval.data import fetch as fetching
    from dlmeval.data.catalog import FILES, GROUPS
    from dlmeval.data.paths import fetch_dir

    root = _read_root(args.data_dir)
    shown = root if root is not None else fetch_dir(args.data_dir)
    rec = fetching.sources(root) if root is not None else {}
    rows = []
    for f in FILES.values():
        st = fetching.status(f, root, verify=args.verify)
        came = rec.get(f.path, {}).get("url")
        rows.append(
            {
                "name": f.name,
                "status": st,
                "path": f.path,
                "bytes": f.size,
                "sha256": f.sha256,
                "fetchable": f.fetchable,
                "fetched_from": came,
                "source": f.source,
                "url": f.url,
                "license": f.license,
            }
        )
    payload = {
        "data_dir": str(shown),
        "exists": root is not None,
        "files": rows,
        "groups": {g: list(GROUPS[g]) for g in GROUPS.names()},
    }
    lines = [f"data directory: {shown}" + ("" if root is not None else " (does not exist yet)")]
    w = max(len(r["name"]) for r in rows)
    lines.append(f"{'NAME':<{w}}  {'STATUS':<8} {'MB':>6}  FROM")
    for r in rows:
        src = f"fetched from {r['fetched_from']}" if r["fetched_from"] else r["source"]
        if not r["fetchable"]:
            src += " [not fetchable]"
        lines.append(f"{r['name']:<{w}}  {r['status']:<8} {r['bytes'] / 1e6:>6.1f}  {src}")
    n = sum(r["status"] != "missing" for r in rows)
    lines.append(f"{n} of {len(rows)} present; groups: {', '.join(GROUPS.names())}")
    if n < len(rows):
        lines.append("get them with: dlmeval data fetch NAME|GROUP (e.g. dlmeval data fetch demo)")
    emit(args, payload, "\n".join(lines))
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    from dlmeval.cli.common import emit
    from dlmeval.data import catalog
    from dlmeval.data import fetch as fetching
    from dlmeval.data.paths import fetch_dir

    fetching.check_base_url(args.base_url)  # before anything else: a typo is one line, not a traceback
    fetching.check_seconds(args.timeout, "--timeout")
    fetching.check_seconds(args.deadline, "--deadline")
    files = catalog.resolve(args.names)
    quiet = getattr(args, "json", False)
    skipped = []
    if not args.base_url:
        named = {n.lower() for n in args.names}
        bad = [f.name for f in files if not f.fetchable and f.name.lower() in named]
        if bad:
            from dlmeval.errors import InputError

            raise InputError(
                f"{', '.join(bad)}: no single public file to download (re-packed from NLTK's corpus archives; "
                "dlmeval data list shows the source); copy it from an existing data directory"
            )
        # a group's files without a download are left out, said once
        skipped = [f.name for f in files if not f.fetchable]
        files = [f for f in files if f.fetchable]
        if skipped and not quiet:
            print(f"not fetchable (no single public file): {', '.join(skipped)}", file=sys.stderr)
    if args.if_missing:
        root = _read_root(args.data_dir)
        if root is not None and all(fetching.status(f, root) == "present" for f in files):
            emit(
                args,
                {"data_dir": str(root), "fetched": [], "present": [f.name for f in files]},
                f"{len(files)} file(s) present in {root}; nothing to fetch",
            )
            return 0
    target = fetch_dir(args.data_dir)
    done = fetching.fetch(
        files,
        target,
        base_url=args.base_url,
        timeout=args.timeout,
        deadline=args.deadline,
        echo=None if quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
    )
    got = [d.file.name for d in done if d.action == "fetched"]
    had = [d.file.name for d in done if d.action == "present"]
    text = f"{len(got)} file(s) fetched and verified, {len(had)} already present, in {target}"
    emit(args, {"data_dir": str(target), "fetched": got, "present": had, "skipped": skipped}, text)
    return 0


def add_import(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "import",
        help="copy the BARTScore repository's {SUM,D2T,WMT}/*/data.pkl files from a local checkout",
        description="Copy neulab/BARTScore benchmark files from a local checkout into the data directory "
        "(meta-eval/bartscore/<task>/<set>/data.pkl), each read with the restricted unpickler and checked first.",
    )
    q.add_argument("checkout", help="a local checkout of neulab/BARTScore (or a directory in its layout)")
    q.add_argument(
        "--data-dir", default=None, help="target data directory (default: DLMEVAL_DATA or ../shared/data)"
    )
    q.add_argument(
        "--sets", nargs="+", default=None, metavar="NAME", help="only these sets (default: every one)"
    )
    q.add_argument("--overwrite", action="store_true", help="replace a file already there with other bytes")
    q.set_defaults(func=run_import)


def run_import(args) -> int:
    from dlmeval.cli.common import emit
    from dlmeval.data.importer import import_bartscore

    got = import_bartscore(args.checkout, args.data_dir, names=args.sets, overwrite=args.overwrite)
    lines = [
        f"{g.task}/{g.name}: {g.rows} rows, {g.status} -> {g.dest}"
        + ("" if g.known else " (not a set dlmeval's loaders know by name)")
        for g in got
    ]
    emit(
        args,
        [
            {
                "set": g.name,
                "task": g.task,
                "rows": g.rows,
                "status": g.status,
                "dest": str(g.dest),
                "known": g.known,
            }
            for g in got
        ],
        "\n".join(lines),
    )
    return 0
