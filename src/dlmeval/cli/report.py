"""``dlmeval report [RUN ...] -o report.html``: one self-contained HTML report of stored runs.

With no RUN, every run in the store is reported. The file has no script and loads nothing from the network:
figures are inline SVG, styles inline. ``--heatmap-item KEY`` picks the items of ``diffscore`` runs whose token
heat maps are drawn (default: the first two scored with token scores).
"""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of stored runs",
        description="Write one HTML file (no network, no script; figures inline) with the run signatures and, "
        "per pillar, the tables and figures of the selected runs (default: every run in the store).",
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="run ids or unique prefixes (default: every run)")
    p.add_argument("-o", "--output", default="report.html", help="output file (default: report.html)")
    p.add_argument("--title", default=None, help="page title (default: 'dlmeval report')")
    p.add_argument(
        "--heatmap-item",
        action="append",
        default=None,
        metavar="KEY",
        help="item key of a diffscore run to draw a token heat map for (repeatable)",
    )
    p.add_argument("--store", default=argparse.SUPPRESS, help="run store (SQLite file)")
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlmeval.report import build_report
    from dlmeval.store import RunStore

    with RunStore(getattr(args, "store", None), must_exist=True) as store:
        path = build_report(
            store, args.runs or None, args.output, title=args.title, heatmap_items=args.heatmap_item
        )
        runs = (
            [store.get_run(r).run_id for r in args.runs]
            if args.runs
            else [r["run_id"] for r in store.list_runs()]
        )
    if getattr(args, "json", False):
        print(json.dumps({"path": str(path), "runs": runs}))
    else:
        print(f"wrote the report of {len(runs)} run(s) to {path}")
    return 0
