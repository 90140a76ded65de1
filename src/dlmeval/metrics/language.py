"""Care's character-level English filter (ASCII share >= 0.85 and CJK share <= 0.02)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dlmeval.errors import InputError

# CJK scripts: ideographs (unified, extensions A-F and compatibility), CJK symbols and punctuation, kana,
# bopomofo, Hangul (jamo, compatibility jamo, syllables) and half/full-width forms. Written by hand: no library
# in our environment classifies characters by script, and unicodedata names would be slow and fragile.
_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3200-\u32ff\u3300-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0002fa1f\U00030000-\U0003134f]"
)


def char_shares(text: str) -> tuple[float, float, int]:
    """``(ascii_share, cjk_share, n)`` over the ``n`` non-whitespace characters of ``text`` (NaN shares if n = 0)."""
    chars = "".join(text.split())
    n = len(chars)
    if n == 0:
        return float("nan"), float("nan"), 0
    n_ascii = sum(1 for c in chars if ord(c) < 128)
    n_cjk = len(_CJK.findall(chars))
    return n_ascii / n, n_cjk / n, n


def english_filter(text: str, *, min_ascii: float = 0.85, max_cjk: float = 0.02) -> bool:
    """True if ``text`` passes Care's English filter: over non-whitespace characters, ASCII share >= ``min_ascii``
    and CJK share <= ``max_cjk`` (both bounds inclusive). A text with no non-whitespace character fails."""
    if not isinstance(text, str):
        raise InputError(f"english_filter needs a string, got {type(text).__name__}")
    a, c, n = char_shares(text)
    return n > 0 and a >= min_ascii and c <= max_cjk


def acceptance_rate(texts: Sequence[str], **thresholds) -> float:
    """Share of ``texts`` that pass :func:`english_filter` (NaN for an empty list)."""
    if isinstance(texts, str):
        raise InputError("acceptance_rate needs a list of strings, not one string")
    ts = list(texts)
    if not ts:
        return float("nan")
    return sum(english_filter(t, **thresholds) for t in ts) / len(ts)
