"""``dlmeval leaderboard``: the Care leaderboard over every model in the store, as HTML, Markdown and CSV.

A ``care-leaderboard`` run (``dlmeval care care-leaderboard``) is printed first in the paper's shape (Table 21:
Tier 1, Tier 2, the AR reference, each row's tier). Then one row per Care run and prefix source: MAUVE of the baseline (``none``) and the strategy (``high_entropy``) at
the headline configuration, the interaction gap (± paired SE, p), PPL, actual NFE, HumanEval / GSM8K / ARC, and the
run's signature. ``-o NAME`` writes ``NAME.html``, ``NAME.md`` and ``NAME.csv`` (``--format`` picks some); the
Markdown goes to stdout as well unless ``--quiet``.
"""

from __future__ import annotations

import argparse

from dlmeval.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        help="the Care leaderboard over every stored model (HTML, Markdown, CSV)",
        description="Collect the leaderboard rows of every Care run in the store (or the given runs) into one "
        "ranked table, each row with its run signature.",
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="care runs to include (default: every one)")
    p.add_argument(
        "-o", "--output", default="leaderboard", help="output name without suffix (default: leaderboard)"
    )
    p.add_argument(
        "--format",
        default="html,md,csv",
        help="comma-separated formats among html, md, csv (default: all three)",
    )
    p.add_argument("--quiet", action="store_true", help="do not print the Markdown table")
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
        for info in store.list_runs(RUN_KIND):
            run = store.get_run(info["run_id"])
            if wanted and not any(run.run_id.startswith(w) for w in wanted):
                continue
            if "leaderboard_rows" in run.tables():
                out.append(
                    (
                        f"Care leaderboard (run {run.run_id})",
                        paper_table_markdown(run.get_table("leaderboard_rows")),
                    )
                )
    return out


def run(args: argparse.Namespace) -> int:
    from dlmeval.report.leaderboard import leaderboard_frame, leaderboard_markdown, write_leaderboard
    from dlmeval.store import RunStore, frame_records

    formats = [f.strip().lower().lstrip(".") for f in args.format.split(",") if f.strip()]
    if not formats:
        raise InputError("--format needs at least one of html, md, csv")
    with RunStore(getattr(args, "store", None), must_exist=True) as store:
        paths = write_leaderboard(store, args.output, formats, args.runs or None)
        df = leaderboard_frame(store, args.runs or None)
    if getattr(args, "json", False):
        from dlmeval.store import jsonsafe

        print(jsonsafe.dumps({"paths": {k: str(v) for k, v in paths.items()}, **frame_records(df)}))
        return 0
    if not args.quiet:
        for title, table in _tiered_tables(args, getattr(args, "store", None)):
            print(f"{title}\n\n{table}\n")
        print(leaderboard_markdown(df))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
