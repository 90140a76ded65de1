"""``dlmeval data``: data sets on this machine.

    dlmeval data import BARTSCORE_CHECKOUT [--data-dir DIR] [--sets de-en fi-en ...] [--overwrite]

``import`` copies the BARTScore repository's benchmark files (``{SUM,D2T,WMT}/<set>/data.pkl`` of a local checkout:
all seven WMT19 pairs, the SUM and D2T sets, any other set in that layout) into the data directory, each checked
with the restricted unpickler and the loader first. The ``data`` command's sub-commands are added by functions of
their own (:func:`add_import`), so others can join it.
"""

from __future__ import annotations

import argparse

from dlmeval.cli.common import emit


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("data", help="data sets: import the BARTScore benchmark files from a checkout")
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    add_import(sub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


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
