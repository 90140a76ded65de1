"""The BARTScore meta-evaluation sets (12 shipped, plus the WMT pairs a checkout brings) (neulab/BARTScore ``{SUM,D2T,WMT}/*/data.pkl``) as normalized DataFrames.

What the pickles hold (read with :func:`~dlmeval.data.safepickle.safe_load_pickle`, which refuses every global):

* SUM (SummEval, Newsroom, REALSumm, Rank19, QAGS_CNN, QAGS_XSUM):
  ``{doc_id: {"src", "ref_summ", ["ref_summs"], "sys_summs": {system: {"sys_summ", "scores": {dim: value}}}}}``.
  SummEval alone has ``ref_summs`` (11 references; ``ref_summ`` is the first). For the factuality sets (Rank19,
  QAGS_CNN, QAGS_XSUM) ``ref_summ`` is a copy of ``src``: there is no reference summary. Rank19 systems are
  ``correct``/``incorrect``; QAGS has one system (key ``0``) per document. Doc ids are strings (SummEval, Newsroom)
  or ints (the others); system names are strings, or the int 0 (QAGS); both become strings here.
* D2T (BAGEL, SFHOT, SFRES): ``{i: {"src", "sys_summ", "ref_summs", "scores"}}``, one output per item, no system
  names (an item's ``sys_name`` / ``system`` field is kept as its system where a file has one). ``src`` is a dialogue-act meaning representation (``inform(name=none,area=citycentre,near='X')``). Items
  that share a ``src`` share their references, so ``doc_id`` groups items by ``src`` (``mr0000``, ``mr0001``, ...
  in order of first appearance) and ``system`` is None. ``ref_summs`` repeat references many times (up to 3,810
  entries of which at most 10 are distinct): they are kept as they are, duplicates included.
* WMT (gu-en, kk-en, lt-en; de-en, fi-en, ru-en, zh-en from ``dlmeval data import``): ``{i: {"src", "ref", "better": {"sys_name", "sys", "scores": {}}, "worse": {...}}}``,
  WMT19 DARR pairs: two outputs for one source where humans judged ``better`` above ``worse``.

Text. SUM and D2T texts are tokenized in Penn-Treebank style (``team 's``, ``did n't``, `````` ... ''``, a space
before every punctuation mark; some hyphens split as ``0 - 0``) and "normal cased" as BARTScore put it: many system
outputs were lowercased by their systems and BARTScore only re-capitalized sentence starts (``Paul merson has
restarted his row with andros townsend``); that casing cannot be recovered and is left as it is. BARTScore itself
detokenized every text with the Moses detokenizer before scoring (``SUM/utils.py``: ``MosesDetokenizer('en')``).
Here, with ``detokenize=True`` (the default) the ``source``/``reference``/``references``/``candidate`` columns of
SUM and D2T are detokenized with ``detokenizer="treebank"`` (default): NLTK's ``TreebankWordDetokenizer``, the inverse
of the NLTK Treebank tokenizer that produced these texts (BARTScore's ``utils.tokenize`` is ``nltk.word_tokenize``);
unlike Moses it also rejoins ``n't`` and turns `````` / ``''`` into ``"``; or ``detokenizer="moses"``: the Moses
detokenizer as BARTScore used it (sacremoses, the Python port of Moses' ``detokenizer.perl``). D2T meaning representations are never detokenized. The exact pickle text is always available in the
``*_raw`` columns. WMT texts are untokenized natural text and are returned as they are.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.data import paths
from dlmeval.data.safepickle import safe_load_pickle
from dlmeval.errors import DataFormatError, InputError

BARTSCORE_ROOT = Path("meta-eval") / "bartscore"


@dataclass(frozen=True)
class BartScoreBenchmark:
    """One BARTScore meta-evaluation set.

    ``path`` is relative to the data directory; ``dimensions`` are the human judgment columns; ``n_rows`` is the
    number of rows :func:`load_bartscore` returns (judged outputs, or DARR pairs for WMT); ``reference_is_source``
    marks the factuality sets whose ``reference`` is a copy of the source.
    """

    name: str
    task: str  # "SUM" | "D2T" | "WMT"
    path: Path
    dimensions: tuple[str, ...]
    n_rows: int
    n_docs: int | None = None
    n_systems: int | None = None
    multi_reference: bool = False
    reference_is_source: bool = False
    lang_pair: str | None = None
    #: False for the sets the shared data directory does not ship (de-en, fi-en, ru-en, zh-en): they come from a
    #: BARTScore checkout through ``dlmeval data import`` and join the suite only once their file is there
    shipped: bool = True


def _b(name: str, task: str, dims: tuple[str, ...], n_rows: int, **kw: Any) -> BartScoreBenchmark:
    return BartScoreBenchmark(name, task, BARTSCORE_ROOT / task / name / "data.pkl", dims, n_rows, **kw)


_SUMMEVAL_DIMS = ("coherence", "consistency", "fluency", "relevance")
_NEWSROOM_DIMS = ("coherence", "fluency", "informativeness", "relevance")
_D2T_DIMS = ("informativeness", "naturalness", "quality")

BARTSCORE_BENCHMARKS: dict[str, BartScoreBenchmark] = {
    b.name: b
    for b in (
        _b("SummEval", "SUM", _SUMMEVAL_DIMS, 1600, n_docs=100, n_systems=16, multi_reference=True),
        _b("Newsroom", "SUM", _NEWSROOM_DIMS, 420, n_docs=60, n_systems=7),
        _b("REALSumm", "SUM", ("litepyramid_recall",), 2400, n_docs=100, n_systems=24),
        _b("Rank19", "SUM", ("fact",), 746, n_docs=373, n_systems=2, reference_is_source=True),
        _b("QAGS_CNN", "SUM", ("fact",), 235, n_docs=235, n_systems=1, reference_is_source=True),
        _b("QAGS_XSUM", "SUM", ("fact",), 239, n_docs=239, n_systems=1, reference_is_source=True),
        _b("BAGEL", "D2T", _D2T_DIMS, 404, n_docs=202, multi_reference=True),
        _b("SFHOT", "D2T", _D2T_DIMS, 875, n_docs=398, multi_reference=True),
        _b("SFRES", "D2T", _D2T_DIMS, 1181, n_docs=580, multi_reference=True),
        _b("gu-en", "WMT", (), 20110, lang_pair="gu-en"),
        _b("kk-en", "WMT", (), 9728, lang_pair="kk-en"),
        _b("lt-en", "WMT", (), 21862, lang_pair="lt-en"),
        # the other four WMT19 DARR to-English pairs of BARTScore's Table (the DiffScore paper's Table 1), in the
        # same data.pkl layout; n_rows 0: not checked (not shipped here)
        *(_b(lp, "WMT", (), 0, lang_pair=lp, shipped=False) for lp in ("de-en", "fi-en", "ru-en", "zh-en")),
    )
}

#: Column order of the SUM/D2T frames (followed by one float column per human dimension).
TEXT_COLUMNS = (
    "benchmark",
    "task",
    "item_id",
    "doc_id",
    "system",
    "source",
    "reference",
    "references",
    "candidate",
    "source_raw",
    "reference_raw",
    "references_raw",
    "candidate_raw",
)
#: Column order of the WMT frames.
WMT_COLUMNS = (
    "benchmark",
    "task",
    "lang_pair",
    "item_id",
    "pair_id",
    "src",
    "ref",
    "better",
    "worse",
    "better_system",
    "worse_system",
)


def resolve_bartscore_name(name: str) -> BartScoreBenchmark:
    """The benchmark for ``name``: exact, case-insensitive, or with its task prefix (``WMT/gu-en``)."""
    key = name.strip()
    if "/" in key:
        task, _, key = key.partition("/")
        b = resolve_bartscore_name(key)
        if b.task.lower() != task.strip().lower():
            raise InputError(f"BARTScore benchmark {name!r}: {b.name} is a {b.task} set, not {task}")
        return b
    for b in BARTSCORE_BENCHMARKS.values():
        if b.name.lower() == key.lower():
            return b
    raise InputError(
        f"unknown BARTScore benchmark {name!r}; choose one of: {', '.join(BARTSCORE_BENCHMARKS)}"
    )


def bartscore_path(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Where the pickle of benchmark ``name`` lives under the data directory."""
    return paths.data_dir(data_dir) / resolve_bartscore_name(name).path


#: ``detokenizer``: NLTK's Treebank detokenizer (the inverse of ``nltk.word_tokenize``, which made the pickles' text)
#: or the Moses detokenizer BARTScore scored with (``SUM/utils.py`` ``MosesDetokenizer('en')`` of the package
#: ``mosestokenizer``, which runs Moses' ``detokenizer.perl``; here its Python port ``sacremoses``)
DETOKENIZERS = ("treebank", "moses")


@functools.cache
def _detokenizer(name: str = "treebank") -> Callable[[list[str]], str]:
    if name == "treebank":
        from nltk.tokenize.treebank import TreebankWordDetokenizer

        return TreebankWordDetokenizer().detokenize
    if name == "moses":
        from sacremoses import MosesDetokenizer

        return MosesDetokenizer(lang="en").detokenize
    raise InputError(f"unknown detokenizer {name!r}; choose one of {', '.join(DETOKENIZERS)}")


def detokenize(text: str, detokenizer: str = "treebank") -> str:
    """Undo Penn-Treebank tokenization; casing is left alone. ``treebank`` (NLTK's TreebankWordDetokenizer):
    ``team 's 0-0 draw , did n't `` x ''`` -> ``team's 0-0 draw, didn't "x"``; ``moses`` (BARTScore's
    ``MosesDetokenizer('en')``, through sacremoses): ``team's 0-0 draw, did n't `` x ''`` (Moses knows neither
    ``n't`` nor the Treebank quotes)."""
    return _detokenizer(detokenizer)(text.split())


@functools.lru_cache(maxsize=16)
def _load_raw(path: str, mtime_ns: int, size: int) -> Any:
    # keyed on mtime and size so that a replaced file is re-read
    return safe_load_pickle(path)


def _fail(path: Path, where: str, msg: str) -> DataFormatError:
    return DataFormatError(f"{path}: {where}: {msg} (expected the neulab/BARTScore data.pkl layout)")


def _get(d: Any, key: str, path: Path, where: str, typ: type | tuple[type, ...]) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise _fail(path, where, f"missing field {key!r}")
    v = d[key]
    if not isinstance(v, typ):
        raise _fail(path, where, f"field {key!r} is {type(v).__name__}, expected {typ}")
    return v


def _scores(d: dict, dims: tuple[str, ...], path: Path, where: str) -> list[float]:
    scores = _get(d, "scores", path, where, dict)
    out = []
    for dim in dims:
        v = scores.get(dim)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _fail(path, where, f"human score {dim!r} is missing or not a number ({v!r})")
        if not math.isfinite(v):  # a NaN would drop the item from one correlation and not from another
            raise _fail(path, where, f"human score {dim!r} is {v!r}, not a finite number")
        out.append(float(v))
    return out


def _sum_rows(b: BartScoreBenchmark, data: Mapping, path: Path) -> list[dict[str, Any]]:
    rows = []
    for doc_key, doc in data.items():
        where = f"doc {doc_key!r}"
        src = _get(doc, "src", path, where, str)
        ref = _get(doc, "ref_summ", path, where, str)
        refs = tuple(_get(doc, "ref_summs", path, where, list)) if b.multi_reference else (ref,)
        if not refs or not all(isinstance(r, str) for r in refs):
            raise _fail(path, where, "ref_summs must be a non-empty list of strings")
        systems = _get(doc, "sys_summs", path, where, dict)
        for sys_key, out in systems.items():
            w = f"{where} system {sys_key!r}"
            cand = _get(out, "sys_summ", path, w, str)
            rows.append(
                {
                    "doc_id": str(doc_key),
                    "system": str(sys_key),
                    "source_raw": src,
                    "reference_raw": ref,
                    "references_raw": refs,
                    "candidate_raw": cand,
                    "_scores": _scores(out, b.dimensions, path, w),
                }
            )
    return rows


def _d2t_rows(b: BartScoreBenchmark, data: Mapping, path: Path) -> list[dict[str, Any]]:
    rows, groups = [], {}
    for key, item in data.items():
        where = f"item {key!r}"
        src = _get(item, "src", path, where, str)
        refs = tuple(_get(item, "ref_summs", path, where, list))
        if not refs or not all(isinstance(r, str) for r in refs):
            raise _fail(path, where, "ref_summs must be a non-empty list of strings")
        doc = groups.setdefault(src, f"mr{len(groups):04d}")
        system = item.get("sys_name", item.get("system")) if isinstance(item, dict) else None
        rows.append(
            {
                "doc_id": doc,
                "system": None if system is None else str(system),  # BARTScore's D2T files have none
                "_key": str(key),
                "source_raw": src,
                "reference_raw": refs[0],
                "references_raw": refs,
                "candidate_raw": _get(item, "sys_summ", path, where, str),
                "_scores": _scores(item, b.dimensions, path, where),
            }
        )
    return rows


def _wmt_frame(b: BartScoreBenchmark, data: Mapping, path: Path) -> pd.DataFrame:
    rows = []
    for key, pair in data.items():
        where = f"pair {key!r}"
        better = _get(pair, "better", path, where, dict)
        worse = _get(pair, "worse", path, where, dict)
        rows.append(
            (
                b.name,
                "WMT",
                b.lang_pair,
                f"{b.name}/{key}",
                int(key) if isinstance(key, int) else str(key),
                _get(pair, "src", path, where, str),
                _get(pair, "ref", path, where, str),
                _get(better, "sys", path, where + " better", str),
                _get(worse, "sys", path, where + " worse", str),
                _get(better, "sys_name", path, where + " better", str),
                _get(worse, "sys_name", path, where + " worse", str),
            )
        )
    return pd.DataFrame.from_records(rows, columns=list(WMT_COLUMNS))


def _text_frame(
    b: BartScoreBenchmark, data: Mapping, path: Path, detok: bool, detokenizer: str
) -> pd.DataFrame:
    rows = _sum_rows(b, data, path) if b.task == "SUM" else _d2t_rows(b, data, path)
    memo: dict[str, str] = {}

    def dt(t: str) -> str:
        # the same article / reference recurs for every system: detokenize each distinct text once
        if t not in memo:
            memo[t] = detokenize(t, detokenizer)
        return memo[t]

    records = []
    for r in rows:
        if b.task == "SUM":
            item_id = f"{b.name}/{r['doc_id']}/{r['system']}"
        else:
            item_id = f"{b.name}/{r['_key']}"
        if detok:
            source = dt(r["source_raw"]) if b.task == "SUM" else r["source_raw"]
            reference, references = dt(r["reference_raw"]), tuple(dt(t) for t in r["references_raw"])
            candidate = dt(r["candidate_raw"])
        else:
            source, reference = r["source_raw"], r["reference_raw"]
            references, candidate = r["references_raw"], r["candidate_raw"]
        records.append(
            (b.name, b.task, item_id, r["doc_id"], r["system"], source, reference, references, candidate)
            + (r["source_raw"], r["reference_raw"], r["references_raw"], r["candidate_raw"])
            + tuple(r["_scores"])
        )
    return pd.DataFrame.from_records(records, columns=list(TEXT_COLUMNS) + list(b.dimensions))


@functools.lru_cache(maxsize=32)
def _frame(
    name: str, path: str, mtime_ns: int, size: int, detok: bool, detokenizer: str = "treebank"
) -> pd.DataFrame:
    b = BARTSCORE_BENCHMARKS[name]
    data = _load_raw(path, mtime_ns, size)
    p = Path(path)
    if not isinstance(data, dict) or not data:
        raise DataFormatError(f"{p}: expected a non-empty dict at the top level, found {type(data).__name__}")
    if b.task == "WMT":
        return _wmt_frame(b, data, p)
    return _text_frame(b, data, p, detok, detokenizer)


def load_bartscore(
    name: str,
    data_dir: str | os.PathLike | None = None,
    *,
    detokenize: bool = True,
    detokenizer: str = "treebank",
) -> pd.DataFrame:
    """One BARTScore meta-evaluation set as a DataFrame, in the pickle's order.

    SUM / D2T: one row per judged output, columns ``benchmark, task, item_id, doc_id, system, source, reference,
    references (tuple), candidate``, the same texts exactly as in the pickle in ``source_raw, reference_raw,
    references_raw, candidate_raw``, then one float column per human dimension (``BARTSCORE_BENCHMARKS[name]
    .dimensions``). ``detokenize`` chooses whether the first group is detokenized and ``detokenizer`` with which
    (:data:`DETOKENIZERS`; see the module docstring).
    ``item_id`` is ``"{benchmark}/{doc_id}/{system}"`` (SUM) or ``"{benchmark}/{pickle key}"`` (D2T).
    ``references`` holds SummEval's 11 references, D2T's reference list (duplicates kept), or ``(reference,)``
    for the single-reference sets; ``reference`` is ``ref_summ`` (SUM) or the first reference (D2T).

    WMT: one row per DARR pair, columns ``benchmark, task, lang_pair, item_id, pair_id, src, ref, better, worse,
    better_system, worse_system`` (``detokenize`` does not apply).

    Parsed files are cached in memory; every call returns a fresh copy of the frame.
    """
    b = resolve_bartscore_name(name)
    if detokenizer not in DETOKENIZERS:
        raise InputError(f"unknown detokenizer {detokenizer!r}; choose one of {', '.join(DETOKENIZERS)}")
    p = paths.data_dir(data_dir) / b.path
    if p.is_dir():
        raise InputError(
            f"BARTScore file for {b.name}: {p} is a directory, not a file; put neulab/BARTScore's "
            f"{b.task}/{b.name}/data.pkl file there"
        )
    if not p.is_file():
        raise InputError(
            f"BARTScore file for {b.name} not found at {p}; run `dlmeval data import BARTSCORE_CHECKOUT` (a "
            f"checkout with {b.task}/{b.name}/data.pkl) or point DLMEVAL_DATA / --data-dir at the data directory"
        )
    st = p.stat()
    return _frame(b.name, str(p.resolve()), st.st_mtime_ns, st.st_size, bool(detokenize), detokenizer).copy()


def load_all_bartscore(
    data_dir: str | os.PathLike | None = None, *, task: str | None = None, detokenize: bool = True
) -> dict[str, pd.DataFrame]:
    """Every benchmark (or every benchmark of ``task``: SUM, D2T or WMT), by name."""
    if task is not None and task.upper() not in {"SUM", "D2T", "WMT"}:
        raise InputError(f"unknown BARTScore task {task!r}; choose SUM, D2T or WMT")
    return {
        n: load_bartscore(n, data_dir, detokenize=detokenize)
        for n, b in BARTSCORE_BENCHMARKS.items()
        if task is None or b.task == task.upper()
    }
