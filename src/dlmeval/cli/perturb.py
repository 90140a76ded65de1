"""``dlmeval perturb TEXT``: show what each natural-noise condition does to a text.

Prints one line per condition (default: all 32 of the robustness paper) with the number of edited units out of
the eligible ones. ``--type`` picks one type (``keyboard``, ``char.deletion``, ``word.synonym``, ...), ``--rate``
one rate in [0, 1] instead of the paper's rates, ``--seed`` and ``--item-id`` the draw (the output is a pure
function of text, seed, item id and condition), ``--scope-span START:END`` perturbs only that character span,
``--list`` describes the types, ``--json`` prints machine-readable results with every edit.
"""

from __future__ import annotations

import argparse
import json

from dlmeval.cli.options import add_seed_arg
from dlmeval.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "perturb",
        help="show the natural-noise perturbations of a text (32 conditions)",
        description="Apply the robustness paper's perturbations (5 character-level types at r = 0.05, 0.10, "
        "0.20, 0.30; 4 word-level types at r = 0.10, 0.20, 0.30) to a text and print the results.",
    )
    p.add_argument("text", nargs="?", default=None, help="the text to perturb (omit with --list)")
    p.add_argument(
        "--type",
        default="all",
        help="'all' (default) or one type: transposition, char.deletion, insertion, keyboard, homoglyph, "
        "word.deletion, shuffle, synonym, repetition",
    )
    p.add_argument("--rate", type=float, default=None, help="one rate in [0, 1] instead of the paper's rates")
    add_seed_arg(p)
    p.add_argument("--item-id", default="cli", help="item id the draw derives from (default 'cli')")
    p.add_argument(
        "--span", default=None, metavar="START:END", help="perturb only text[START:END] (question-only scope)"
    )
    p.add_argument("--list", action="store_true", help="describe the perturbation types and exit")
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )
    p.set_defaults(func=run)


def _span(spec: str | None, n: int) -> tuple[int, int] | None:
    if spec is None:
        return None
    try:
        a, b = spec.split(":")
        start, end = int(a) if a else 0, int(b) if b else n
    except ValueError:
        raise InputError(f"--span must look like START:END (character offsets), got {spec!r}") from None
    if not 0 <= start <= end <= n:
        raise InputError(f"--span {spec} does not lie inside the text ({n} characters)")
    return start, end


def run(args: argparse.Namespace) -> int:
    from dlmeval.robustness.perturb import TYPES, conditions

    as_json = bool(getattr(args, "json", False))
    if args.list:
        rows = [
            {
                "type": k,
                "rates": list(t.rates),
                "description": t.description,
                "eligible_units": t.eligible,
                "params": dict(t.default_params),
            }
            for k, t in TYPES.items()
        ]
        if as_json:
            print(json.dumps({"types": rows}, indent=2))
        else:
            for r in rows:
                rates = ", ".join(f"{x:.2f}" for x in r["rates"])
                print(f"{r['type']:<19} r in {{{rates}}}")
                print(f"{'':<19} {r['description']}; eligible: {r['eligible_units']}")
        return 0
    if args.text is None:
        raise InputError('give a text to perturb (dlmeval perturb "some text"), or --list')
    if args.rate is not None and not 0 <= args.rate <= 1:
        raise InputError(f"--rate must lie in [0, 1], got {args.rate}")
    types = None if args.type == "all" else [args.type]
    conds = conditions(types, [args.rate] if args.rate is not None else None)
    span = _span(args.span, len(args.text))
    results = []
    for c in conds:
        if span is None:
            res = c.perturb(args.text, args.seed, args.item_id)
        else:
            res = c.perturb_span(args.text, *span, args.seed, args.item_id)
        results.append((c, res))
    if as_json:
        payload = {
            "text": args.text,
            "seed": args.seed,
            "item_id": args.item_id,
            "span": list(span) if span else None,
            "results": [{**c.describe(), **r.as_dict()} for c, r in results],
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return 0
    width = max(len(c.key) for c, _ in results)
    print(f"{'original':<{width}}  {'':>7}  {args.text}")
    for c, r in results:
        count = f"{r.changed}/{r.eligible}"
        print(f"{c.key:<{width}}  {count:>7}  {r.text}")
    return 0
