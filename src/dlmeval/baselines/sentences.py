"""Sentence splitting for the baselines whose authors score sentence by sentence (UniEval, AlignScore, QuestEval):
nltk's ``sent_tokenize`` (their choice) when its ``punkt_tab`` data is installed, else Punkt with its untrained
default parameters (no learned abbreviations; nltk ships no data offline). :func:`splitter_name` says which, for
run configurations."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def splitter_name() -> str:
    import nltk

    try:
        nltk.sent_tokenize("A. B.")
        return "nltk.sent_tokenize"
    except LookupError:
        return "punkt-untrained"


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (``[text]`` when it has none, as the authors' code falls back to)."""
    import nltk

    if splitter_name() == "nltk.sent_tokenize":
        sents = nltk.sent_tokenize(text)
    else:
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        sents = PunktSentenceTokenizer().tokenize(text)
    return sents or [text]
