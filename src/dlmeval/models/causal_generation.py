"""The generation loop of :class:`dlmeval.models.causal.CausalLM` (KV-cached, greedy or sampled), kept apart from
the scoring passes: a prompt is a text or the token ids themselves, and each :class:`Generation` says which ids
it was conditioned on, so an attack optimised in token space is evaluated on exactly those ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dlmeval.errors import InputError
from dlmeval.models.devices import no_grad
from dlmeval.seeding import derive_seed, torch_generator

if TYPE_CHECKING:  # torch loads when a model generates, not when the layer is imported (#36)
    import torch

#: A prompt: a text (encoded with the model's special tokens) or its token ids (taken as given).
Prompt = str | Sequence[int]


@dataclass(frozen=True)
class Generation:
    """One generated continuation: ``text`` (decoded, cut at the first stop string), the generated ``token_ids``
    (before that cut, EOS excluded), per token its log-probability under the model's own distribution (``chosen``,
    untempered, whatever the sampling temperature) and the largest log-probability at that step (``max``).
    ``prompt_tokens``: how many prompt tokens it was conditioned on (fewer than the prompt has when it was cut to
    leave room for ``max_new_tokens``); ``prompt_ids``: those tokens."""

    text: str
    token_ids: list[int]
    chosen: np.ndarray
    max: np.ndarray
    prompt_tokens: int
    prompt_ids: tuple[int, ...] = field(default=(), compare=False)


def prompt_ids(model, prompt: Prompt) -> list[int]:
    """The token ids of a prompt: a text through ``model.encode``, a sequence of ids as given."""
    import torch

    if isinstance(prompt, str):
        return list(model.encode(prompt))
    if isinstance(prompt, torch.Tensor):
        prompt = prompt.reshape(-1).tolist()
    try:
        ids = [int(t) for t in prompt]
    except (TypeError, ValueError):
        raise InputError(
            f"a prompt must be a string or a sequence of token ids, got {type(prompt).__name__}"
        ) from None
    if not ids:
        raise InputError("a prompt of token ids must not be empty")
    return ids


def pick(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator) -> int:
    """The next token: argmax at temperature 0, else a draw from the tempered (nucleus) distribution."""
    import torch

    if temperature <= 0:
        return int(logits.argmax())
    p = torch.softmax(logits.double().cpu() / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = p.sort(descending=True)
        keep = sp.cumsum(0) - sp < top_p
        p = torch.zeros_like(p).scatter(0, si[keep], sp[keep])
        p = p / p.sum()
    return int(torch.multinomial(p, 1, generator=gen))


@no_grad
def generate_batch(
    model, prompts: Sequence[Prompt], item_ids, max_new, temperature, top_p, stop, seed, cache_kw: str
) -> list[Generation]:
    """One left-padded batch through the KV-cached loop of ``model`` (a CausalLM); ``cache_kw`` names the
    module's cache keyword."""
    import torch

    seqs = [prompt_ids(model, p)[-(model.max_length - max_new) :] for p in prompts]
    ids, attn = model.pad(seqs, side="left")  # every prompt ends in the last column
    gens = [torch_generator(derive_seed(seed, "generate", iid)) for iid in item_ids]
    b = ids.shape[0]
    new: list[list[int]] = [[] for _ in range(b)]
    chosen: list[list[float]] = [[] for _ in range(b)]
    best: list[list[float]] = [[] for _ in range(b)]
    done = [False] * b
    past = None
    cur_ids, cur_attn = ids, attn
    cur_pos = (attn.long().cumsum(-1) - 1).clamp(min=0)
    for _ in range(max_new):
        out = model.module(
            input_ids=cur_ids,
            attention_mask=cur_attn,
            position_ids=cur_pos,
            use_cache=True,
            **model._last_only(1),  # only the last position is read: no projection of the rest of the prompt
            **({cache_kw: past} if past is not None else {}),
        )
        model._count(b)
        past = getattr(out, cache_kw)
        logits = out.logits[:, -1].float()
        logp = torch.log_softmax(logits, dim=-1)
        top = logp.max(dim=-1).values.tolist()
        nxt = [pick(logits[r], temperature, top_p, gens[r]) for r in range(b)]
        for r, t in enumerate(nxt):
            if done[r]:
                continue
            if t in model.eos_token_ids:
                done[r] = True
                continue
            new[r].append(t)
            chosen[r].append(float(logp[r, t]))
            best[r].append(top[r])
            if stop and any(x in model.decode(new[r]) for x in stop):
                done[r] = True
        if all(done):
            break
        cur_ids = torch.tensor(nxt, device=model.device).unsqueeze(1)
        cur_attn = torch.cat([cur_attn, torch.ones(b, 1, dtype=cur_attn.dtype, device=model.device)], dim=1)
        cur_pos = cur_pos[:, -1:] + 1
    res = []
    for r in range(b):
        t = model.decode(new[r])
        for x in stop:
            k = t.find(x)
            if k >= 0:
                t = t[:k]
        res.append(
            Generation(
                t, list(new[r]), np.asarray(chosen[r]), np.asarray(best[r]), len(seqs[r]), tuple(seqs[r])
            )
        )
    return res
