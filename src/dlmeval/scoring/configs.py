"""DiffScore configurations and the one place that turns (source, candidate) into model input.

Configurations (DiffScore section 3.1; names and aliases accepted by :func:`resolve_config`):

==============  =========================  ==========================================================================
name            aliases                    what is masked / visible
==============  =========================  ==========================================================================
``marginal``    mar, fluency               the candidate alone; its tokens are masked (fluency)
``cond``        conditional, faithfulness  source fully visible, candidate masked (faithfulness / consistency)
``reverse``     rev, coverage              candidate fully visible, source masked (coverage)
``bidir``       bidirectional, bi          ``(cond + reverse) / 2``: the arithmetic mean of the two directions, as
                                           BARTScore's F variant; both directions have their own masks (holistic)
``pmi``         -                          ``cond - marginal`` on the SAME candidate masks (coupled), mask by mask
==============  =========================  ==========================================================================

Input layout (:class:`PairFormatter`). The source and the candidate are tokenized separately, without special
tokens, and joined by the tokenizer's own pair template, read once from the tokenizer (``[CLS] source [SEP]
candidate [SEP]`` for BERT-style tokenizers); when the pair template puts nothing between the two texts, a separator
is inserted (the encoding of a blank line, else the tokenizer's SEP, else its first EOS). ``reverse`` uses the same
layout as ``cond`` and only masks the other side, so both directions see the same sequence. ``marginal`` is the
candidate with the tokenizer's single-text template (``[CLS] candidate [SEP]``).

Instruction-tuned models (``model.has_chat_template`` and a tokenizer chat template): the source goes into the user
turn through a prompt template (``{source}`` is replaced; see :data:`PROMPTS`) and the candidate is the assistant
turn; ``marginal`` keeps the chat frame with an empty user turn, so the candidate sits in the same place in both
and PMI compares like with like. Pass ``chat=False`` to score such a model without its template.

Window. A text that does not fit ``model.max_length`` is cut: the source from its end first (down to nothing);
if the candidate alone still does not fit, the candidate from its end. Each cut is reported as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlmeval.errors import InputError

CONFIGS = ("marginal", "cond", "reverse", "bidir", "pmi")
_ALIASES = {
    "marginal": "marginal",
    "mar": "marginal",
    "fluency": "marginal",
    "cond": "cond",
    "conditional": "cond",
    "faithfulness": "cond",
    "reverse": "reverse",
    "rev": "reverse",
    "coverage": "reverse",
    "bidir": "bidir",
    "bidirectional": "bidir",
    "bi": "bidir",
    "pmi": "pmi",
}
#: the directions each configuration is made of: (layout, masked side)
COMPONENTS: dict[str, tuple[str, ...]] = {
    "marginal": ("marginal",),
    "cond": ("cond",),
    "reverse": ("reverse",),
    "bidir": ("cond", "reverse"),
    "pmi": ("cond", "marginal"),
}
#: which text each direction masks
MASKED_SIDE = {"marginal": "candidate", "cond": "candidate", "reverse": "source"}
NEEDS_SOURCE = frozenset({"cond", "reverse", "bidir", "pmi"})

#: named prompt templates for instruction-tuned models; any string containing ``{source}`` works as well
PROMPTS: dict[str, str] = {
    "plain": "{source}",
    "summarize": "Summarize the following article.\n\n{source}",
    "translate": "Translate the following text into English.\n\n{source}",
    "describe": "Describe the following data in natural language.\n\n{source}",
    "respond": "{source}",
}

_SRC = "\x02DLMEVAL_SOURCE\x03"
_CAND = "\x02DLMEVAL_CANDIDATE\x03"


def resolve_config(name: str) -> str:
    """The canonical configuration name (``marginal``, ``cond``, ``reverse``, ``bidir``, ``pmi``)."""
    key = str(name).strip().lower()
    if key not in _ALIASES:
        raise InputError(
            f"unknown DiffScore configuration {name!r}; choose one of {', '.join(CONFIGS)} "
            "(aliases: mar, conditional, rev, bidirectional, bi)"
        )
    return _ALIASES[key]


def resolve_prompt(prompt: str | None) -> str:
    if prompt is None:
        return PROMPTS["plain"]
    if prompt in PROMPTS:
        return PROMPTS[prompt]
    if "{source}" not in prompt:
        raise InputError(
            f"a prompt template must contain '{{source}}' or be one of {', '.join(PROMPTS)}; got {prompt!r}"
        )
    return prompt


@dataclass(frozen=True)
class Layout:
    """One model input: ``ids`` and the spans (start, stop) of the source and the candidate inside it."""

    ids: tuple[int, ...]
    candidate: tuple[int, int]
    source: tuple[int, int]
    warnings: tuple[str, ...] = ()

    def span(self, side: str) -> tuple[int, int]:
        return self.candidate if side == "candidate" else self.source

    def n_tokens(self, side: str) -> int:
        a, b = self.span(side)
        return b - a


@dataclass
class _Template:
    prefix: list[int]
    middle: list[int]
    suffix: list[int]
    source_first: bool = True


@dataclass
class PairFormatter:
    """Builds :class:`Layout` s for one model. Token lists of texts are cached, so a source shared by many
    candidates is tokenized once."""

    model: object
    prompt: str | None = None
    chat: bool | None = None
    _cache: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _pair: _Template | None = field(default=None, repr=False)
    _single: _Template | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        tok = self.model.tokenizer
        has = bool(getattr(self.model, "has_chat_template", False)) and bool(
            getattr(tok, "chat_template", None)
        )
        if self.chat and not has:
            raise InputError(
                "chat=True, but this model has no chat template; score without one (chat=False or omit it)"
            )
        self.use_chat = has if self.chat is None else bool(self.chat)
        # Without a chat template, a prompt's text surrounds the source (the default prompt adds nothing).
        self.template = resolve_prompt(self.prompt)

    # ------------------------------------------------------------------ description (goes into signatures)
    def describe(self) -> dict:
        return {"chat": self.use_chat, "prompt": self.template}

    # ------------------------------------------------------------------ tokens
    def tokens(self, text: str) -> list[int]:
        """The token ids of a user text. Special-token strings in it (a literal ``[MASK]`` or ``[SEP]``) are
        tokenized as plain text (``split_special_tokens``), never as the model's own control tokens: a candidate
        that says "[MASK]" must not hand the model a mask to fill. :func:`special_strings` finds them for a
        warning."""
        ids = self._cache.get(text)
        if ids is None:
            ids = []
            if text:
                tok = self.model.tokenizer
                try:
                    enc = tok(text, add_special_tokens=False, verbose=False, split_special_tokens=True)
                except (
                    TypeError
                ):  # a tokenizer without the option: specials stay specials (and are warned of)
                    enc = tok(text, add_special_tokens=False, verbose=False)
                ids = list(enc["input_ids"])
            self._cache[text] = ids
        return ids

    def special_strings(self, text: str) -> list[str]:
        """The model's special-token strings that occur literally in ``text``."""
        specials = getattr(self.model.tokenizer, "all_special_tokens", None) or []
        return sorted({t for t in specials if t and t in text})

    def unk_count(self, text: str) -> tuple[int, int]:
        """(unknown tokens, tokens) of a user text."""
        unk = getattr(self.model.tokenizer, "unk_token_id", None)
        ids = self.tokens(text)
        return (sum(1 for i in ids if i == unk) if unk is not None else 0), len(ids)

    def _raw(self, text: str) -> list[int]:
        return (
            list(self.model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
            if text
            else []
        )

    # ------------------------------------------------------------------ templates
    def _chat_pieces(self, with_source: bool) -> _Template:
        tok = self.model.tokenizer
        user = self.template.replace("{source}", _SRC) if with_source else ""
        text = tok.apply_chat_template(
            [{"role": "user", "content": user}, {"role": "assistant", "content": _CAND}], tokenize=False
        )
        if not isinstance(text, str) or _CAND not in text or (with_source and _SRC not in text):
            raise InputError(
                "the model's chat template does not keep the message text as it is; use chat=False"
            )
        if with_source:
            head, rest = text.split(_SRC, 1)
            mid, tail = rest.split(_CAND, 1)
            return _Template(self._raw(head), self._raw(mid), self._raw(tail))
        head, tail = text.split(_CAND, 1)
        return _Template([], self._raw(head), self._raw(tail))

    def _plain_pair(self) -> _Template:
        tok = self.model.tokenizer
        pre_s, post_s = self.template.split("{source}", 1)
        a, _ = self._probe_pair()
        if a is None:
            # no fast tokenizer: plain concatenation with a separator, no special tokens but BOS
            bos = [self.model.bos_token_id] if self.model.bos_token_id is not None else []
            a = _Template(bos, [], [])
        t = a
        middle = list(t.middle)
        if not middle:
            middle = self._separator(tok)
        return _Template(t.prefix + self._raw(pre_s), self._raw(post_s) + middle, list(t.suffix))

    def _separator(self, tok) -> list[int]:
        sep = self._raw("\n\n")
        unk = getattr(tok, "unk_token_id", None)
        if sep and (unk is None or unk not in sep):
            return sep
        if getattr(tok, "sep_token_id", None) is not None:
            return [int(tok.sep_token_id)]
        if self.model.eos_token_ids:
            return [int(self.model.eos_token_ids[0])]
        return []

    def _probe_pair(self) -> tuple[_Template | None, _Template | None]:
        """Read the tokenizer's pair and single templates from ``sequence_ids`` of a probe encoding."""
        tok = self.model.tokenizer
        try:
            pair = tok("a", "a")
            single = tok("a")
            sp, ss = pair.sequence_ids(), single.sequence_ids()
        except (AttributeError, ValueError, TypeError):
            return None, None
        ids_p, ids_s = list(pair["input_ids"]), list(single["input_ids"])
        return _split_by_sequence_ids(ids_p, sp), _split_by_sequence_ids(ids_s, ss)

    def pair_template(self) -> _Template:
        if self._pair is None:
            self._pair = self._chat_pieces(True) if self.use_chat else self._plain_pair()
        return self._pair

    def single_template(self) -> _Template:
        if self._single is None:
            if self.use_chat:
                self._single = self._chat_pieces(False)
            else:
                _, s = self._probe_pair()
                if s is None:
                    bos = [self.model.bos_token_id] if self.model.bos_token_id is not None else []
                    s = _Template([], bos, [])
                else:  # single template: prefix A suffix -> keep it as (middle before candidate, suffix)
                    s = _Template([], s.prefix, s.middle + s.suffix)
                self._single = s
        return self._single

    # ------------------------------------------------------------------ layouts
    def layout(self, kind: str, candidate: str, source: str | None) -> Layout:
        """The input for direction ``kind`` (``marginal``, ``cond`` or ``reverse``)."""
        cand = self.tokens(candidate)
        window = int(self.model.max_length)
        warnings: list[str] = []
        if kind == "marginal":
            t = self.single_template()
            fixed = len(t.middle) + len(t.suffix)
            cand = self._fit_candidate(cand, window - fixed, warnings)
            ids = t.middle + cand + t.suffix
            a = len(t.middle)
            return Layout(tuple(ids), (a, a + len(cand)), (a, a), tuple(warnings))
        if source is None:
            raise InputError(f"the {kind!r} direction needs a source")
        t = self.pair_template()
        src = self.tokens(source)
        fixed = len(t.prefix) + len(t.middle) + len(t.suffix)
        room = window - fixed - len(cand)
        if room < len(src):
            keep = max(0, room)
            warnings.append(
                f"source truncated from {len(src)} to {keep} tokens to fit the model window of {window}"
            )
            src = src[:keep]
        if fixed + len(src) + len(cand) > window:
            cand = self._fit_candidate(cand, window - fixed - len(src), warnings)
        ids = t.prefix + src + t.middle + cand + t.suffix
        s0 = len(t.prefix)
        c0 = s0 + len(src) + len(t.middle)
        return Layout(tuple(ids), (c0, c0 + len(cand)), (s0, s0 + len(src)), tuple(warnings))

    @staticmethod
    def _fit_candidate(cand: list[int], room: int, warnings: list[str]) -> list[int]:
        if len(cand) <= room:
            return cand
        keep = max(0, room)
        warnings.append(f"candidate truncated from {len(cand)} to {keep} tokens to fit the model window")
        return cand[:keep]


def _split_by_sequence_ids(ids: list[int], seq: list[int | None]) -> _Template:
    """prefix (specials before text 0), middle (between text 0 and text 1), suffix (after the last text)."""
    first0 = seq.index(0)
    last0 = len(seq) - 1 - seq[::-1].index(0)
    if 1 in seq:
        first1 = seq.index(1)
        last1 = len(seq) - 1 - seq[::-1].index(1)
        return _Template(ids[:first0], ids[last0 + 1 : first1], ids[last1 + 1 :])
    return _Template(ids[:first0], ids[last0 + 1 :], [])
