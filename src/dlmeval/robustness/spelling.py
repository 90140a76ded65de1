"""The external spelling signal of IPM-EditDist / IPM-Hybrid (the paper's Sec. 6.6: "an external spell-checker
flags out-of-vocabulary tokens (edit distance <= 2)"), from pyspellchecker's English dictionary.

pyspellchecker (PyPI ``pyspellchecker``, MIT) ships word-frequency dictionaries built from OpenSubtitles and
Wiktionary and implements Peter Norvig's edit model; :func:`spelling_flagger` flags a word when the dictionary
does not know it and some dictionary word lies within ``max_distance`` edits, which is pyspellchecker's
``unknown`` + ``candidates`` rule, through :class:`~dlmeval.robustness.ipm.EditDistanceFlagger` (same word
splitting and ``min_chars`` rule as the vocabulary-based flagger).
"""

from __future__ import annotations

import functools

from dlmeval.errors import InputError

FLAGGERS = ("pyspellchecker", "vocabulary")


@functools.lru_cache(maxsize=4)
def dictionary_words(language: str = "en") -> frozenset[str]:
    """The alphabetic words of pyspellchecker's dictionary for ``language`` (lower case)."""
    try:
        from spellchecker import SpellChecker
    except ImportError as e:
        raise InputError(
            "IPM's spelling flagger needs pyspellchecker (pip install pyspellchecker), or flagger = 'vocabulary'"
        ) from e
    sp = SpellChecker(language=language, distance=1)
    return frozenset(w.lower() for w in sp.word_frequency.keys() if w.isalpha())


def dictionary_version() -> str:
    from importlib.metadata import version

    return f"pyspellchecker-{version('pyspellchecker')}"


def spelling_flagger(*, max_distance: int = 2, language: str = "en"):
    """An :class:`~dlmeval.robustness.ipm.EditDistanceFlagger` over pyspellchecker's dictionary."""
    from dlmeval.robustness.ipm import EditDistanceFlagger

    return EditDistanceFlagger(dictionary_words(language), max_distance=max_distance, use_morphy=False)


__all__ = ["FLAGGERS", "dictionary_version", "dictionary_words", "spelling_flagger"]
