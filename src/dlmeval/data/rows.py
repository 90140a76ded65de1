"""Task items and reference texts from dataset rows (:mod:`dlmeval.data.hub`): the layouts of the 🤗 hub
datasets and of the shipped files, converted into the items of :mod:`dlmeval.data.tasks`, plus HellaSwag and
BIG-Bench Hard (no shipped stand-in: a source is required).

:class:`DataSource` is what a spec names (``source``, ``split``, ``config``; ``source = None``: the shipped
stand-in). :data:`HUB` lists the hub dataset each kind was written against and its default split (the split that
has labels). Item ids are positional as for the shipped files (``gsm8k/17``; HumanEval: the task id), so the run
configuration carries the rows' provenance (:func:`source_identity`) and another dataset never resumes a run.

Layouts accepted per kind (the first field set found wins):

``gsm8k``        ``question``, ``answer`` (ending ``#### N``)  (openai/gsm8k, the shipped file)
``humaneval``    ``task_id``, ``prompt``, ``entry_point``, ``canonical_solution``, ``test``
``arc_challenge`` ``question``, ``choices = {text, label}``, ``answerKey`` (allenai/ai2_arc), or ``query``,
                 ``choices[...]``, ``gold`` (llm-foundry, the shipped file)
``triviaqa``     ``question``, ``answer = {aliases, value}`` (mandarjoshi/trivia_qa), or ``question``, ``answers[...]``
``hellaswag``    ``ctx_a``, ``ctx_b``, ``activity_label``, ``endings[4]``, ``label`` (Rowan/hellaswag)
``bbh``          ``input``, ``target`` (lukaemon/bbh, one config per subtask)
corpora          one text field (``text`` by default)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dlmeval.data.tasks import (
    ARCItem,
    GSM8KItem,
    HumanEvalItem,
    ReferenceText,
    TriviaQAItem,
    normalize_number,
)
from dlmeval.errors import DataFormatError, InputError


@dataclass(frozen=True)
class DataSource:
    """Where a task's or corpus's rows come from: ``source`` (a hub id, a ``save_to_disk`` directory, a parquet /
    JSONL / CSV file; None = the shipped stand-in), ``split`` (None: the kind's default, :data:`HUB`),
    ``config`` (the hub config name; None: the kind's default when the source is the kind's hub dataset)."""

    source: str | None = None
    split: str | None = None
    config: str | None = None

    @property
    def shipped(self) -> bool:
        return self.source is None


#: kind -> (the hub dataset written against, its default config, the default split: the one with labels)
HUB: dict[str, tuple[str, str | None, str]] = {
    "gsm8k": ("openai/gsm8k", "main", "test"),
    "humaneval": ("openai/openai_humaneval", None, "test"),
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", "test"),
    "triviaqa": ("mandarjoshi/trivia_qa", "rc.nocontext", "validation"),
    "hellaswag": ("Rowan/hellaswag", None, "validation"),
    "bbh": ("lukaemon/bbh", "boolean_expressions", "test"),
    "openwebtext": ("Skylion007/openwebtext", None, "train"),
    "lm1b": ("dvruette/lm1b", None, "test"),
}


def read_source(
    kind: str,
    src: DataSource,
    *,
    allow_download: bool = False,
    what: str = "",
    columns: Sequence[str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    sample_seed: int = 0,
):
    """The :class:`~dlmeval.data.hub.DatasetRows` of ``src`` (not a shipped one) for ``kind``; ``sample`` /
    ``sample_seed``: a seeded slice by row index (:func:`dlmeval.data.hub.sample_indices`)."""
    from dlmeval.data.hub import load_rows

    if src.shipped:
        raise InputError(f"{what or kind}: no source given")
    hub_id, config, split = HUB.get(kind, (None, None, None))
    name = src.config
    if name is None and src.source in (hub_id, f"hf:{hub_id}"):
        name = config
    return load_rows(
        src.source,
        split=src.split,
        default_split=split,
        name=name,
        columns=columns,
        limit=limit,
        sample=sample,
        sample_seed=sample_seed,
        allow_download=allow_download,
        what=what or kind,
    )


# ------------------------------------------------------------------------------------------------ helpers
def _s(row: dict, key: str, where: str) -> str:
    v = row.get(key)
    if not isinstance(v, str):
        what = "missing" if key not in row else f"a {type(v).__name__}, not a string"
        raise DataFormatError(f"{where}: field {key!r} is {what}")
    return v


def _where(label: str, i: int) -> str:
    return f"{label} row {i}"


# ------------------------------------------------------------------------------------------------ tasks
def gsm8k_items(rows: Sequence[dict], label: str = "gsm8k", prefix: str = "gsm8k") -> list[GSM8KItem]:
    out = []
    for i, r in enumerate(rows):
        w = _where(label, i)
        q, a = _s(r, "question", w), _s(r, "answer", w)
        if "####" not in a:
            raise DataFormatError(f"{w}: answer has no '#### <number>' final line")
        gold = normalize_number(a.rsplit("####", 1)[1])
        if gold is None:
            raise DataFormatError(f"{w}: the text after '####' is not a number")
        out.append(GSM8KItem(f"{prefix}/{i}", q, a, gold))
    return out


def humaneval_items(rows: Sequence[dict], label: str = "humaneval") -> list[HumanEvalItem]:
    out, seen = [], set()
    for i, r in enumerate(rows):
        w = _where(label, i)
        f = [_s(r, k, w) for k in ("task_id", "prompt", "entry_point", "canonical_solution", "test")]
        if f[0] in seen:
            raise DataFormatError(f"{w}: duplicate task_id {f[0]!r}")
        seen.add(f[0])
        out.append(HumanEvalItem(*f))
    return out


def arc_items(rows: Sequence[dict], label: str = "arc_challenge") -> list[ARCItem]:
    out = []
    for i, r in enumerate(rows):
        w = _where(label, i)
        if "query" in r:  # llm-foundry's layout (the shipped file)
            query, choices, gold = _s(r, "query", w), r.get("choices"), r.get("gold")
        else:  # allenai/ai2_arc
            query = "Question: " + _s(r, "question", w)
            ch = r.get("choices")
            if not isinstance(ch, dict) or not isinstance(ch.get("text"), list):
                raise DataFormatError(f"{w}: 'choices' must be {{text: [...], label: [...]}}")
            labels, key = ch.get("label"), r.get("answerKey")
            if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
                raise DataFormatError(
                    f"{w}: 'choices.label' must be a list of strings (A, B, ... or 1, 2, ...)"
                )
            if not isinstance(key, str):
                raise DataFormatError(
                    f"{w}: field 'answerKey' is {type(key).__name__}, expected a string label"
                )
            choices = ch["text"]
            gold = labels.index(key) if key in labels else None
        if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise DataFormatError(f"{w}: 'choices' must be a list of at least 2 strings")
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
            raise DataFormatError(f"{w}: the gold answer is not one of the {len(choices)} choices")
        out.append(ARCItem(f"arc_challenge/{i}", query, tuple(choices), gold))
    return out


def triviaqa_items(rows: Sequence[dict], label: str = "triviaqa") -> list[TriviaQAItem]:
    out = []
    for i, r in enumerate(rows):
        w = _where(label, i)
        q = _s(r, "question", w)
        a = r.get("answer")
        if isinstance(a, dict):  # mandarjoshi/trivia_qa: aliases (+ the value itself)
            aliases = list(
                dict.fromkeys([*(a.get("aliases") or []), *([a["value"]] if a.get("value") else [])])
            )
        else:
            aliases = r.get("answers")
        if not isinstance(aliases, list) or not aliases or not all(isinstance(x, str) for x in aliases):
            raise DataFormatError(
                f"{w}: no answer aliases ('answer.aliases' or 'answers' as a list of strings)"
            )
        out.append(TriviaQAItem(f"triviaqa/{i}", q, tuple(aliases)))
    return out


@dataclass(frozen=True, slots=True)
class HellaSwagItem:
    item_id: str  # "hellaswag/<index>"
    query: str  # lm-eval's preprocessed "activity_label: ctx"
    choices: tuple[str, ...]  # the four preprocessed endings
    gold: int


def hellaswag_preprocess(text: str) -> str:
    """lm-evaluation-harness's ``hellaswag`` preprocessing: strip, `` [title]`` -> ``. ``, drop ``[...]`` tags,
    collapse double spaces."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag_items(rows: Sequence[dict], label: str = "hellaswag") -> list[HellaSwagItem]:
    out = []
    for i, r in enumerate(rows):
        w = _where(label, i)
        ctx = _s(r, "ctx_a", w) + " " + _s(r, "ctx_b", w).capitalize()
        query = hellaswag_preprocess(_s(r, "activity_label", w) + ": " + ctx)
        endings = r.get("endings")
        if not isinstance(endings, list) or len(endings) < 2 or not all(isinstance(e, str) for e in endings):
            raise DataFormatError(f"{w}: 'endings' must be a list of strings")
        label = r.get("label")
        # an index: an integer, or the hub's string of digits ("2"); a float or a bool would be cut to one
        if isinstance(label, bool) or not (
            isinstance(label, int)
            or (isinstance(label, str) and label.strip().isascii() and label.strip().isdigit())
        ):
            raise DataFormatError(
                f"{w}: field 'label' is {type(label).__name__} ({label!r}), not an index (a test split has none)"
            )
        gold = int(label)
        if not 0 <= gold < len(endings):
            raise DataFormatError(f"{w}: 'label' {gold} is not one of the {len(endings)} endings")
        out.append(
            HellaSwagItem(f"hellaswag/{i}", query, tuple(hellaswag_preprocess(e) for e in endings), gold)
        )
    return out


@dataclass(frozen=True, slots=True)
class BBHItem:
    item_id: str  # "bbh/<subtask>/<index>"
    subtask: str
    input: str
    target: str
    choices: tuple[str, ...]  # the subtask's distinct targets, sorted (the log-likelihood reading)
    gold: int


def bbh_items(rows: Sequence[dict], subtask: str = "bbh", label: str = "bbh") -> list[BBHItem]:
    """BBH rows as log-likelihood items: the choices of an item are the distinct targets of its subtask (sorted),
    so a closed-answer subtask (``(A)``..., ``True``/``False``, ``valid``/``invalid``) is multiple choice; the
    reading is dlmeval's (the Care paper scores BBH "via log-likelihood" without saying over which options)."""
    parsed = []
    for i, r in enumerate(rows):
        w = _where(label, i)
        parsed.append((_s(r, "input", w), _s(r, "target", w).strip()))
    choices = tuple(sorted({t for _, t in parsed}))
    if len(choices) < 2:
        raise DataFormatError(f"{label}: every row has the same target: nothing to choose between")
    return [
        BBHItem(f"bbh/{subtask}/{i}", subtask, q, t, choices, choices.index(t))
        for i, (q, t) in enumerate(parsed)
    ]


def reference_texts(
    rows: Sequence[dict], prefix: str, field: str = "text", label: str = ""
) -> list[ReferenceText]:
    """Corpus rows as texts (``prefix/<index>``); empty texts are skipped (their index is kept)."""
    out = []
    for i, r in enumerate(rows):
        t = _s(r, field, _where(label or prefix, i))
        if t.strip():
            out.append(ReferenceText(f"{prefix}/{i}", t))
    return out


CONVERTERS: dict[str, Any] = {
    "gsm8k": gsm8k_items,
    "humaneval": humaneval_items,
    "arc_challenge": arc_items,
    "triviaqa": triviaqa_items,
    "hellaswag": hellaswag_items,
}


def source_identity(kind: str, src: DataSource, data_dir=None, rows=None) -> dict[str, Any]:
    """What a run configuration records of a task's or corpus's data: the rows' provenance for a source
    (:class:`~dlmeval.data.hub.DatasetRows`), the shipped file and its digest otherwise."""
    if not src.shipped:
        return dict(rows.provenance) if rows is not None else {"source": src.source}
    from dlmeval.data import tasks as T
    from dlmeval.data.paths import data_dir as resolve
    from dlmeval.data.paths import file_digest

    rel = SHIPPED.get(kind)
    if rel is None:  # a task that loads its own file (Task.load): its items are its identity
        return {"kind": "shipped", "task": kind}
    p = resolve(data_dir) / getattr(T, rel)
    return {
        "kind": "shipped",
        "path": str(getattr(T, rel)),
        "file_digest": file_digest(p) if p.is_file() else None,
    }


#: kind -> the shipped stand-in's file (a constant of dlmeval.data.tasks)
SHIPPED = {
    "gsm8k": "GSM8K_FILE",
    "humaneval": "HUMANEVAL_FILE",
    "arc_challenge": "ARC_CHALLENGE_FILE",
    "triviaqa": "TRIVIAQA_FILE",
    "webtext": "WEBTEXT_FILE",
    "lm1b": "LM1B_FILE",
}

__all__ = [
    "BBHItem",
    "CONVERTERS",
    "DataSource",
    "HUB",
    "HellaSwagItem",
    "SHIPPED",
    "arc_items",
    "bbh_items",
    "gsm8k_items",
    "hellaswag_items",
    "hellaswag_preprocess",
    "humaneval_items",
    "read_source",
    "reference_texts",
    "source_identity",
    "triviaqa_items",
]
