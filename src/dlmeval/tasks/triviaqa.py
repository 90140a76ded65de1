"""TriviaQA: short factual answers, judged by alias matching after SQuAD-style normalisation."""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Any

from dlmeval.data.tasks import TriviaQAItem, load_triviaqa
from dlmeval.tasks.base import Prompt, Task, fill

# The robustness paper, App. D (the line breaks there are the PDF's; the user message is one paragraph).
TRIVIAQA_TEMPLATE = "Answer the following question concisely in a few words.\n\nQuestion: {question}\nAnswer:"

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"\u2018", "\u2019", "\u201c", "\u201d", "\u00b4", "`"}


def normalize_answer(text: str) -> str:
    """SQuAD/TriviaQA normalisation: lower case, underscores to spaces, punctuation removed (ASCII and Unicode
    punctuation categories), articles a/an/the removed, whitespace collapsed."""
    s = unicodedata.normalize("NFKC", text).lower().replace("_", " ")
    s = "".join(ch for ch in s if ch not in _PUNCT and not unicodedata.category(ch).startswith("P"))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def alias_match(prediction: str, aliases: tuple[str, ...] | list[str], *, whole_word: bool = True) -> bool:
    """True if a normalised alias occurs in the normalised prediction: as a whole-word substring (the default)
    or, with ``whole_word=False``, as any substring (the paper's matching, App. J).

    Whole words keep a short alias such as ``"9"`` from being found inside ``"1990"`` (aliases that normalise to
    nothing are skipped either way).
    """
    norm = normalize_answer(prediction)
    pred = f" {norm} " if whole_word else norm
    for a in aliases:
        na = normalize_answer(a)
        if na and (f" {na} " if whole_word else na) in pred:
            return True
    return False


class TriviaQA(Task):
    name = "triviaqa"
    template = TRIVIAQA_TEMPLATE
    data_kind = "triviaqa"
    chance = 0.0
    max_new_tokens = 128
    stop = ("\nQuestion:",)
    #: ``substring``: an alias anywhere in the answer (the paper, App. J); ``word``: on word boundaries only
    options = {"match": ("substring", "word")}
    match = "substring"

    def load(self, data_dir=None, *, path=None) -> list[TriviaQAItem]:
        return load_triviaqa(data_dir, path=path)

    def prompt(self, item: TriviaQAItem) -> Prompt:
        return fill(self.template, question=item.question)

    def extract(self, output: str, item: Any = None) -> str:
        return output.strip()

    def gold(self, item: TriviaQAItem) -> list[str]:
        return list(item.answers)

    def is_correct(self, item: TriviaQAItem, output: str) -> bool:
        return alias_match(output, item.answers, whole_word=self.match == "word")

    def attack_target(self, item: TriviaQAItem, *, chat: bool) -> str:
        return self._spaced(str(item.answers[0]), chat)  # the first alias


TRIVIAQA = TriviaQA()
