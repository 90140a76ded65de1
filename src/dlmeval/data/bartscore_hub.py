"""A BARTScore-style meta-evaluation set from a 🤗 dataset: a hub id (offline unless ``allow_download``), a
``save_to_disk`` directory, or one parquet / JSONL / CSV file, read through :func:`dlmeval.data.hub.load_rows`.

:func:`load_bartscore_source` returns the frame :func:`dlmeval.data.bartscore.load_bartscore` returns for the
pickle (same columns, so the meta-evaluation's readers take either) and the rows' provenance (hub.py's dict:
kind, id / path, split, fields, rows, a digest of every row) for the run configuration.

Fields (the first name present is used; a field not listed is ignored):

* SUM / D2T, one row per judged output: the source ``src`` | ``source`` | ``document`` | ``article`` | ``text``;
  the references ``ref_summs`` | ``references`` | ``refs`` | ``human_summaries`` (a list of strings) or
  ``ref_summ`` | ``reference`` (one string); the output ``sys_summ`` | ``candidate`` | ``output`` | ``summary`` |
  ``machine_summaries``; the system ``sys_name`` | ``system`` | ``model_id`` (SUM: required; D2T: optional, as
  in BARTScore's files); ``doc_id`` | ``id`` (default: rows grouped by their source, ``doc0000``, ... in order
  of first appearance); one number per human dimension, as a column named by the dimension or a ``scores``
  mapping ``{dimension: value}``.
* one row per *document* (the ``mteb/summeval`` layout): the output field holds a list of outputs; the system
  field, every dimension column and ``scores`` are then lists of the same length (no system field: the output's
  position in the list, ``"0"``, ``"1"``, ..., is its system).
* WMT (DARR pairs): ``src``, ``ref``, ``better``, ``worse``, ``better_system``, ``worse_system``, optional
  ``pair_id`` (default: the row number).

Texts are taken as they are (the pickle reader's Penn-Treebank detokenization is for BARTScore's tokenized
pickles; the ``*_raw`` columns equal the others here). Every human score is checked as the pickle reader checks
it (a number, not a bool, finite), every text is a string, and every identifier (``doc_id``, the system, ``pair_id``)
a non-empty string or an integer of one type in every row (a float or a list would quietly regroup the outputs), before
the meta-evaluation opens a store; an error names the source, the row, and the field or dimension.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dlmeval.data.bartscore import TEXT_COLUMNS, WMT_COLUMNS, BartScoreBenchmark, resolve_bartscore_name
from dlmeval.data.hub import describe, load_rows, source_stamp
from dlmeval.errors import DataFormatError

SOURCE_FIELDS = ("src", "source", "document", "article", "text")
REFS_FIELDS = ("ref_summs", "references", "refs", "human_summaries")
REF_FIELDS = ("ref_summ", "reference")
CANDIDATE_FIELDS = ("sys_summ", "candidate", "output", "summary", "machine_summaries")
SYSTEM_FIELDS = ("sys_name", "system", "model_id")
DOC_FIELDS = ("doc_id", "id")
WMT_FIELDS = ("src", "ref", "better", "worse", "better_system", "worse_system")


def _first(fields: Sequence[str], names: Sequence[str]) -> str | None:
    return next((n for n in names if n in fields), None)


class _Where:
    """Builds the one-line errors: the source, the row, what is wrong, what was expected."""

    def __init__(self, b: BartScoreBenchmark, label: str):
        self.b, self.label = b, label

    def fail(self, where: str, msg: str) -> DataFormatError:
        return DataFormatError(
            f"{self.label}: {where}: {msg} (expected the {self.b.task} fields of {self.b.name}; see "
            f"dlmeval.data.bartscore_hub)"
        )

    def text(self, v: Any, where: str, field: str) -> str:
        if not isinstance(v, str):
            raise self.fail(where, f"field {field!r} is {type(v).__name__}, expected a string")
        return v

    def ident(self, v: Any, where: str, field: str, kinds: dict[str, tuple[str, str]]) -> str:
        """An identifier field (``doc_id``, ``system``, ``pair_id``): a non-empty string or an integer, of one
        type in every row (``1`` and ``"1"`` would name one document; ``1.0`` another): the key of the grouping
        and of the stored scores, so a wrong type would change the tables without a word."""
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise self.fail(
                where, f"field {field!r} is {type(v).__name__} ({v!r}), expected a string or an integer"
            )
        if isinstance(v, str) and not v.strip():
            raise self.fail(where, f"field {field!r} is an empty string")
        kind = type(v).__name__
        first = kinds.setdefault(field, (kind, where))
        if first[0] != kind:
            raise self.fail(
                where,
                f"field {field!r} is {kind} ({v!r}) but {first[0]} in {first[1]}; give every row one type",
            )
        return str(v)

    def score(self, v: Any, where: str, dim: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(where, f"human score {dim!r} is missing or not a number ({v!r})")
        if not math.isfinite(v):  # a NaN would drop the item from one correlation and not from another
            raise self.fail(where, f"human score {dim!r} is {v!r}, not a finite number")
        return float(v)


def _outputs(b: BartScoreBenchmark, rows: list[dict], w: _Where) -> list[dict[str, Any]]:
    """One record per judged output (a per-document row gives one per output in its list)."""
    fields = list(rows[0]) if rows else []
    f_src, f_cand = _first(fields, SOURCE_FIELDS), _first(fields, CANDIDATE_FIELDS)
    f_refs, f_ref = _first(fields, REFS_FIELDS), _first(fields, REF_FIELDS)
    f_sys, f_doc = _first(fields, SYSTEM_FIELDS), _first(fields, DOC_FIELDS)
    for what, f, names in (("source", f_src, SOURCE_FIELDS), ("output", f_cand, CANDIDATE_FIELDS)):
        if f is None:
            raise w.fail("fields", f"no {what} field ({' | '.join(names)}) among {', '.join(fields)}")
    if f_refs is None and f_ref is None:
        raise w.fail("fields", f"no reference field ({' | '.join(REFS_FIELDS + REF_FIELDS)})")
    dims = b.dimensions
    missing = [d for d in dims if d not in fields] if "scores" not in fields else []
    if missing:
        raise w.fail("fields", f"no human score for dimension {', '.join(map(repr, missing))} (fields: "
                     f"{', '.join(fields)}; a column per dimension or a 'scores' mapping)")  # fmt: skip
    nested = bool(rows) and isinstance(rows[0][f_cand], list)
    if b.task == "SUM" and f_sys is None and not nested:
        raise w.fail("fields", f"a {b.task} set needs a system name per output ({' | '.join(SYSTEM_FIELDS)})")
    out, groups, kinds = [], {}, {}
    for i, row in enumerate(rows):
        where = f"row {i}"
        src = w.text(row[f_src], where, f_src)
        refs_v = row[f_refs] if f_refs is not None else [row[f_ref]]
        if not isinstance(refs_v, list) or not refs_v:
            raise w.fail(where, f"field {f_refs or f_ref!r} must be a non-empty list of strings")
        refs = tuple(w.text(r, where, f_refs or f_ref) for r in refs_v)
        ref = w.text(row[f_ref], where, f_ref) if f_ref is not None else refs[0]
        if f_doc is not None:
            doc = w.ident(row[f_doc], where, f_doc, kinds)
        else:
            doc = groups.setdefault(src, f"doc{len(groups):04d}")
        cands = row[f_cand] if nested else [row[f_cand]]
        if not isinstance(cands, list):
            raise w.fail(where, f"field {f_cand!r} is {type(cands).__name__}; every row must hold a list")
        n = len(cands)

        def per_output(v: Any, field: str, _n: int = n, _where: str = where) -> list:
            if not nested:
                return [v]
            if not isinstance(v, list) or len(v) != _n:
                raise w.fail(_where, f"field {field!r} must be a list of {_n} values, one per output")
            return v

        systems = per_output(row[f_sys], f_sys) if f_sys is not None else [str(k) for k in range(n)]
        if "scores" in fields:
            scores = per_output(row["scores"], "scores")
            by_dim = {d: [s.get(d) if isinstance(s, Mapping) else None for s in scores] for d in dims}
        else:
            by_dim = {d: per_output(row[d], d) for d in dims}
        for k, cand in enumerate(cands):
            at = f"{where} output {k}" if nested else where
            if systems[k] is None and f_sys is not None and (b.task == "SUM" or nested):
                raise w.fail(at, f"field {f_sys!r} is missing (None): every output needs its system's name")
            system = None if systems[k] is None else w.ident(systems[k], at, f_sys or "system", kinds)
            out.append(
                {
                    "doc_id": str(doc),
                    "system": system if (f_sys is not None or nested) else None,
                    "row": f"{i}" if not nested else f"{i}.{k}",
                    "source": src,
                    "reference": ref,
                    "references": refs,
                    "candidate": w.text(cand, at, f_cand),
                    "scores": [
                        w.score(by_dim[d][k], f"{at} (doc {doc!r}, system {system!r})", d) for d in dims
                    ],
                }
            )
    return out


def _text_frame(b: BartScoreBenchmark, rows: list[dict], w: _Where) -> pd.DataFrame:
    records, seen = [], {}
    for r in _outputs(b, rows, w):
        item_id = f"{b.name}/{r['doc_id']}/{r['system']}" if b.task == "SUM" else f"{b.name}/{r['row']}"
        if item_id in seen:  # the item id keys the stored scores: two outputs may not share one
            raise w.fail(
                f"row {r['row']}", f"doc {r['doc_id']!r} system {r['system']!r} repeats row {seen[item_id]}"
            )
        seen[item_id] = r["row"]
        texts = (r["source"], r["reference"], r["references"], r["candidate"])
        records.append((b.name, b.task, item_id, r["doc_id"], r["system"], *texts, *texts, *r["scores"]))
    return pd.DataFrame.from_records(records, columns=list(TEXT_COLUMNS) + list(b.dimensions))


def _wmt_frame(b: BartScoreBenchmark, rows: list[dict], w: _Where) -> pd.DataFrame:
    fields = list(rows[0]) if rows else []
    missing = [f for f in WMT_FIELDS if f not in fields]
    if missing:
        raise w.fail("fields", f"missing {', '.join(map(repr, missing))} (fields: {', '.join(fields)})")
    out, seen, kinds = [], set(), {}
    for i, row in enumerate(rows):
        given = row.get("pair_id")
        pair = w.ident(given, f"row {i}", "pair_id", kinds) if given is not None else str(i)
        if pair in seen:
            raise w.fail(f"row {i}", f"pair_id {pair!r} repeats an earlier row")
        seen.add(pair)
        texts = [w.text(row[f], f"row {i}", f) for f in WMT_FIELDS]
        out.append((b.name, "WMT", b.lang_pair, f"{b.name}/{pair}", pair, *texts))
    return pd.DataFrame.from_records(out, columns=list(WMT_COLUMNS))


@functools.lru_cache(maxsize=16)
def _read(name: str, source: str, split: str | None, allow_download: bool, stamp: tuple):
    # keyed on the local files' stamp, so that a rewritten dataset is read again
    b = resolve_bartscore_name(name)
    data = load_rows(
        source,
        split=split,
        default_split="test",
        allow_download=allow_download,
        what=f"--benchmark-source {b.name}",
    )
    w = _Where(b, f"--benchmark-source {b.name} ({describe(data.provenance)})")
    if not data.rows:
        raise w.fail("rows", "the dataset has no rows")
    rows = list(data.rows)
    frame = _wmt_frame(b, rows, w) if b.task == "WMT" else _text_frame(b, rows, w)
    return frame, dict(data.provenance)


def load_bartscore_source(
    name: str, source: str, *, split: str | None = None, allow_download: bool = False
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Benchmark ``name`` (a BARTScore set: its task and human dimensions) read from ``source`` (see the module
    docstring): the :func:`~dlmeval.data.bartscore.load_bartscore` frame and the rows' provenance. ``split``: the
    split of a hub dataset or ``DatasetDict`` directory (default: its only split, else ``test``)."""
    frame, prov = _read(resolve_bartscore_name(name).name, str(source), split, bool(allow_download),
                        source_stamp(source))  # fmt: skip
    return frame.copy(), dict(prov)


__all__ = ["load_bartscore_source"]
