"""``dlmeval score``: DiffScore of candidates (given sources) with a diffusion LM.

``--candidates`` and ``--sources`` take a file (:mod:`dlmeval.data.texts`): ``.jsonl`` (one object per line with
``candidate`` / ``source`` / ``text``, optionally ``source`` and ``id``; sources and ids in the candidates file are
used when ``--sources`` is not given), ``.json`` (an array), ``.csv`` / ``.tsv`` (a header row naming those
columns), anything else one text per line (a blank line is an empty text, scored NaN with a reason). A path that
does not exist is an error; ``--text`` scores the arguments themselves as literal texts.
Per-item scores are printed with the run signature; ``--json`` prints everything as JSON, ``--output`` writes the
per-item table as CSV or JSONL. Results go into the run store (``--store``) unless ``--no-store``: a rerun of the
same command resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from dlmeval.cli.common import command_line, emit, model_kwargs
from dlmeval.cli.options import (
    add_batching_args,
    add_estimator_group,
    add_model_args,
    add_runtime_group,
    estimator_settings,
)
from dlmeval.errors import InputError
from dlmeval.parallel import current

ROWS = 50
OUTPUT_SUFFIXES = (".csv", ".jsonl")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "score",
        help="DiffScore: score candidate texts by masked reconstruction",
        description="Score candidates by masked reconstruction with a diffusion LM (DiffScore). "
        "Configurations: marginal (fluency), cond (faithfulness), reverse (coverage), bidir (holistic), "
        "pmi (cond - marginal on shared masks).",
    )
    add_model_args(p)
    p.add_argument(
        "--adapter",
        default=None,
        metavar="DIR",
        help="a LoRA adapter directory (`dlmeval train`, peft format) loaded onto --model",
    )
    p.add_argument(
        "--config",
        default=None,
        help="marginal | cond | reverse | bidir | pmi (aliases: mar, conditional, rev, bi); default: cond when "
        "sources are given (--sources, or a source column in the candidates file), else marginal (fluency of "
        "the candidate alone); the choice is printed",
    )
    p.add_argument(
        "--candidates",
        required=True,
        metavar="FILE",
        help="a .txt / .jsonl / .json / .csv / .tsv file (or, with --text, a text)",
    )
    p.add_argument(
        "--sources", default=None, metavar="FILE", help="a file like --candidates (or, with --text, a text)"
    )
    p.add_argument(
        "--text",
        action="store_true",
        help="--candidates and --sources are literal texts, not file paths",
    )
    add_batching_args(add_estimator_group(p), "scoring")
    p.add_argument(
        "--prompt",
        default=None,
        help="prompt template for chat models: a name (plain, summarize, translate, describe) or a text "
        "with {source}",
    )
    p.add_argument("--no-chat", action="store_true", help="do not use the model's chat template")
    p.add_argument(
        "--tokens", action="store_true", help="also compute token-level scores (in --json/--output)"
    )
    p.add_argument("--output", "-o", default=None, help="write the per-item table to a .csv or .jsonl file")
    p.add_argument("--no-store", action="store_true", help="do not record the run in the run store")
    p.add_argument("--rows", type=int, default=ROWS, help=f"items to print (default {ROWS})")
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON on stdout"
    )
    p.add_argument("--store", default=argparse.SUPPRESS, help="run store (SQLite file)")
    add_runtime_group(p)
    p.set_defaults(func=run)


def read_texts(
    arg: str, what: str, literal: bool = False
) -> tuple[list[str], list[str | None] | None, list[str] | None]:
    """(texts, sources found in the file or None, ids found in the file or None) from a file, or from the literal
    text ``arg`` when ``literal``."""
    if literal:
        return [arg], None, None
    from dlmeval.data.texts import read_text_file

    f = read_text_file(arg, what)
    return f.texts, f.sources, f.ids


def estimator_spec(args: argparse.Namespace):
    """The :class:`~dlmeval.scoring.EstimatorSpec` of ``--preset`` / ``--fast`` with ``-K``, ``-T``, ``--scheme``,
    ``--weighting`` replacing the preset's values (the scores record the resolved settings: ``config``)."""
    from dlmeval.scoring.spec import resolve_estimator

    return resolve_estimator(**estimator_settings(args))


def _check_settings(args: argparse.Namespace) -> None:
    for flag, v, low in (
        ("--masks/-K", args.masks, 1),
        ("--rates/-T", args.rates, 1),
        ("--batch-size", args.batch_size, 1),
        ("--max-tokens", args.max_tokens, 1),
        ("--rows", args.rows, 0),
    ):
        if v is not None and v < low:
            raise InputError(f"{flag} must be at least {low}, got {v}")
    if args.output:
        out = Path(args.output)
        if out.suffix.lower() not in OUTPUT_SUFFIXES:
            raise InputError(f"--output {out}: write a .csv or a .jsonl file")
        parent = out.parent if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise InputError(f"--output {out}: the directory {parent} does not exist; create it first")
        if (
            out.is_dir()
            or not os.access(parent, os.W_OK | os.X_OK)
            or (out.exists() and not os.access(out, os.W_OK))
        ):
            raise InputError(f"--output {out}: cannot write there; pick a writable file path")


def run(args: argparse.Namespace) -> int:
    from dlmeval.models import load_diffusion
    from dlmeval.protocols.score import open_run, score_run
    from dlmeval.scoring import DiffScorer

    # everything is checked before the model loads and before the run store is opened (or created): a bad input
    # leaves the store exactly as it was, and a bad --output fails before the work, not after it
    _check_settings(args)
    store_path = None
    if args.no_store and current().distributed:
        raise InputError(
            "--no-store under torchrun / accelerate launch: ranks share their work through the run store; "
            "drop --no-store (or run in one process)"
        )
    if not args.no_store:
        from dlmeval.store.access import check_writable_store, resolve_store_path

        # only rank 0 opens the store (the other ranks of a distributed job write journals beside it)
        store_path = (
            check_writable_store(getattr(args, "store", None))
            if current().is_main
            else resolve_store_path(getattr(args, "store", None))
        )
    cands, file_srcs, ids = read_texts(args.candidates, "candidates", args.text)
    srcs: list[str | None] | None = file_srcs
    if args.sources is not None:
        srcs, _, _ = read_texts(args.sources, "sources", args.text)
        if len(srcs) != len(cands):
            raise InputError(
                f"{len(cands)} candidates but {len(srcs)} sources; give one source per candidate "
                "(one per line in .txt files)"
            )
    cfg, why = default_config(args.config, srcs)
    if why and not getattr(args, "json", False) and current().is_main:
        print(f"config: {cfg} ({why}; --config chooses another)", file=sys.stderr, flush=True)
    if cfg != "marginal" and srcs is None:
        raise InputError(
            f"--config {cfg} needs --sources (a file, or a text with --text), or use --config marginal"
        )
    spec = estimator_spec(args)
    model = load_diffusion(args.model, seed=args.seed, adapter=args.adapter, **model_kwargs(args))
    scorer = DiffScorer.from_spec(
        model,
        spec,
        seed=args.seed,
        prompt=args.prompt,
        chat=False if args.no_chat else None,
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        progress=not getattr(args, "no_progress", False),
    )
    use_srcs = srcs if cfg != "marginal" else None
    scorer.validate(cands, use_srcs, config=cfg, item_ids=ids)
    store = None
    run_obj = None
    if store_path is not None:
        from dlmeval.parallel import open_store

        store = open_store(store_path)
        run_obj = open_run(store, scorer, cfg, command_line=command_line(args))
    try:
        if run_obj is None:
            df = scorer.score(cands, use_srcs, config=cfg, item_ids=ids, token_scores=args.tokens)
        else:
            df = score_run(
                scorer, run_obj, cands, use_srcs, config=cfg, item_ids=ids, token_scores=args.tokens
            )
            _store_texts(run_obj, df, cands, use_srcs, ids)
            run_obj.finish()
    finally:
        if store is not None:
            store.close()
    if args.output and current().is_main:
        _write(df, Path(args.output))
    payload = {
        "signature": df.attrs["signature"],
        "run_id": getattr(run_obj, "run_id", None),
        "config": df.attrs["config"],
        "preset": args.preset,
        "rates": df.attrs["rates"],
        "warnings": df.attrs["warnings"],
        "items": [_record(r) for r in df.drop(columns=["signature"]).to_dict(orient="records")],
    }
    emit(args, payload, _table(df, cfg, max(0, args.rows), payload["run_id"], cands, spec))
    return 0


def default_config(given: str | None, sources) -> tuple[str, str | None]:
    """(configuration, why it was chosen) for ``--config`` (None when the user named it): ``cond`` when there
    are sources, else ``marginal``."""
    from dlmeval.scoring import resolve_config

    if given is not None:
        return resolve_config(given), None
    if sources is not None and any(s is not None for s in sources):
        return "cond", "sources given: the candidate scored given its source"
    return "marginal", "no sources given: fluency of each candidate alone"


def _store_texts(run, df, cands: list[str], srcs, ids) -> None:
    """The run's texts as its ``texts`` table (``key``, ``candidate``, ``source``), keyed like the run's items
    (a user's id joined with the digest of its texts, as the estimator keys it), which ``runs export`` joins to the
    per-item scores: a stored score can be matched back to its sentence. A rerun on more texts adds its own (rank
    0 writes tables; other ranks' copies are dropped)."""
    import pandas as pd

    from dlmeval.scoring.estimator import _digest

    srcs = list(srcs) if srcs is not None else [None] * len(cands)
    keys = [
        f"{k}#{_digest(c, s)}" if ids is not None else str(k)
        for k, c, s in zip(df["item_id"], cands, srcs, strict=True)
    ]
    texts = pd.DataFrame({"key": keys, "candidate": list(cands), "source": srcs})
    if current().is_main and "texts" in run.tables():
        texts = pd.concat([run.get_table("texts"), texts])
    run.put_table("texts", texts.drop_duplicates("key", keep="last").reset_index(drop=True))


def _record(r: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v) and k.startswith("se_"))
    }


def _write(df, path: Path) -> None:
    out = df.copy()
    if path.suffix.lower() == ".jsonl":
        from dlmeval.store.jsonsafe import dumps

        with path.open("w", encoding="utf-8") as fh:
            for r in out.to_dict(orient="records"):
                fh.write(dumps(r) + "\n")
        return
    for c in out.columns:
        if out[c].map(lambda v: isinstance(v, list)).any():
            out[c] = out[c].map(json.dumps)
    out.to_csv(path, index=False)


def _fmt(x: float, spec: str = ".4f") -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _short(text: str, width: int = 40) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= width else t[: width - 3] + "..."


def se_note(spec) -> str:
    """Why the standard error is not shown: with one sampling unit per masking rate (``K <= T``, or one
    antithetic pair per rate) the stratified estimator has no spread to measure."""
    return (
        f"se not shown: {spec.n_masks} mask(s) over {spec.n_rates} rate(s) leave one sampling unit per rate, too "
        "few for a standard error (use more masks than rates, e.g. the default preset -K 20 -T 10)"
    )


def _table(df, cfg: str, rows: int, run_id: str | None, texts: list[str] | None = None, spec=None) -> str:
    lines = [f"DiffScore ({cfg}), {len(df)} item(s)"]
    extra = [c for c in df.columns if c.startswith("score_")]
    scored = df["score"].notna()
    show_se = bool(df.loc[scored, "se"].notna().any()) or not scored.any()
    head = f"{'#':>4}  {'text':<40} {'score':>9}" + (f" {'se':>8}" if show_se else "") + f" {'tokens':>6}"
    head += "".join(f" {c[6:]:>9}" for c in extra)
    lines.append(head + "  note")
    for i, r in enumerate(df.head(rows).itertuples(index=False)):
        rd = r._asdict()
        note = rd.get("reason") or rd.get("warning") or ""
        label = _short(texts[i]) if texts is not None else str(rd["item_id"])[:40]
        line = f"{i:>4}  {label:<40} {_fmt(rd['score']):>9}"
        line += (f" {_fmt(rd['se']):>8}" if show_se else "") + f" {rd['n_tokens']:>6}"
        line += "".join(f" {_fmt(rd[c]):>9}" for c in extra)
        lines.append(line + (f"  {note}" if note else ""))
    if len(df) > rows:
        lines.append(f"      ... {len(df) - rows} more (use --output FILE or --json)")
    ok = df["score"].dropna()
    if len(ok) > 1:
        lines.append(f"mean {ok.mean():.4f} over {len(ok)} scored item(s)")
    if not show_se and spec is not None:
        lines.append(se_note(spec))
    for w in df.attrs.get("warnings", [])[:5]:
        lines.append(f"warning: {w}")
    if run_id:
        lines.append(f"run: {run_id} (dlmeval runs export {run_id} gives each score with its text)")
    lines.append(f"signature: {df.attrs['signature']}")
    return "\n".join(lines)
