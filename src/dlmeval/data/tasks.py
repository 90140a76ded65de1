"""Downstream task sets and reference texts (``tasks/`` and ``reference-text/`` of the data directory).

Each loader returns a list of frozen dataclass items in file order, each with a stable string ``item_id`` (the seed
for :func:`dlmeval.seeding.derive_seed`). Every loader takes ``data_dir`` (default: :func:`dlmeval.data.paths.data_dir`)
and ``path`` (one file to read instead of the standard one). Malformed files raise DataFormatError naming file and
line.

TriviaQA. ``triviaqa_test.tsv`` is "question TAB python-list of aliases", but it was written by a CSV writer: 1,801
answer fields and 748 question fields are wrapped in double quotes with ``""`` for each quote inside. Split on the
tab and ``ast.literal_eval``-ed naively, 15 lines raise and 1,786 lines silently evaluate to a *string* (adjacent
string literals), not a list. The loader therefore parses each line as a tab-separated CSV record first, and every
line then evaluates to a list of strings. Some questions and aliases carry a second, inner layer of the same quoting
(``"Who said, ""I want to be alone""."``); where a value is exactly one well-formed quoted CSV field, that layer is
removed too (``Who said, "I want to be alone".``).
"""

from __future__ import annotations

import ast
import csv
import os
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from dlmeval.data import paths
from dlmeval.data.formats import iter_jsonl, iter_lines, iter_tsv
from dlmeval.errors import DataFormatError

GSM8K_FILE = Path("tasks") / "gsm8k_test.jsonl"
ARC_CHALLENGE_FILE = Path("tasks") / "arc_challenge_test.jsonl"
TRIVIAQA_FILE = Path("tasks") / "triviaqa_test.tsv"
HUMANEVAL_FILE = Path("tasks") / "HumanEval.jsonl.gz"
WEBTEXT_FILE = Path("reference-text") / "webtext_test.jsonl"
LM1B_FILE = Path("reference-text") / "lm1b_heldout-00000.txt"


def _file(data_dir: str | os.PathLike | None, path: str | os.PathLike | None, rel: Path) -> Path:
    return Path(path) if path is not None else paths.data_dir(data_dir) / rel


def _str_field(obj: dict, key: str, path: Path, n: int) -> str:
    v = obj.get(key)
    if not isinstance(v, str):
        what = "missing" if key not in obj else f"a {type(v).__name__}, not a string"
        raise DataFormatError(f"{path}:{n}: field {key!r} is {what}")
    return v


# ---------------------------------------------------------------------------------------------------- GSM8K


@dataclass(frozen=True, slots=True)
class GSM8KItem:
    item_id: str  # "gsm8k/<0-based index>"
    question: str
    answer: str  # the full worked solution, ending in "#### <number>"
    gold: str  # the number after "####", normalized by normalize_number


_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")


def normalize_number(text: str) -> str | None:
    """A numeric answer in canonical form, or None if ``text`` is not one number.

    Drops surrounding whitespace, a leading ``$``, thousands separators and a trailing ``.``; ``"1,000"`` ->
    ``"1000"``, ``"$5.50"`` -> ``"5.5"``, ``"18.00"`` -> ``"18"``, ``"-3"`` -> ``"-3"``.
    """
    s = text.strip().replace(",", "").replace("$", "").rstrip(".").strip()
    if not _NUMBER.fullmatch(s):
        return None
    try:
        d = Decimal(s)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        return None
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def load_gsm8k(
    data_dir: str | os.PathLike | None = None, *, path: str | os.PathLike | None = None
) -> list[GSM8KItem]:
    """GSM8K test (1,319 items): ``{question, answer}`` lines; gold = the normalized number after ``####``."""
    p = _file(data_dir, path, GSM8K_FILE)
    items = []
    for n, obj in iter_jsonl(p):
        question, answer = _str_field(obj, "question", p, n), _str_field(obj, "answer", p, n)
        if "####" not in answer:
            raise DataFormatError(f"{p}:{n}: answer has no '#### <number>' final line")
        gold = normalize_number(answer.rsplit("####", 1)[1])
        if gold is None:
            raise DataFormatError(
                f"{p}:{n}: the text after '####' is not a number: {answer.rsplit('####', 1)[1]!r}"
            )
        items.append(GSM8KItem(f"gsm8k/{len(items)}", question, answer, gold))
    return items


# ------------------------------------------------------------------------------------------------ ARC-Challenge


@dataclass(frozen=True, slots=True)
class ARCItem:
    item_id: str  # "arc_challenge/<0-based index>"
    query: str  # "Question: ..." as in the file
    choices: tuple[str, ...]  # four answer options
    gold: int  # index of the correct choice


def load_arc_challenge(
    data_dir: str | os.PathLike | None = None, *, path: str | os.PathLike | None = None
) -> list[ARCItem]:
    """ARC-Challenge test (1,172 items): ``{query, choices[4], gold}`` lines (llm-foundry's local copy)."""
    p = _file(data_dir, path, ARC_CHALLENGE_FILE)
    items = []
    for n, obj in iter_jsonl(p):
        query = _str_field(obj, "query", p, n)
        choices = obj.get("choices")
        if not isinstance(choices, list) or len(choices) != 4 or not all(isinstance(c, str) for c in choices):
            raise DataFormatError(f"{p}:{n}: 'choices' must be a list of 4 strings, found {choices!r}")
        gold = obj.get("gold")
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
            raise DataFormatError(f"{p}:{n}: 'gold' must be an index 0..{len(choices) - 1}, found {gold!r}")
        items.append(ARCItem(f"arc_challenge/{len(items)}", query, tuple(choices), gold))
    return items


# ----------------------------------------------------------------------------------------------------- TriviaQA


@dataclass(frozen=True, slots=True)
class TriviaQAItem:
    item_id: str  # "triviaqa/<0-based index>"
    question: str
    answers: tuple[str, ...]  # accepted aliases, in file order


def unquote_csv_field(text: str) -> str:
    """``text`` without one layer of CSV quoting if it is exactly one well-formed quoted field
    (``"a ""b"" c"`` -> ``a "b" c``); any other text unchanged."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text
    try:
        rows = list(csv.reader([text], delimiter="\t", quotechar='"', doublequote=True, strict=True))
    except csv.Error:
        return text
    if len(rows) != 1 or len(rows[0]) != 1:
        return text
    return rows[0][0]


def parse_answer_list(text: str, where: str) -> tuple[str, ...]:
    """A python-literal list of strings (``['a', "b's"]``) as a tuple; DataFormatError (prefixed by ``where``)
    for anything else."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise DataFormatError(
            f"{where}: the answers are not a python list literal ({type(e).__name__})"
        ) from None
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise DataFormatError(
            f"{where}: the answers must be a non-empty list of strings, found {type(value).__name__}"
        )
    return tuple(value)


def load_triviaqa(
    data_dir: str | os.PathLike | None = None, *, path: str | os.PathLike | None = None
) -> list[TriviaQAItem]:
    """TriviaQA (DPR trivia-test, 11,313 items): question TAB python-list of aliases, CSV-quoted (module docstring)."""
    p = _file(data_dir, path, TRIVIAQA_FILE)
    items = []
    for n, (question, answers) in iter_tsv(p, n_fields=2, quoting=True):
        aliases = tuple(unquote_csv_field(a) for a in parse_answer_list(answers, f"{p}:{n}"))
        q = unquote_csv_field(question)
        if not q.strip():
            raise DataFormatError(f"{p}:{n}: empty question")
        items.append(TriviaQAItem(f"triviaqa/{len(items)}", q, aliases))
    return items


# ---------------------------------------------------------------------------------------------------- HumanEval


@dataclass(frozen=True, slots=True)
class HumanEvalItem:
    item_id: str  # the task_id, "HumanEval/<k>"
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str


def load_humaneval(
    data_dir: str | os.PathLike | None = None, *, path: str | os.PathLike | None = None
) -> list[HumanEvalItem]:
    """HumanEval (164 problems) from ``HumanEval.jsonl.gz``; ``item_id`` is the task_id."""
    p = _file(data_dir, path, HUMANEVAL_FILE)
    items, seen = [], set()
    for n, obj in iter_jsonl(p):
        fields = [
            _str_field(obj, k, p, n)
            for k in ("task_id", "prompt", "entry_point", "canonical_solution", "test")
        ]
        if fields[0] in seen:
            raise DataFormatError(f"{p}:{n}: duplicate task_id {fields[0]!r}")
        seen.add(fields[0])
        items.append(HumanEvalItem(*fields))
    return items


# ---------------------------------------------------------------------------------------------- reference texts


@dataclass(frozen=True, slots=True)
class ReferenceText:
    item_id: str  # "webtext/<index>" or "lm1b/<index>"
    text: str


def load_webtext_reference(
    data_dir: str | os.PathLike | None = None, *, path: str | os.PathLike | None = None
) -> list[ReferenceText]:
    """Human web text (4,723 documents of <= 61 words, ``{text}`` lines): the MAUVE reference stand-in."""
    p = _file(data_dir, path, WEBTEXT_FILE)
    out = []
    for n, obj in iter_jsonl(p):
        text = _str_field(obj, "text", p, n)
        if not text.strip():
            raise DataFormatError(f"{p}:{n}: empty text")
        out.append(ReferenceText(f"webtext/{len(out)}", text))
    return out


def load_lm1b_reference(
    data_dir: str | os.PathLike | None = None, *, path: str | os.PathLike | None = None
) -> list[ReferenceText]:
    """LM1B held-out shard 0 (6,075 sentences): one tokenized sentence per line, text kept as is."""
    p = _file(data_dir, path, LM1B_FILE)
    return [ReferenceText(f"lm1b/{i}", line) for i, (_, line) in enumerate(iter_lines(p))]
