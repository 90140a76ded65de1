"""Natural input perturbations: 5 character-level and 4 word-level noise types at fixed rates (32 conditions).

A :class:`Perturbation` is a frozen, self-describing value (``name``, ``level``, ``rate``, ``params``) with a
``key`` such as ``"char.keyboard@0.10"``. ``apply(text, seed, item_id)`` is a pure function of
(text, seed, item_id, condition): its generator is ``numpy_rng(seed, "perturb", item_id, key)``.

Eligible units and rates. Each type edits only its *eligible units* (table below). With ``E`` eligible units,
the number of edits is ``n = floor(r*E) + Bernoulli(r*E - floor(r*E))`` ("stochastic rounding"): the expected
count is exactly ``r*E`` and the realised count is always within 1 of it, while a short text still gets an edit
with probability ``r*E`` (plain rounding would leave every text with ``r*E < 0.5`` clean, so r = 0.05 would
never touch a one-line question). The edited units are drawn uniformly without replacement.

==================  ===============================================  ==============================================
type                eligible unit                                    edit
==================  ===============================================  ==============================================
char.transposition  a letter followed by a different letter in the   swap the two letters (``teh``); swapped pairs
                    same word                                        never overlap
char.deletion       a letter                                         delete it
char.insertion      a letter                                         insert a random a-z letter after it
char.keyboard       an ASCII letter                                  a QWERTY neighbour, case kept
                                                                     (:data:`KEYBOARD_NEIGHBOURS`)
char.homoglyph      a letter listed in :data:`HOMOGLYPHS`            a listed Cyrillic/Greek look-alike
word.deletion       a content word                                   delete it and one adjacent space
word.shuffle        a word                                           permute words inside windows of 3 consecutive
                                                                     words; counted: words that end up elsewhere
word.synonym        a content word with a WordNet synonym            a synonym (:mod:`.wordnet`), capitals kept
word.repetition     a word                                           repeat it (``the the``)
==================  ===============================================  ==============================================

A *letter* is any Unicode letter (``str.isalpha``); a *word* is a run of letters/digits (``\\w``) with inner
apostrophes; a *content word* is a word of letters only that is not in :data:`STOPWORDS` or
:data:`NUMBER_WORDS`. Numbers (digits or spelled out) are never content words, so word deletion and synonym
substitution keep the quantities of a math problem (shuffle and repetition may move or repeat them).
Punctuation and whitespace are never edited, except the one space removed with a deleted word. Local shuffle
permutes the words among the word slots of the text, so punctuation stays in place (``What is capital the of
France?``). Differences from the paper's Table 14 examples: transpositions stay inside words (the paper's
``Wha tis`` crosses a space), and the homoglyph rate counts replaced look-alike letters.

Scope. The paper perturbs the whole formatted user prompt (instruction, question and choices); its ablation
perturbs only the question. :meth:`Perturbation.apply_span` perturbs ``text[start:end]`` and keeps the rest;
:mod:`dlmeval.tasks` builds prompts that know the question's span. Perturb the user message, then wrap it in the
chat template (the template's special tokens are never perturbed).

:class:`PerturbResult` (from :meth:`Perturbation.perturb`) also lists every edit in output coordinates, so token
labels "corrupted / clean" can be derived for probes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlmeval.errors import InputError
from dlmeval.registry import Registry
from dlmeval.seeding import numpy_rng

CHAR_RATES = (0.05, 0.10, 0.20, 0.30)
WORD_RATES = (0.10, 0.20, 0.30)
SHUFFLE_WINDOW = 3

# Hand-written because nltk's English stopword list needs an nltk download. This is that list (179 words, the
# nltk_data "stopwords/english" file as of nltk 3.8), lower case; apostrophes are normalised to "'".
STOPWORDS = frozenset(
    """
    i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
    himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom
    this that that'll these those am is are was were be been being have has had having do does did doing a an the
    and but if or because as until while of at by for with about against between into through during before after
    above below to from up down in out on off over under again further then once here there when where why how all
    any both each few more most other some such no nor not only own same so than too very s t can will just don
    don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn
    hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
    shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
    """.split()
)

# Spelled-out numbers are treated like digits: never content words, so word deletion and synonym substitution
# keep the quantities of a math problem ("eats three" must not become "eats iii").
NUMBER_WORDS = frozenset(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred hundreds thousand thousands
    million millions billion billions trillion dozen dozens half halves quarter quarters twice thrice first second
    third thirds fourth fourths fifth fifths sixth seventh eighth ninth tenth tenths eleventh twelfth hundredth
    """.split()
)

# QWERTY letter keys adjacent to each letter key (same row left/right, and the keys touching it on the rows above
# and below on a staggered keyboard). Symmetric; tests check it.
KEYBOARD_NEIGHBOURS: dict[str, str] = {
    "q": "wa",
    "w": "qeas",
    "e": "wrsd",
    "r": "etdf",
    "t": "ryfg",
    "y": "tugh",
    "u": "yihj",
    "i": "uojk",
    "o": "ipkl",
    "p": "ol",
    "a": "qwsz",
    "s": "weadzx",
    "d": "ersfxc",
    "f": "rtdgcv",
    "g": "tyfhvb",
    "h": "yugjbn",
    "j": "uihknm",
    "k": "iojlm",
    "l": "opk",
    "z": "asx",
    "x": "sdzc",
    "c": "dfxv",
    "v": "fgcb",
    "b": "ghvn",
    "n": "hjbm",
    "m": "jkn",
}

# Latin letter -> Unicode look-alikes (Cyrillic and Greek letters rendered like it in common fonts). Only these are
# ever used; a letter not listed here is not eligible for the homoglyph perturbation.
HOMOGLYPHS: dict[str, tuple[str, ...]] = {
    "a": ("\u0430",),  # CYRILLIC SMALL LETTER A
    "c": ("\u0441", "\u03f2"),  # CYRILLIC SMALL LETTER ES, GREEK LUNATE SIGMA SYMBOL
    "d": ("\u0501",),  # CYRILLIC SMALL LETTER KOMI DE
    "e": ("\u0435",),  # CYRILLIC SMALL LETTER IE
    "h": ("\u04bb",),  # CYRILLIC SMALL LETTER SHHA
    "i": ("\u0456",),  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
    "j": ("\u0458",),  # CYRILLIC SMALL LETTER JE
    "o": ("\u043e", "\u03bf"),  # CYRILLIC SMALL LETTER O, GREEK SMALL LETTER OMICRON
    "p": ("\u0440",),  # CYRILLIC SMALL LETTER ER
    "q": ("\u051b",),  # CYRILLIC SMALL LETTER QA
    "s": ("\u0455",),  # CYRILLIC SMALL LETTER DZE
    "v": ("\u03bd",),  # GREEK SMALL LETTER NU
    "w": ("\u051d",),  # CYRILLIC SMALL LETTER WE
    "x": ("\u0445",),  # CYRILLIC SMALL LETTER HA
    "y": ("\u0443",),  # CYRILLIC SMALL LETTER U
    "A": ("\u0410", "\u0391"),  # CYRILLIC CAPITAL LETTER A, GREEK CAPITAL LETTER ALPHA
    "B": ("\u0412", "\u0392"),  # CYRILLIC CAPITAL LETTER VE, GREEK CAPITAL LETTER BETA
    "C": ("\u0421", "\u03f9"),  # CYRILLIC CAPITAL LETTER ES, GREEK CAPITAL LUNATE SIGMA SYMBOL
    "E": ("\u0415", "\u0395"),  # CYRILLIC CAPITAL LETTER IE, GREEK CAPITAL LETTER EPSILON
    "H": ("\u041d", "\u0397"),  # CYRILLIC CAPITAL LETTER EN, GREEK CAPITAL LETTER ETA
    "I": ("\u0406", "\u0399"),  # CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I, GREEK CAPITAL LETTER IOTA
    "J": ("\u0408",),  # CYRILLIC CAPITAL LETTER JE
    "K": ("\u041a", "\u039a"),  # CYRILLIC CAPITAL LETTER KA, GREEK CAPITAL LETTER KAPPA
    "M": ("\u041c", "\u039c"),  # CYRILLIC CAPITAL LETTER EM, GREEK CAPITAL LETTER MU
    "N": ("\u039d",),  # GREEK CAPITAL LETTER NU
    "O": ("\u041e", "\u039f"),  # CYRILLIC CAPITAL LETTER O, GREEK CAPITAL LETTER OMICRON
    "P": ("\u0420", "\u03a1"),  # CYRILLIC CAPITAL LETTER ER, GREEK CAPITAL LETTER RHO
    "S": ("\u0405",),  # CYRILLIC CAPITAL LETTER DZE
    "T": ("\u0422", "\u03a4"),  # CYRILLIC CAPITAL LETTER TE, GREEK CAPITAL LETTER TAU
    "X": ("\u0425", "\u03a7"),  # CYRILLIC CAPITAL LETTER HA, GREEK CAPITAL LETTER CHI
    "Y": ("\u04ae", "\u03a5"),  # CYRILLIC CAPITAL LETTER STRAIGHT U, GREEK CAPITAL LETTER UPSILON
    "Z": ("\u0396",),  # GREEK CAPITAL LETTER ZETA
}

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")
_CONTENT = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")
_ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz"


# ---------------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Edit:
    """One edit, in output coordinates: ``output[start:end]`` replaced ``original`` (``start == end``: a deletion;
    ``original == ""``: an insertion)."""

    start: int
    end: int
    original: str


@dataclass(frozen=True, slots=True)
class PerturbResult:
    text: str
    key: str
    eligible: int  # E: eligible units in the input (or the span)
    target: float  # r * E, the expected number of edits
    changed: int  # units actually edited (see the module table)
    edits: tuple[Edit, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "text": self.text,
            "eligible": self.eligible,
            "target": self.target,
            "changed": self.changed,
            "edits": [[e.start, e.end, e.original] for e in self.edits],
        }


# ---------------------------------------------------------------------------------------------------- helpers


def stochastic_round(x: float, rng: np.random.Generator) -> int:
    """``floor(x)`` plus one with probability ``x - floor(x)``: unbiased, and within 1 of ``x``."""
    lo = math.floor(x)
    return lo + int(rng.random() < x - lo)


def _count(rate: float, eligible: int, rng: np.random.Generator) -> int:
    return min(eligible, stochastic_round(rate * eligible, rng)) if eligible else 0


def _choose(positions: Sequence[int], n: int, rng: np.random.Generator) -> list[int]:
    if n <= 0 or not positions:
        return []
    idx = rng.choice(len(positions), size=min(n, len(positions)), replace=False)
    return sorted(positions[i] for i in idx)


def _pick(positions: Sequence[int], rate: float, rng: np.random.Generator) -> list[int]:
    """The sites a type changes at ``rate``: a stochastically rounded ``rate`` share of the eligible
    ``positions`` (:func:`_count`), drawn without replacement and sorted (:func:`_choose`), in that order of draws
    from ``rng``."""
    return _choose(positions, _count(rate, len(positions), rng), rng)


def _render(text: str, repl: list[tuple[int, int, str]]) -> tuple[str, tuple[Edit, ...]]:
    """Apply non-overlapping replacements ``(start, end, new)`` (input coordinates) and report output edits."""
    out: list[str] = []
    edits: list[Edit] = []
    pos = 0
    length = 0
    for start, end, new in sorted(repl, key=lambda t: (t[0], t[1])):
        if start < pos:  # pragma: no cover - callers never produce overlaps
            raise AssertionError("overlapping edits")
        out.append(text[pos:start])
        length += start - pos
        out.append(new)
        edits.append(Edit(length, length + len(new), text[start:end]))
        length += len(new)
        pos = end
    out.append(text[pos:])
    return "".join(out), tuple(edits)


def words(text: str) -> list[tuple[int, int]]:
    """Spans of the words of ``text`` (runs of ``\\w`` with inner apostrophes)."""
    return [m.span() for m in _WORD.finditer(text)]


def is_content_word(word: str) -> bool:
    """Letters only, not a stopword, not a spelled-out number."""
    w = word.lower().replace("\u2019", "'")
    return bool(_CONTENT.fullmatch(word)) and w not in STOPWORDS and w not in NUMBER_WORDS


def _match_case(template: str, word: str) -> str:
    if len(template) > 1 and template.isupper():
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


# ---------------------------------------------------------------------------------------------------- the types
# Each returns (replacements, eligible, changed) for a text; the caller renders them.

Plan = tuple[list[tuple[int, int, str]], int, int]


@dataclass(frozen=True)
class PerturbationType:
    """A registered perturbation type: ``fn(text, rate, rng, params) -> (replacements, eligible, changed)``."""

    level: str
    name: str
    rates: tuple[float, ...]
    fn: Callable[[str, float, np.random.Generator, dict], Plan]
    description: str
    eligible: str
    default_params: tuple[tuple[str, Any], ...] = ()

    @property
    def type_key(self) -> str:
        return f"{self.level}.{self.name}"


#: every perturbation type by its key (``char.keyboard``), in registration order (``types = "all"``)
PERTURBATIONS: Registry[PerturbationType] = Registry("perturbation type")
TYPES = PERTURBATIONS  # the former name


def register_perturbation(
    level: str,
    name: str,
    *,
    rates: Sequence[float],
    description: str,
    eligible: str,
    params: Sequence[tuple[str, Any]] = (),
) -> Callable[[Callable[..., Plan]], Callable[..., Plan]]:
    """Decorator: register ``fn(text, rate, rng, params) -> (replacements, eligible, changed)`` as the type
    ``level.name`` (``replacements``: ``(start, end, new text)`` spans of ``text``; ``rng``: the item's generator;
    ``params``: ``dict(default_params)`` updated with the condition's own). A duplicate key is refused.

    >>> @register_perturbation("char", "upper", rates=(0.1,), description="upper-case a letter", eligible="letters")
    ... def _upper(text, rate, rng, params):
    ...     elig = [i for i, c in enumerate(text) if c.islower()]
    ...     chosen = _pick(elig, rate, rng)
    ...     return [(i, i + 1, text[i].upper()) for i in chosen], len(elig), len(chosen)
    >>> Perturbation("upper", "char", 0.5).apply("abcd", seed=0, item_id="x")
    'aBcD'
    >>> PERTURBATIONS.remove("char.upper")
    """

    def deco(fn: Callable[..., Plan]) -> Callable[..., Plan]:
        t = PerturbationType(level, name, tuple(rates), fn, description, eligible, tuple(params))
        PERTURBATIONS.add(t.type_key, t)
        return fn

    return deco


@register_perturbation(
    "char",
    "transposition",
    rates=CHAR_RATES,
    description="swap two adjacent letters inside a word (teh)",
    eligible="letters followed by a different letter in the same word",
)
def _transposition(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    sites = [
        i
        for i in range(len(text) - 1)
        if text[i].isalpha() and text[i + 1].isalpha() and text[i] != text[i + 1]
    ]
    n = _count(rate, len(sites), rng)
    chosen: list[int] = []
    if n:
        taken: set[int] = set()
        for k in rng.permutation(len(sites)):  # greedy in random order: swapped pairs must not overlap
            i = sites[int(k)]
            if i in taken or i + 1 in taken:
                continue
            chosen.append(i)
            taken.update((i, i + 1))
            if len(chosen) == n:
                break
    repl = [(i, i + 2, text[i + 1] + text[i]) for i in sorted(chosen)]
    return repl, len(sites), len(repl)


def _letters(text: str) -> list[int]:
    return [i for i, c in enumerate(text) if c.isalpha()]


@register_perturbation(
    "char", "deletion", rates=CHAR_RATES, description="delete a letter (apital)", eligible="letters"
)
def _deletion(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    elig = _letters(text)
    chosen = _pick(elig, rate, rng)
    return [(i, i + 1, "") for i in chosen], len(elig), len(chosen)


@register_perturbation(
    "char",
    "insertion",
    rates=CHAR_RATES,
    description="insert a random a-z letter after a letter",
    eligible="letters",
)
def _insertion(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    elig = _letters(text)
    chosen = _pick(elig, rate, rng)
    repl = [(i + 1, i + 1, _ASCII_LOWER[int(rng.integers(26))]) for i in chosen]
    return repl, len(elig), len(repl)


@register_perturbation(
    "char",
    "keyboard",
    rates=CHAR_RATES,
    description="replace a letter by a QWERTY neighbour (capiral)",
    eligible="ASCII letters",
)
def _keyboard(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    elig = [i for i, c in enumerate(text) if c.lower() in KEYBOARD_NEIGHBOURS and c.isascii()]
    chosen = _pick(elig, rate, rng)
    repl = []
    for i in chosen:
        c = text[i]
        nb = KEYBOARD_NEIGHBOURS[c.lower()]
        new = nb[int(rng.integers(len(nb)))]
        repl.append((i, i + 1, new.upper() if c.isupper() else new))
    return repl, len(elig), len(repl)


@register_perturbation(
    "char",
    "homoglyph",
    rates=CHAR_RATES,
    description="replace a letter by a Cyrillic/Greek look-alike (Cyrillic a for a)",
    eligible="letters with a listed look-alike",
)
def _homoglyph(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    elig = [i for i, c in enumerate(text) if c in HOMOGLYPHS]
    chosen = _pick(elig, rate, rng)
    repl = []
    for i in chosen:
        opts = HOMOGLYPHS[text[i]]
        repl.append((i, i + 1, opts[int(rng.integers(len(opts)))]))
    return repl, len(elig), len(repl)


@register_perturbation(
    "word",
    "deletion",
    rates=WORD_RATES,
    description="delete a content word (What is the of France?)",
    eligible="content words (letters only, not a stopword)",
)
def _word_deletion(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    spans = [s for s in words(text) if is_content_word(text[s[0] : s[1]])]
    chosen = _pick(list(range(len(spans))), rate, rng)
    repl: list[tuple[int, int, str]] = []
    prev_end = 0
    for k in chosen:
        s, e = spans[k]
        if e < len(text) and text[e] == " ":
            e += 1  # "the capital of" -> "the of"
        elif s > prev_end and text[s - 1] == " ":
            s -= 1  # "of France?" -> "of?"
        repl.append((s, e, ""))
        prev_end = e
    return repl, len(spans), len(repl)


@register_perturbation(
    "word",
    "shuffle",
    rates=WORD_RATES,
    description="permute words inside windows of 3 consecutive words",
    eligible="words",
    params=(("window", SHUFFLE_WINDOW),),
)
def _shuffle(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    window = int(params.get("window", SHUFFLE_WINDOW))
    spans = words(text)
    toks = [text[s:e] for s, e in spans]
    target = _count(rate, len(spans), rng)
    new = list(toks)
    moved = 0
    starts = list(range(0, len(spans), window))
    order = rng.permutation(len(starts)) if target else []
    for k in order:  # windows in random order until enough words have moved
        if moved >= target:
            break
        idx = list(range(starts[int(k)], min(len(spans), starts[int(k)] + window)))
        pairs = [
            (a, b) for a in range(len(idx)) for b in range(a + 1, len(idx)) if toks[idx[a]] != toks[idx[b]]
        ]
        if not pairs:
            continue  # identical words only: nothing to shuffle
        perm = list(range(len(idx)))
        if target - moved >= len(idx) and len(idx) > 2:
            # a random cyclic rotation moves every word of the window (all of them when they differ)
            r = 1 + int(rng.integers(len(idx) - 1))
            perm = perm[r:] + perm[:r]
        else:  # a swap of two different words moves exactly two
            a, b = pairs[int(rng.integers(len(pairs)))]
            perm[a], perm[b] = perm[b], perm[a]
        for m, i in enumerate(idx):
            new[i] = toks[idx[perm[m]]]
        moved += sum(new[i] != toks[i] for i in idx)
    repl = [(s, e, new[k]) for k, (s, e) in enumerate(spans) if new[k] != toks[k]]
    return repl, len(spans), len(repl)


@register_perturbation(
    "word",
    "synonym",
    rates=WORD_RATES,
    description="replace a content word by a WordNet synonym",
    eligible="content words with a WordNet synonym",
)
def _synonym(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    from dlmeval.robustness.wordnet import load_wordnet, synonyms

    load_wordnet()  # InputError naming the package, even for a text without content words
    spans, opts = [], []
    for s, e in words(text):
        w = text[s:e]
        if is_content_word(w):
            syn = synonyms(w)
            if syn:
                spans.append((s, e))
                opts.append(syn)
    chosen = _pick(list(range(len(spans))), rate, rng)
    repl = []
    for k in chosen:
        s, e = spans[k]
        syn = opts[k][int(rng.integers(len(opts[k])))]
        repl.append((s, e, _match_case(text[s:e], syn)))
    return repl, len(spans), len(repl)


@register_perturbation(
    "word", "repetition", rates=WORD_RATES, description="repeat a word (the the)", eligible="words"
)
def _repetition(text: str, rate: float, rng: np.random.Generator, params: dict) -> Plan:
    spans = words(text)
    chosen = _pick(list(range(len(spans))), rate, rng)
    repl = [(spans[k][1], spans[k][1], " " + text[spans[k][0] : spans[k][1]]) for k in chosen]
    return repl, len(spans), len(repl)


def resolve_type(name: str) -> PerturbationType:
    """``"char.keyboard"``, or a unique bare name (``"keyboard"``, ``"homoglyph"``); ``"deletion"`` is ambiguous."""
    if name in TYPES:
        return TYPES[name]
    hits = [t for t in TYPES.values() if t.name == name]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(TYPES)
    if hits:
        raise InputError(
            f"perturbation type {name!r} is ambiguous; say one of {', '.join(t.type_key for t in hits)}"
        )
    raise InputError(f"unknown perturbation type {name!r}; known types: {known}")


# ---------------------------------------------------------------------------------------------------- the value


@dataclass(frozen=True)
class Perturbation:
    """One noise condition: a type (``level``.``name``) at a ``rate``; ``params`` as sorted ``(name, value)`` pairs."""

    name: str
    level: str
    rate: float
    params: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if f"{self.level}.{self.name}" not in TYPES:
            raise InputError(
                f"unknown perturbation {self.level}.{self.name}; known types: {', '.join(TYPES)}"
            )
        if isinstance(self.rate, bool) or not isinstance(self.rate, int | float) or not 0 <= self.rate <= 1:
            raise InputError(f"perturbation rate must be a number in [0, 1], got {self.rate!r}")
        object.__setattr__(self, "rate", float(self.rate))
        params = dict(TYPES[f"{self.level}.{self.name}"].default_params)
        params.update(dict(self.params))
        if "window" in params and (not isinstance(params["window"], int) or params["window"] < 2):
            raise InputError(f"shuffle window must be an integer >= 2, got {params['window']!r}")
        object.__setattr__(self, "params", tuple(sorted(params.items())))

    @classmethod
    def of(cls, type_name: str, rate: float, **params: Any) -> Perturbation:
        t = resolve_type(type_name)
        return cls(t.name, t.level, rate, tuple(params.items()))

    @classmethod
    def from_key(cls, key: str) -> Perturbation:
        """Parse ``"char.keyboard@0.10"`` (the inverse of :attr:`key` for default params)."""
        type_name, sep, rate = key.partition("@")
        if not sep:
            raise InputError(f"a perturbation key looks like 'char.keyboard@0.10', got {key!r}")
        try:
            r = float(rate)
        except ValueError:
            raise InputError(f"bad rate {rate!r} in perturbation key {key!r}") from None
        return cls.of(type_name, r)

    @property
    def type_key(self) -> str:
        return f"{self.level}.{self.name}"

    @property
    def key(self) -> str:
        t = TYPES[self.type_key]
        extra = [f"{k}={v}" for k, v in self.params if (k, v) not in t.default_params]
        rate = f"{self.rate:.2f}"
        if float(rate) != self.rate:  # keep rates the paper does not use exact (0.125 -> "0.125")
            rate = f"{self.rate:.6g}"
        return f"{self.type_key}@{rate}" + (f"[{','.join(extra)}]" if extra else "")

    def describe(self) -> dict[str, Any]:
        t = TYPES[self.type_key]
        return {
            "key": self.key,
            "level": self.level,
            "name": self.name,
            "rate": self.rate,
            "params": dict(self.params),
            "description": t.description,
            "eligible_units": t.eligible,
            "count_rule": "stochastic rounding of rate * eligible (within 1 of it)",
        }

    def rng(self, seed: int, item_id: object) -> np.random.Generator:
        return numpy_rng(seed, "perturb", item_id, self.key)

    def perturb(self, text: str, seed: int, item_id: object) -> PerturbResult:
        """The perturbed text with its unit counts and edits."""
        if not isinstance(text, str):
            raise InputError(f"perturbations apply to text, got {type(text).__name__}")
        t = TYPES[self.type_key]
        repl, eligible, changed = t.fn(text, self.rate, self.rng(seed, item_id), dict(self.params))
        out, edits = _render(text, repl)
        return PerturbResult(out, self.key, eligible, self.rate * eligible, changed, edits)

    def apply(self, text: str, seed: int, item_id: object) -> str:
        return self.perturb(text, seed, item_id).text

    def perturb_span(self, text: str, start: int, end: int, seed: int, item_id: object) -> PerturbResult:
        """Perturb only ``text[start:end]``; counts refer to the span, edit offsets to the whole output text."""
        if not (isinstance(start, int) and isinstance(end, int)) or not 0 <= start <= end <= len(text):
            raise InputError(f"span [{start}, {end}) does not lie inside a text of {len(text)} characters")
        inner = self.perturb(text[start:end], seed, item_id)
        edits = tuple(Edit(e.start + start, e.end + start, e.original) for e in inner.edits)
        return PerturbResult(
            text[:start] + inner.text + text[end:],
            self.key,
            inner.eligible,
            inner.target,
            inner.changed,
            edits,
        )

    def apply_span(self, text: str, start: int, end: int, seed: int, item_id: object) -> str:
        return self.perturb_span(text, start, end, seed, item_id).text

    def __str__(self) -> str:
        return self.key


#: The paper's 32 conditions: 5 character-level types x 4 rates, then 4 word-level types x 3 rates.
CONDITIONS: tuple[Perturbation, ...] = tuple(
    Perturbation(t.name, t.level, r) for t in TYPES.values() for r in t.rates
)


def conditions(
    types: Sequence[str] | None = None, rates: Sequence[float] | None = None
) -> list[Perturbation]:
    """Conditions of the given types (default: all 9) at the given rates (default: the paper's rates per level)."""
    ts = [resolve_type(n) for n in types] if types else list(TYPES.values())
    return [Perturbation(t.name, t.level, r) for t in ts for r in (rates if rates is not None else t.rates)]
