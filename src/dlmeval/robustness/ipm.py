"""Input prompt masking (IPM): flag suspected corrupted prompt tokens, mask them, re-predict them with the DLM.

The paper's Algorithm 1 (App. B) in three phases: (1) noise detection by masking each prompt token in turn and
scoring it (per-token surprisal ``-log p(x_i | x_{\\i})``), (2) selecting the tokens to re-mask, (3) a short
diffusion infill of ``T_d`` steps that unmasks the flagged positions most confident first. The patched prompt then
goes to ordinary generation; accuracy against the noisy baseline is the protocol's business.

API
    ``IPMConfig(variant, tau=0.1, k=2, rho=0.1, max_iter=3, min_chars=3, infill_steps=16, batch_size=16,
    max_distance=2, hybrid_with="topk")``            frozen; ``.key`` names it ("ipm.topk[k=2,Td=16,lmin=3]")
    ``run_ipm(model, prompts, config, item_ids=, seed=0, spans=None, scorer=None, flagger=None) -> IPMOutput``
        the whole procedure for a list of prompt texts; ``IPMOutput.results[i]`` is an :class:`IPMResult`
        (``patched_ids`` are the prompt for the sampler, ``flagged`` the token positions re-masked)
    ``tokenize_prompt(model, text, span=None, min_chars=3) -> TokenizedPrompt``  ids as the sampler encodes a
        string prompt, character offsets, eligibility (not special, inside ``span``, surface >= ``min_chars``)
    ``masked_surprisal(model, prompts, batch_size=16) -> DetectionPass``  phase 1: every eligible position of
        every prompt masked in its own copy; copies go through the model in length-sorted batches (one forward
        pass, so one NFE, per batch)
    ``select_threshold(surprisal, eligible, tau)``, ``select_topk(surprisal, eligible, k)``,
    ``select_uniform(eligible, rho, rng)``           phase 2 for the internal variants (sorted position arrays)
    ``EditDistanceFlagger(words=None, max_distance=2, model=None)``  the external signal: ``.flag_words(text,
        span=None, min_chars=3)`` -> character spans of words that are not known but lie within ``max_distance``
        edits of a known word; ``.is_known(word)``, ``.nearest(word)``
    ``infill(model, ids, flagged, steps=16, batch_size=16) -> (patched ids, nfe)``  phase 3

Variants (``IPMConfig.variant``; the paper's Table 7 / Table 10)
    ``threshold``  tokens with ``p(x_i | rest) < tau``                          (IPM-Threshold, Algorithm 1)
    ``topk``       the ``k`` tokens of highest surprisal                            (IPM-TopK)
    ``uniform``    ``rho`` of the eligible tokens, drawn at random (a control)      (IPM-Uniform)
    ``iterative``  threshold, infill, detect again on the patched prompt, up to ``max_iter`` rounds; stops when
                   nothing is flagged                                               (IPM-Iterative)
    ``editdist``   every token of each word the external flagger flags             (IPM-EditDistance)
    ``hybrid``     the union of ``editdist`` and the internal selector ``hybrid_with`` (``topk`` or
                   ``threshold``)                                                   (IPM-Hybrid)

Eligibility. Only tokens with a character span (special and chat-template tokens have none) inside ``span``
(default: the whole text) whose surface text (stripped of whitespace) has at least ``min_chars`` characters
(the paper's ``l_min`` = 3) can be flagged; the detection pass scores only those (surprisal is NaN elsewhere). A
word flagged by the edit-distance flagger needs ``min_chars`` letters, and all its tokens are masked (each keeps
its position: the infill re-predicts the same number of tokens).

The external flagger. No spell-checking library is installed, so the word list is assembled from what is:
the tokenizer's whole-word vocabulary (WordPiece entries without ``##``; byte-level BPE / SentencePiece entries
with the word-start marker; all entries of a word-level vocabulary), WordNet 3.0 lemmas (Debian's wordnet-base,
when present; inflected forms are accepted through WordNet's ``morphy``), and the stopword and number-word lists
of :mod:`dlmeval.robustness.perturb`. A word (letters only, compared in lower case) is flagged when it is not
known and some known word lies within ``max_distance`` edits (insert, delete, substitute a-z, swap two adjacent
letters: Norvig's edit model, the one pyspellchecker uses); words with digits are never flagged. Like the paper's
spell-checker it flags valid rare words and names that happen to be near a dictionary word.

Infill (phase 3). With ``C`` flagged positions, step ``s = 1..T_d`` unmasks the most confident masked positions
until ``ceil(s / T_d * |C|)`` are decided (Algorithm 1, line 18); the prediction is the argmax with the mask
token and every special token banned (ties: lower position first). The model is not time-conditioned, so a step
that decides nothing is skipped and costs no forward pass: the infill takes ``min(T_d, |C|)`` passes per prompt.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import length_sorted_batches
from dlmeval.robustness.perturb import NUMBER_WORDS, STOPWORDS, stochastic_round, words
from dlmeval.scoring.core import MaskedRow, iter_scores, masked_batch
from dlmeval.seeding import numpy_rng

VARIANTS = ("threshold", "topk", "uniform", "iterative", "editdist", "hybrid")
INTERNAL = (
    "threshold",
    "topk",
    "iterative",
    "hybrid",
)  # variants that need the detection pass (hybrid: its half)


# ---------------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class IPMConfig:
    """One IPM variant with its settings (defaults: the paper's Table 7, ``T_d`` = 16)."""

    variant: str = "topk"
    tau: float = 0.10  # threshold / iterative: flag p(x_i | rest) < tau
    k: int = 2  # topk: flag the k most surprising tokens
    rho: float = 0.10  # uniform: fraction of eligible tokens
    max_iter: int = 3  # iterative: rounds of detect + infill
    min_chars: int = 3  # l_min: surface characters a token (or flagged word) needs
    infill_steps: int = 16  # T_d
    batch_size: int = 16  # rows per forward pass (detection copies, infill rows)
    max_distance: int = 2  # editdist / hybrid: edits to the nearest known word
    hybrid_with: str = "topk"  # hybrid: the internal selector joined with the flagger

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise InputError(f"unknown IPM variant {self.variant!r}; choose one of {', '.join(VARIANTS)}")
        if not 0 < self.tau <= 1:
            raise InputError(f"IPM tau is a probability in (0, 1], got {self.tau!r}")
        if not 0 <= self.rho <= 1:
            raise InputError(f"IPM rho is a fraction in [0, 1], got {self.rho!r}")
        for name in ("k", "min_chars", "max_distance"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise InputError(f"IPM {name} must be a non-negative integer, got {v!r}")
        for name in ("max_iter", "infill_steps", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InputError(f"IPM {name} must be a positive integer, got {v!r}")
        if self.hybrid_with not in ("topk", "threshold"):
            raise InputError(f"hybrid_with must be 'topk' or 'threshold', got {self.hybrid_with!r}")

    @property
    def needs_detection(self) -> bool:
        return self.variant in INTERNAL

    @property
    def key(self) -> str:
        """A short stable name of the variant and the settings it uses."""
        v = self.variant
        parts = {
            "threshold": [f"tau={self.tau:g}"],
            "topk": [f"k={self.k}"],
            "uniform": [f"rho={self.rho:g}"],
            "iterative": [f"tau={self.tau:g}", f"iter={self.max_iter}"],
            "editdist": [f"d={self.max_distance}"],
            "hybrid": [f"d={self.max_distance}"]
            + ([f"k={self.k}"] if self.hybrid_with == "topk" else [f"tau={self.tau:g}"]),
        }[v]
        return f"ipm.{v}[{','.join([*parts, f'Td={self.infill_steps}', f'lmin={self.min_chars}'])}]"

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "key": self.key}


# ---------------------------------------------------------------------------------------------------- prompts
@dataclass(frozen=True)
class TokenizedPrompt:
    """A prompt as the sampler encodes a string (special tokens, no trailing EOS) with character offsets."""

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]  # (0, 0) for special tokens
    eligible: np.ndarray  # bool [n]: may be flagged
    surface: list[str]  # text[start:end].strip() per token ("" for special tokens)


def _special_ids(tokenizer: Any) -> set[int]:
    """Special token ids, except the unknown token (it stands for real text: a typo, an unseen character)."""
    special = {int(t) for t in getattr(tokenizer, "all_special_ids", ())}
    unk = getattr(tokenizer, "unk_token_id", None)
    return special - ({int(unk)} if unk is not None else set())


def tokenize_prompt(
    model: Any, text: str, span: tuple[int, int] | None = None, *, min_chars: int = 3
) -> TokenizedPrompt:
    """Tokenize ``text`` like :meth:`RemaskingSampler.encode_prompt` (special tokens added, trailing EOS ids
    removed) and mark the tokens that may be flagged: a real character span inside ``span`` and a surface of at
    least ``min_chars`` characters."""
    if not isinstance(text, str):
        raise InputError(f"IPM prompts are texts, got {type(text).__name__}")
    ids, offsets = model.encode_with_offsets(text)  # the models layer: fast offsets or incremental decoding
    eos = set(getattr(model, "eos_token_ids", ()))
    while ids and ids[-1] in eos:
        ids.pop()
        offsets.pop()
    lo, hi = span if span is not None else (0, len(text))
    if not 0 <= lo <= hi <= len(text):
        raise InputError(f"span {span} does not lie inside a text of {len(text)} characters")
    special = _special_ids(model.tokenizer)
    surface, elig = [], []
    for t, (s, e) in zip(ids, offsets):
        real = e > s and t not in special
        surf = text[s:e].strip() if real else ""
        surface.append(surf)
        elig.append(real and s >= lo and e <= hi and len(surf) >= min_chars)
    return TokenizedPrompt(text, ids, offsets, np.array(elig, dtype=bool), surface)


# ---------------------------------------------------------------------------------------------------- phase 1
@dataclass
class DetectionPass:
    """Per-prompt surprisal ``-log p(x_i | x with i masked)`` (nats; NaN where not scored) and the cost."""

    surprisal: list[np.ndarray]
    nfe: int  # forward passes (= batches)
    batches: int
    rows: int  # masked copies scored


Scorer = Callable[[Any, Sequence[list[int]], Sequence[np.ndarray]], DetectionPass]


def masked_surprisal(
    model: Any,
    ids: Sequence[list[int]],
    eligible: Sequence[np.ndarray],
    *,
    batch_size: int = 16,
) -> DetectionPass:
    """Phase 1: score every eligible position of every prompt with that position alone masked.

    Each (prompt, position) pair is one row: a copy of the prompt with the mask token at the position. Rows go
    through the masked-scoring core (:mod:`dlmeval.scoring.core`) in length-sorted batches of ``batch_size`` (:func:`length_sorted_batches`),
    one forward pass each, so ``nfe == batches``. The batching changes which rows are padded together, which can
    move a surprisal in its last float bits (none moved on robust-tiny, batch 16 vs 1); a stored run keys it.
    """
    rows: list[tuple[int, int]] = [
        (p, int(i)) for p, el in enumerate(eligible) for i in np.flatnonzero(np.asarray(el, dtype=bool))
    ]
    out = [np.full(len(x), np.nan) for x in ids]
    nfe0 = model.nfe
    batches = 0
    masked = [MaskedRow(ids[p], (i,)) for p, i in rows]
    for scored in iter_scores(model, masked, batch_size=batch_size):
        for r, lp in zip(scored.rows, scored.logprob):
            p, i = rows[r]
            out[p][i] = -lp[0]
        batches += 1
    return DetectionPass(out, model.nfe - nfe0, batches, len(rows))


# ---------------------------------------------------------------------------------------------------- phase 2
def _check(surprisal: np.ndarray, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(surprisal, dtype=np.float64)
    e = np.asarray(eligible, dtype=bool)
    if s.shape != e.shape:
        raise InputError(f"surprisal {s.shape} and eligibility {e.shape} differ in shape")
    return s, e & ~np.isnan(s)


def select_threshold(surprisal: np.ndarray, eligible: np.ndarray, tau: float) -> np.ndarray:
    """Eligible positions with ``p(x_i | rest) < tau``, i.e. surprisal ``> -log tau`` (Algorithm 1, line 10)."""
    s, e = _check(surprisal, eligible)
    return np.flatnonzero(e & (s > -math.log(tau)))


def select_topk(surprisal: np.ndarray, eligible: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` eligible positions of highest surprisal (fewer if fewer are eligible); ties: lower position."""
    s, e = _check(surprisal, eligible)
    cand = np.flatnonzero(e)
    order = cand[np.lexsort((cand, -s[cand]))]  # by surprisal descending, then position
    return np.sort(order[:k])


def select_uniform(eligible: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """``rho`` of the eligible positions drawn uniformly without replacement; the count is ``rho * E``
    stochastically rounded (as the perturbation rates are: expected count exactly ``rho * E``)."""
    cand = np.flatnonzero(np.asarray(eligible, dtype=bool))
    n = min(len(cand), stochastic_round(rho * len(cand), rng))
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(rng.choice(cand, size=n, replace=False))


# ---------------------------------------------------------------------------------------------------- the flagger
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _edits1(word: str) -> set[str]:
    # Norvig's one-edit neighbourhood (delete, swap adjacent, substitute, insert over a-z). Written here because
    # no spell-checking library is installed; pyspellchecker implements the same model.
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = [a + b[1:] for a, b in splits if b]
    swaps = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1]
    subs = [a + c + b[1:] for a, b in splits if b for c in _ALPHABET]
    inserts = [a + c + b for a, b in splits for c in _ALPHABET]
    return set(deletes + swaps + subs + inserts)


def vocabulary_words(tokenizer: Any) -> set[str]:
    """Whole words of a tokenizer's vocabulary, lower case, letters only, two or more characters.

    WordPiece (entries starting ``##`` exist): entries without ``##``; byte-level BPE (``Ġ``) or SentencePiece
    (``▁``): entries with that word-start marker; otherwise (a word-level vocabulary) every entry.
    """
    vocab = list(tokenizer.get_vocab())
    if any(t.startswith("##") for t in vocab):
        cands = [t for t in vocab if not t.startswith("##")]
    else:
        marker = next((m for m in ("\u0120", "\u2581") if sum(t.startswith(m) for t in vocab) > 100), None)
        cands = [t[1:] for t in vocab if t.startswith(marker)] if marker else vocab
    return {t.lower() for t in cands if len(t) >= 2 and t.isalpha()}


@functools.lru_cache(maxsize=2)
def _wordnet_lemmas() -> frozenset[str]:
    from dlmeval.robustness.wordnet import load_wordnet, wordnet_available

    if not wordnet_available():
        return frozenset()
    wn = load_wordnet()
    return frozenset(n.lower() for n in wn.all_lemma_names() if n.isalpha())


class EditDistanceFlagger:
    """Flags words that are not known but lie within ``max_distance`` edits of a known word (likely typos).

    ``words``: the known words (lower case); default: the ``model``'s tokenizer vocabulary words, WordNet lemmas
    and the perturbation module's stopword and number-word lists (module docstring). ``use_morphy``: accept
    inflections of WordNet lemmas (``questions``) as known.
    """

    def __init__(
        self,
        words: Iterable[str] | None = None,
        *,
        max_distance: int = 2,
        model: Any = None,
        use_morphy: bool | None = None,
    ):
        if max_distance not in (1, 2):
            raise InputError(f"max_distance must be 1 or 2 edits, got {max_distance!r}")
        self.max_distance = max_distance
        if words is None:
            lex = set(STOPWORDS) | set(NUMBER_WORDS) | set(_wordnet_lemmas())
            if model is not None:
                lex |= vocabulary_words(model.tokenizer)
            if use_morphy is None:
                use_morphy = bool(_wordnet_lemmas())
        else:
            lex = {w.lower() for w in words}
        self.lexicon = frozenset(lex)
        self._wn = None
        if use_morphy:
            from dlmeval.robustness.wordnet import load_wordnet

            self._wn = load_wordnet()
        self._nearest = functools.lru_cache(maxsize=65536)(self._nearest_uncached)

    def is_known(self, word: str) -> bool:
        w = word.lower()
        if w in self.lexicon:
            return True
        if self._wn is not None and w.isascii():
            return any(self._wn.morphy(w, pos) for pos in ("n", "v", "a", "r"))
        return False

    def nearest(self, word: str) -> tuple[str, int] | None:
        """A known word within ``max_distance`` edits and its distance (the alphabetically first of the closest
        ones), or None."""
        return self._nearest(word.lower())

    def _nearest_uncached(self, w: str) -> tuple[str, int] | None:
        e1 = _edits1(w)
        hits = sorted(x for x in e1 if x and self.is_known(x))
        if hits:
            return hits[0], 1
        if self.max_distance < 2:
            return None
        best = None
        for a in e1:  # distance 2: the lexicon set only (morphy on ~10^5 strings would be slow)
            for b in _edits1(a):
                if b in self.lexicon and b != w and (best is None or b < best):
                    best = b
        return (best, 2) if best is not None else None

    def flags(self, word: str, *, min_chars: int = 3) -> bool:
        """Whether ``word`` is flagged: letters only, ``min_chars`` or more, not known, a known word nearby."""
        if len(word) < min_chars or not word.isalpha():
            return False
        if self.is_known(word):
            return False
        return self.nearest(word) is not None

    def flag_words(
        self, text: str, span: tuple[int, int] | None = None, *, min_chars: int = 3
    ) -> list[tuple[int, int]]:
        """Character spans of the flagged words of ``text[span]`` (words as in :func:`perturb.words`)."""
        lo, hi = span if span is not None else (0, len(text))
        return [
            (s, e)
            for s, e in words(text)
            if s >= lo and e <= hi and self.flags(text[s:e], min_chars=min_chars)
        ]


def tokens_of_spans(prompt: TokenizedPrompt, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Positions of the (non-special) tokens that overlap any character span."""
    out = []
    for i, (s, e) in enumerate(prompt.offsets):
        if e > s and prompt.surface[i] and any(s < b and a < e for a, b in spans):
            out.append(i)
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------------------------------------- phase 3
def _banned_ids(model: Any) -> torch.Tensor:
    ids = {int(model.mask_token_id)} | {int(t) for t in getattr(model.tokenizer, "all_special_ids", ())}
    ids |= {int(t) for t in getattr(model, "eos_token_ids", ())}
    return torch.tensor(sorted(ids), dtype=torch.long, device=model.device)


def infill(
    model: Any,
    ids: Sequence[list[int]],
    flagged: Sequence[Sequence[int]],
    *,
    steps: int = 16,
    batch_size: int = 16,
) -> tuple[list[list[int]], int]:
    """Phase 3: mask ``flagged[p]`` in prompt ``p`` and re-predict them over ``steps`` diffusion steps.

    Step ``s`` (1-based) decides masked positions, most confident first (max softmax probability with the mask
    and special tokens banned; ties to the lower position), until ``ceil(s / steps * |C|)`` of the ``|C|``
    flagged positions are decided; rows with nothing to decide at a step sit it out (no forward pass). Returns the
    patched id lists and the forward passes spent (from ``model.nfe``).
    """
    if len(ids) != len(flagged):
        raise InputError(f"{len(flagged)} flag sets for {len(ids)} prompts")
    out = [list(x) for x in ids]
    nfe0 = model.nfe
    banned = _banned_ids(model)
    todo = [p for p in range(len(ids)) if len(flagged[p])]
    with torch.no_grad():
        for batch in length_sorted_batches([len(ids[p]) for p in todo], batch_size=batch_size):
            rows = [todo[b] for b in batch]
            mb = masked_batch(model, [MaskedRow(ids[p], flagged[p]) for p in rows])
            x, attn, off, masked = mb.ids, mb.attention_mask, mb.offsets, mb.masked
            total = masked.sum(1)
            done = torch.zeros_like(total)
            for s in range(1, steps + 1):
                goal = torch.ceil(total.double() * s / steps - 1e-9).long()
                need = goal - done
                act = (need > 0).nonzero().squeeze(1)
                if act.numel() == 0:
                    continue
                logits = model.logits(x[act], attn[act])
                logits.index_fill_(2, banned, float("-inf"))
                prob, pred = torch.softmax(logits, dim=-1).max(dim=-1)
                for n, b in enumerate(act.tolist()):
                    cols = masked[b].nonzero().squeeze(1)
                    conf = prob[n, cols].double().cpu().numpy()
                    c = cols.cpu().numpy()
                    pick = c[np.lexsort((c, -conf))][: int(need[b])]
                    for col in pick.tolist():
                        x[b, col] = pred[n, col]
                        masked[b, col] = False
                    done[b] += len(pick)
            for b, p in enumerate(rows):
                o = int(off[b])
                out[p] = x[b, o : o + len(ids[p])].tolist()
    return out, model.nfe - nfe0


# ---------------------------------------------------------------------------------------------------- driver
@dataclass
class IPMResult:
    """One prompt through IPM. ``patched_ids`` is the prompt to generate from (pass the ids to the sampler)."""

    item_id: str
    variant: str  # IPMConfig.key
    text: str
    ids: list[int]
    patched_ids: list[int]
    patched_text: str  # model.decode(patched_ids): for reading (lossy for lower-casing tokenizers)
    flagged: list[int]  # token positions re-masked (union over iterations)
    flagged_tokens: list[str]  # their surface text in the original prompt
    flagged_words: list[tuple[int, int]] = field(default_factory=list)  # editdist / hybrid: character spans
    surprisal: np.ndarray | None = None  # first detection round; NaN where not scored
    changed: int = 0  # positions whose token id differs after the infill
    rows_scored: int = 0  # masked copies scored for this prompt (all rounds)
    iterations: int = 0  # detect + infill rounds that flagged something

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["flagged_words"] = [list(s) for s in self.flagged_words]
        d["surprisal"] = (
            None if self.surprisal is None else [None if np.isnan(v) else float(v) for v in self.surprisal]
        )
        return d


@dataclass
class IPMOutput:
    results: list[IPMResult]
    nfe_detect: int  # forward passes of all detection rounds (one per batch of masked copies)
    nfe_infill: int
    detect_batches: int
    config: dict[str, Any]

    @property
    def nfe(self) -> int:
        return self.nfe_detect + self.nfe_infill


def _internal_select(cfg: IPMConfig, s: np.ndarray, el: np.ndarray, how: str) -> np.ndarray:
    if how == "topk":
        return select_topk(s, el, cfg.k)
    return select_threshold(s, el, cfg.tau)


def run_ipm(
    model: Any,
    prompts: Sequence[str],
    config: IPMConfig | None = None,
    *,
    item_ids: Sequence[Any] | None = None,
    seed: int = 0,
    spans: Sequence[tuple[int, int] | None] | None = None,
    scorer: Scorer | None = None,
    flagger: EditDistanceFlagger | None = None,
) -> IPMOutput:
    """Run one IPM variant on prompt texts (already wrapped in the chat template if the model uses one).

    ``spans[i]``: the character span of prompt ``i`` that may be flagged (the user message inside a chat
    template; None: the whole text). ``scorer``: replaces :func:`masked_surprisal` (same signature; tests inject
    known surprisals). ``flagger``: the external signal for ``editdist`` / ``hybrid`` (default: an
    :class:`EditDistanceFlagger` over the model's vocabulary). ``uniform`` draws from
    ``numpy_rng(seed, "ipm", item_id, config.key)``; every other variant is deterministic.
    """
    cfg = config or IPMConfig()
    prompts = list(prompts)
    if not prompts:
        raise InputError("no prompts for IPM")
    iids = [str(i) for i in (item_ids if item_ids is not None else range(len(prompts)))]
    if len(iids) != len(prompts):
        raise InputError(f"{len(iids)} item ids for {len(prompts)} prompts")
    spans = list(spans) if spans is not None else [None] * len(prompts)
    if len(spans) != len(prompts):
        raise InputError(f"{len(spans)} spans for {len(prompts)} prompts")
    score = scorer or (lambda m, ids, el: masked_surprisal(m, ids, el, batch_size=cfg.batch_size))
    toks = [tokenize_prompt(model, t, sp, min_chars=cfg.min_chars) for t, sp in zip(prompts, spans)]
    n = len(toks)
    cur = [list(t.ids) for t in toks]
    flagged: list[set[int]] = [set() for _ in range(n)]
    words_flagged: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    first_surprisal: list[np.ndarray | None] = [None] * n
    rows_scored = [0] * n
    iterations = [0] * n
    nfe_detect = nfe_infill = batches = 0

    external: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * n
    if cfg.variant in ("editdist", "hybrid"):
        fl = flagger or EditDistanceFlagger(model=model, max_distance=cfg.max_distance)
        for p, t in enumerate(toks):
            words_flagged[p] = fl.flag_words(t.text, spans[p], min_chars=cfg.min_chars)
            external[p] = tokens_of_spans(t, words_flagged[p])

    rounds = cfg.max_iter if cfg.variant == "iterative" else 1
    active = list(range(n))
    for _ in range(rounds):
        picks: dict[int, np.ndarray] = {}
        if cfg.needs_detection:
            det = score(model, [cur[p] for p in active], [toks[p].eligible for p in active])
            nfe_detect += det.nfe
            batches += det.batches
            for j, p in enumerate(active):
                s = np.asarray(det.surprisal[j], dtype=np.float64)
                if first_surprisal[p] is None:
                    first_surprisal[p] = s
                rows_scored[p] += int((~np.isnan(s) & toks[p].eligible).sum())
                if cfg.variant == "hybrid":
                    internal = _internal_select(cfg, s, toks[p].eligible, cfg.hybrid_with)
                    picks[p] = np.union1d(internal, external[p]).astype(np.int64)
                else:
                    how = "topk" if cfg.variant == "topk" else "threshold"
                    picks[p] = _internal_select(cfg, s, toks[p].eligible, how)
        elif cfg.variant == "uniform":
            for p in active:
                picks[p] = select_uniform(toks[p].eligible, cfg.rho, numpy_rng(seed, "ipm", iids[p], cfg.key))
        else:  # editdist
            for p in active:
                picks[p] = external[p]
        active = [p for p in active if len(picks[p])]
        if not active:
            break
        patched, used = infill(
            model,
            [cur[p] for p in active],
            [picks[p].tolist() for p in active],
            steps=cfg.infill_steps,
            batch_size=cfg.batch_size,
        )
        nfe_infill += used
        for j, p in enumerate(active):
            cur[p] = patched[j]
            flagged[p].update(int(i) for i in picks[p])
            iterations[p] += 1

    results = []
    for p, t in enumerate(toks):
        fl_sorted = sorted(flagged[p])
        results.append(
            IPMResult(
                item_id=iids[p],
                variant=cfg.key,
                text=t.text,
                ids=list(t.ids),
                patched_ids=cur[p],
                patched_text=model.decode(cur[p]),
                flagged=fl_sorted,
                flagged_tokens=[t.surface[i] for i in fl_sorted],
                flagged_words=words_flagged[p],
                surprisal=first_surprisal[p],
                changed=int(sum(a != b for a, b in zip(t.ids, cur[p]))),
                rows_scored=rows_scored[p],
                iterations=iterations[p],
            )
        )
    return IPMOutput(results, nfe_detect, nfe_infill, batches, cfg.as_dict())
