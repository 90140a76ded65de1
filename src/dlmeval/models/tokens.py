"""Token facts read from a checkpoint's own files, and character spans without a fast tokenizer.

* :func:`special_ids_from_files` resolves the mask id and the EOS / end-of-turn set from the tokenizer, the model
  config and the generation config, with the family's constants used only as a fallback and then with a
  warning (the warnings are returned so that the adapter can show them in ``dlmeval check-model``);
* :func:`end_of_turn_ids` finds the token a chat template closes an assistant turn with (``<|im_end|>`` for
  Dream-Instruct, ``<|eot_id|>`` for LLaDA-Instruct) by rendering the template;
* :func:`char_spans` gives each token's ``(start, end)`` character span in the text it was encoded from: the
  tokenizer's own offsets when it is fast, otherwise by incremental decoding (Dream ships a slow tokenizer).

Nothing here knows a family: the loaders pass their fallback constants in.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any


def _ints(v: Any) -> list[int]:
    if v is None:
        return []
    if isinstance(v, int):
        return [int(v)]
    if isinstance(v, (list, tuple)):
        return [int(t) for t in v if isinstance(t, int)]
    return []


def vocab_id(tokenizer: Any, token: str) -> int | None:
    """The id of ``token`` in the tokenizer's vocabulary, or None (an unknown token maps to the unknown id)."""
    try:
        tid = tokenizer.convert_tokens_to_ids(token)
    except Exception:  # a tokenizer that cannot look a token up
        return None
    if not isinstance(tid, int) or isinstance(tid, bool):
        return None
    if tid == getattr(tokenizer, "unk_token_id", None) and token != getattr(tokenizer, "unk_token", None):
        return None
    return tid


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The special token(s) the chat template puts right after an assistant message's content (empty without a
    template)."""
    if not getattr(tokenizer, "chat_template", None):
        return []
    probe = "zqzq"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": probe}], tokenize=False
        )
    except Exception:  # a template that refuses this conversation: no end-of-turn known
        return []
    tail = text[text.rfind(probe) + len(probe) :]
    found = []
    specials = sorted(
        (str(t) for t in getattr(tokenizer, "all_special_tokens", ()) if str(t)), key=len, reverse=True
    )
    added = getattr(tokenizer, "added_tokens_encoder", {}) or {}
    names = sorted(set(specials) | {str(t) for t in added}, key=len, reverse=True)
    rest = tail.lstrip()
    for name in names:
        if name and rest.startswith(name):
            tid = tokenizer.convert_tokens_to_ids(name)
            if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None):
                found.append(int(tid))
            break
    return found


def special_ids_from_files(
    tokenizer: Any,
    config: Any,
    generation_config: Any = None,
    *,
    family: str,
    mask_override: int | None = None,
    eos_override: Sequence[int] | None = None,
    default_mask: int | None = None,
    default_eos: Sequence[int] = (),
    sources: Sequence[str] = ("config", "generation config", "tokenizer"),
    mask_token: str | None = None,
) -> tuple[int, tuple[int, ...], list[str]]:
    """``(mask_id, eos_ids, warnings)`` from the checkpoint's files; see the module doc. ``sources``: where a
    mask id is looked for, first found first (``config`` should be the config *file*'s values, not a config
    class that fills in its own defaults); ``mask_token``: the token text the family's own code makes the mask
    token, looked up in the vocabulary when no source names an id (before ``default_mask``, with a note)."""
    notes: list[str] = []
    n_tok = len(tokenizer) if hasattr(tokenizer, "__len__") else None

    # ---- mask
    tok_mask = getattr(tokenizer, "mask_token_id", None)
    cfg_mask = getattr(config, "mask_token_id", None)
    gen_mask = getattr(generation_config, "mask_token_id", None) if generation_config is not None else None
    found = {"config": cfg_mask, "generation config": gen_mask, "tokenizer": tok_mask}
    named = [(w, found[w]) for w in sources if isinstance(found.get(w), int)]
    if mask_override is not None:
        mask = int(mask_override)
    elif named:
        mask = int(named[0][1])
        if len({v for _, v in named}) > 1:
            notes.append(
                f"{family}: the mask id differs between "
                + ", ".join(f"{w} ({v})" for w, v in named)
                + f"; using the {named[0][0]}'s {mask}"
            )
    elif mask_token is not None and vocab_id(tokenizer, mask_token) is not None:
        mask = int(vocab_id(tokenizer, mask_token))
        notes.append(
            f"{family}: neither the config file nor the tokenizer names a mask id; using {mask_token} ({mask}) from "
            "the tokenizer's vocabulary, the mask token the family's own code sets"
        )
    elif default_mask is not None:
        mask = int(default_mask)
        notes.append(
            f"{family}: neither the tokenizer nor the config file names a mask token; using the family's "
            f"documented fallback mask id {mask} (check it, or pass the mask id explicitly)"
        )
    else:
        raise ValueError(f"{family}: no mask token id in the tokenizer or the config, and no default")
    if n_tok is not None and not 0 <= mask < n_tok:
        notes.append(f"{family}: mask id {mask} is outside the tokenizer's {n_tok} tokens")

    # ---- EOS / end of turn
    if eos_override is not None:
        eos = [int(t) for t in eos_override]
    else:
        eos = []
        for v in (
            getattr(tokenizer, "eos_token_id", None),
            getattr(generation_config, "eos_token_id", None) if generation_config is not None else None,
            getattr(config, "eos_token_id", None),
        ):
            eos += _ints(v)
        eos += end_of_turn_ids(tokenizer)
        if not eos:
            eos = [int(t) for t in default_eos]
            notes.append(
                f"{family}: no EOS in the tokenizer, generation config or chat template; using the family "
                f"defaults {eos}"
            )
    eos = list(dict.fromkeys(eos))
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=3)
    return mask, tuple(eos), notes


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def char_spans(tokenizer: Any, text: str, ids: Sequence[int]) -> list[tuple[int, int]]:
    """Each token's character span in ``text`` by incremental decoding; ``(0, 0)`` for special tokens (the unknown
    token excepted: it gets the text between its neighbours' spans). Works for any tokenizer that decodes; a
    piece that cannot be found in the text (normalisation beyond lower-casing) gets an empty span at the cursor.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    special = {int(t) for t in getattr(tokenizer, "all_special_ids", ())} - (
        {int(unk)} if unk is not None else set()
    )
    spans: list[tuple[int, int] | None] = [None] * len(ids)
    low = text.lower()
    cursor = 0
    prev = ""
    real: list[int] = []
    pending: list[int] = []
    unknown: list[int] = []
    for i, t in enumerate(ids):
        if int(t) in special:
            spans[i] = (0, 0)
            continue
        real.append(int(t))
        if unk is not None and int(t) == int(unk):
            unknown.append(i)
            prev = _decode(tokenizer, real)
            continue
        cur = _decode(tokenizer, real)
        if cur.endswith("\ufffd"):  # a character split over byte tokens: wait for its last byte
            pending.append(i)
            continue
        k = 0
        while k < min(len(cur), len(prev)) and cur[k] == prev[k]:
            k += 1
        piece = cur[k:].strip()
        prev = cur
        group, pending = pending + [i], []
        at = low.find(piece.lower(), cursor) if piece else -1
        if at < 0:
            for j in group:
                spans[j] = (cursor, cursor)
            continue
        for j in group:
            spans[j] = (at, at + len(piece))
        cursor = at + len(piece)
    for j in pending:
        spans[j] = (cursor, cursor)
    # unknown tokens: runs of them share the text between their resolved neighbours; the tokenizer's own split of
    # that text places each one when it yields as many pieces as the run has tokens
    runs: list[list[int]] = []
    for j in unknown:
        if runs and all(spans[k] == (0, 0) or k in runs[-1] for k in range(runs[-1][-1] + 1, j)):
            runs[-1].append(j)
        else:
            runs.append([j])
    for run in runs:
        before = [spans[k] for k in range(run[0]) if spans[k] and spans[k] != (0, 0)]
        after = [spans[k] for k in range(run[-1] + 1, len(ids)) if spans[k] and spans[k] != (0, 0)]
        lo = max([e for _, e in before] or [0])
        hi = min([a for a, _ in after] or [len(text)])
        gap = text[lo:hi]
        try:
            pieces = [p.strip() for p in tokenizer.tokenize(gap)]
        except Exception:  # a tokenizer that cannot split the gap alone: the run shares it
            pieces = []
        cur = 0
        placed = len(pieces) == len(run) and all(pieces)
        found = []
        for piece in pieces if placed else []:
            at = gap.lower().find(piece.lower(), cur)
            if at < 0:
                placed = False
                break
            found.append((lo + at, lo + at + len(piece)))
            cur = at + len(piece)
        if placed:
            for j, sp in zip(run, found):
                spans[j] = sp
            continue
        a = lo + (len(gap) - len(gap.lstrip()))
        b = hi - (len(gap) - len(gap.rstrip()))
        for j in run:
            spans[j] = (a, max(a, b))
    return [sp if sp is not None else (0, 0) for sp in spans]
