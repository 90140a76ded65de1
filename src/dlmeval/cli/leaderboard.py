"""``dlmeval leaderboard``: the Care leaderboard over every model in the store, as HTML, Markdown and CSV.

A ``care-leaderboard`` run (``dlmeval care care-leaderboard``) is printed first in the paper's shape (Table 21:
Tier 1, Tier 2, the AR reference, each row's tier). Then one row per Care run and prefix source: MAUVE of the baseline (``none``) and the strategy (``high_entropy``) at
the headline configuration, the interaction gap (± paired SE, p), PPL, actual NFE, HumanEval / GSM8K / ARC, and the
run's signature and its status (``verified``, ``pending``, ``failed``). ``-o NAME`` writes ``NAME.html``,
``NAME.md`` and ``NAME.csv`` (``--format`` picks some); the Markdown goes to stdout as well unless ``--quiet``.
``--site DIR`` writes the static site (:mod:`dlmeval.report.site`): an index with status flags, one page per model,
the bundles.

``dlmeval leaderboard verify BUNDLE|RUN [--sample N] [--seed S]`` recomputes a seeded sample of a Care run's work
units (a bundle is imported into the store first; no BUNDLE or RUN: every Care run still pending) and records the verification with the run
(:mod:`dlmeval.parallel.verify`); it exits 1 when a unit does not reproduce.
"""

from __future__ import annotations

import argparse

from dlmeval.cli.options import add_runtime_group
from dlmeval.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        help="the Care leaderboard over every stored model (HTML, Markdown, CSV)",
        description="Collect the leaderboard rows of every Care run in the store (or the given runs) into one "
        "ranked table, each row with its run signature.",
    )
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="care runs to include (default: every one); `verify BUNDLE|RUN ...` verifies runs instead",
    )
    p.add_argument(
        "-o", "--output", default="leaderboard", help="output name without suffix (default: leaderboard)"
    )
    p.add_argument(
        "--format",
        default="html,md,csv",
        help="comma-separated formats among html, md, csv (default: all three)",
    )
    # its own dest: the global -q/--quiet (before the command) prints nothing at all, this one keeps the "wrote" line
    p.add_argument(
        "--quiet",
        dest="no_table",
        action="store_true",
        help="do not print the Markdown table (only where it went)",
    )
    p.add_argument(
        "--site",
        default=None,
        metavar="DIR",
        help="also write the static leaderboard site (index, model pages, bundles)",
    )
    v = p.add_argument_group("verify", "options of `dlmeval leaderboard verify BUNDLE|RUN`")
    v.add_argument(
        "--sample", type=int, default=4, help="work units (item chunks) recomputed per run (default 4)"
    )
    v.add_argument(
        "--data-dir", default=None, help="data directory (default: DLMEVAL_DATA or ../shared/data)"
    )
    add_runtime_group(p)
    p.add_argument("--store", default=argparse.SUPPRESS, help="run store (SQLite file)")
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )
    p.set_defaults(func=run)


def _tiered_tables(args, store_path) -> list[tuple[str, str]]:
    """The paper-shaped table (tiers, the AR reference) of each ``care-leaderboard`` run in the store (the given
    runs only when RUN ids are named)."""
    from dlmeval.protocols.care.leaderboard import RUN_KIND, paper_table_markdown
    from dlmeval.store import RunStore

    out = []
    with RunStore(store_path, must_exist=True) as store:
        wanted = set(args.runs or [])
        index = None  # the verification runs, read once when a table needs them
        for info in store.list_runs(RUN_KIND):
            run = store.get_run(info["run_id"])
            if wanted and not any(run.run_id.startswith(w) for w in wanted):
                continue
            if "leaderboard_rows" in run.tables():
                table = run.get_table("leaderboard_rows")
                text = paper_table_markdown(table)
                if "care_run" in table.columns:  # each row's status (the paper's table keeps its own columns)
                    from dlmeval.store.verification import run_status, verification_index

                    index = verification_index(store) if index is None else index
                    text += "\n\nstatus: " + ", ".join(
                        f"{m} {run_status(store, str(rid), index)['status']}"
                        for m, rid in zip(table["model"], table["care_run"])
                        if isinstance(rid, str) and rid
                    )
                out.append((f"Care leaderboard (run {run.run_id})", text))
    return out


def verify(args: argparse.Namespace, targets: list[str]) -> int:
    """``leaderboard verify``: each target (a bundle file or a run id) verified in the store of ``--store``."""
    from pathlib import Path

    from dlmeval.protocols.care.verify import verify_care_run
    from dlmeval.store import RunStore
    from dlmeval.store.access import check_writable_store
    from dlmeval.store.bundle import import_bundle
    from dlmeval.store.verification import status_line

    store_arg = getattr(args, "store", None)
    check_writable_store(store_arg)
    results = []
    with RunStore(store_arg) as store:
        if not targets:  # every Care run of the store that no verification has decided yet
            from dlmeval.store.verification import run_status, verification_index

            index = verification_index(store)
            targets = [r["run_id"] for r in store.list_runs("care")]
            targets = [t for t in targets if run_status(store, t, index)["status"] == "pending"]
            if not targets:
                raise InputError(
                    f"no pending Care run in {store.path} to verify; name a BUNDLE file or a RUN id"
                )
        for t in targets:
            if Path(t).is_file():
                rid = import_bundle(store, t).run_id
            else:
                rid = store.get_run(t).run_id
            run = store.get_run(rid)
            res = verify_care_run(
                store,
                run,
                sample=args.sample,
                seed=args.seed,
                device=args.device,
                dtype=args.dtype,
                data_dir=args.data_dir,
                allow_download=args.allow_download,
                trust_remote_code=args.trust_remote_code,
                progress=not getattr(args, "no_progress", False),
            )
            results.append({"run": rid, **res})
            if not getattr(args, "json", False):
                print(f"run {rid}: " + status_line({"status": res["status"], "evidence": res}))
                print(f"  tolerance: {res['tolerance']}; recomputed {res['records']} records")
                keys = res.get("unit_keys", [])
                more = f", ... {len(keys) - 6} more" if len(keys) > 6 else ""
                print(f"  units (first key of each): {', '.join(keys[:6])}{more}")
                if res.get("tables_differ"):
                    print(f"  tables that differ from their recomputation: {', '.join(res['tables_differ'])}")
                for d in res["differences"][:10]:
                    print(
                        f"  differs: record {d['key']} field {d['field']}: stored {str(d['stored'])[:60]!r}, "
                        f"recomputed {str(d['new'])[:60]!r}"
                    )
                print(f"  verification run {res['run_id']} (travels in `dlmeval runs export {rid} --bundle`)")
    if getattr(args, "json", False):
        from dlmeval.store import jsonsafe

        print(jsonsafe.dumps({"verifications": results}))
    return 1 if any(r["status"] == "failed" for r in results) else 0


def run(args: argparse.Namespace) -> int:
    if args.runs and args.runs[0] == "verify":
        return verify(args, args.runs[1:])
    from dlmeval.report.leaderboard import leaderboard_frame, leaderboard_markdown, write_leaderboard
    from dlmeval.store import RunStore, frame_records

    formats = [f.strip().lower().lstrip(".") for f in args.format.split(",") if f.strip()]
    if not formats:
        raise InputError("--format needs at least one of html, md, csv")
    with RunStore(getattr(args, "store", None), must_exist=True) as store:
        paths = write_leaderboard(store, args.output, formats, args.runs or None)
        df = leaderboard_frame(store, args.runs or None)
        if args.site:
            from dlmeval.report.site import write_site

            paths["site"] = write_site(store, args.site, args.runs or None)["index"]
    if getattr(args, "json", False):
        from dlmeval.store import jsonsafe

        print(jsonsafe.dumps({"paths": {k: str(v) for k, v in paths.items()}, **frame_records(df)}))
        return 0
    if not args.no_table:
        for title, table in _tiered_tables(args, getattr(args, "store", None)):
            print(f"{title}\n\n{table}\n")
        print(leaderboard_markdown(df))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
