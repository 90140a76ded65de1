"""Autoregressive models behind one interface: per-token log-probabilities, generation, hidden states.

The generation loop is :mod:`dlmeval.models.causal_generation`; loading (a directory, a GGUF file, the embedded
SmolLM2 default) is :mod:`dlmeval.models.causal_loading`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dlmeval.errors import InputError
from dlmeval.models.base import ModelIdentity, _PassCounts, _TokenizerMixin, model_identity, no_grad
from dlmeval.models.causal_generation import Generation, Prompt, generate_batch

if TYPE_CHECKING:  # torch loads when a model is used, not when the layer is imported (#36)
    import torch

# Padded prefix tokens per multiple-choice batch on a CPU (CausalLM.choice_logprobs): larger batches were slower
# there (the expanded KV cache of every choice outgrows the caches); benchmarks/bench_choice_batching.py.
CPU_CHOICE_TOKENS = 1024


class CausalLM(_TokenizerMixin, _PassCounts):
    """An autoregressive LM. ``nfe`` counts forward calls (a generation step with a KV cache is one call)."""

    family = "causal"

    def __init__(
        self,
        module,
        tokenizer,
        *,
        name: str,
        source: str,
        device: torch.device,
        dtype: torch.dtype,
        max_length: int,
        weights_sha256: str | None = None,
    ):
        self.module, self.tokenizer, self.name, self.source = module, tokenizer, name, source
        self.device, self.dtype, self.max_length = device, dtype, int(max_length)
        self.padding_side = "right"
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        self.pad_token_id = int(pad)
        self.eos_token_ids = tuple(t for t in (tokenizer.eos_token_id,) if t is not None)
        self.bos_token_id = tokenizer.bos_token_id
        self.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
        self.nfe = 0
        self.rows_forwarded = 0
        self._sha = weights_sha256
        self._keeps_last: bool | None = None  # whether the module takes logits_to_keep (read on first use)

    # ------------------------------------------------------------------ identity
    def identity(self) -> ModelIdentity:
        return model_identity(self, self.dtype, extra=getattr(self, "identity_extra", None))

    def input_embeddings(self):
        return self.module.get_input_embeddings()

    def chat(self, user: str) -> str:
        """The prompt text for one user turn through the model's chat template (unchanged if it has none)."""
        if not self.has_chat_template:
            return user
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        *,
        inputs_embeds=None,
        output_hidden_states=False,
        output_attentions=False,
        logits_to_keep: int = 0,
        position_ids=None,
    ):
        """The module's output. ``logits_to_keep=K > 0`` asks for the logits of the last ``K`` positions only
        (where the module supports it: check :meth:`keeps_last_logits`). Left-padded rows need ``position_ids``
        that skip the padding: given, or derived from the mask when the model pads on the left."""
        x = input_ids if input_ids is not None else inputs_embeds
        if x.shape[1] > self.max_length:
            raise InputError(f"{x.shape[1]} tokens exceed the model's window of {self.max_length}")
        kw = self._last_only(logits_to_keep) if logits_to_keep > 0 else {}
        if position_ids is not None:
            kw["position_ids"] = position_ids
        elif attention_mask is not None and self.padding_side == "left":
            kw["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        if output_attentions:
            kw["output_attentions"] = True
        out = self.module(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            **kw,
        )
        self._count(int(x.shape[0]))
        return out

    def keeps_last_logits(self) -> bool:
        """Whether the module can return the logits of the last positions only (``logits_to_keep``); read off the
        module's signature once."""
        if self._keeps_last is None:
            self._keeps_last = _takes(self.module, "logits_to_keep")
        return self._keeps_last

    def _last_only(self, k: int) -> dict[str, int]:
        """The module keyword asking for the last ``k`` positions' logits, where the module takes it."""
        return {"logits_to_keep": int(k)} if self.keeps_last_logits() else {}

    @no_grad
    def token_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``[B, L]`` float32: log p(token i | tokens < i); position 0 (and padding) is NaN."""
        import torch

        logits = self.forward(input_ids, attention_mask).logits.float()
        lp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        out = torch.full(input_ids.shape, float("nan"), device=lp.device)
        out[:, 1:] = lp
        return out.masked_fill(attention_mask == 0, float("nan"))

    @no_grad
    def hidden_states(self, input_ids, attention_mask):
        return tuple(
            h.float()
            for h in self.forward(input_ids, attention_mask, output_hidden_states=True).hidden_states
        )

    def split_tokens(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """``(context tokens, continuation tokens)`` by the lm-evaluation-harness convention: encode the whole
        string; the context's tokens are the longest prefix of it that the context alone encodes to."""
        whole = self.encode(context + continuation)
        ctx = self.encode(context)
        n = len(ctx)
        while n > 0 and whole[:n] != ctx[:n]:
            n -= 1
        return whole[:n], whole[n:]

    @no_grad
    def dropped_context_tokens(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[int]:
        """How many tokens :meth:`continuation_logprobs` drops from the start of each context to fit the window
        (0: none), so that a caller can say which scores were computed on a cut conditioning text."""
        out = []
        for c, x in zip(contexts, continuations):
            ctx, cont = self.split_tokens(c, x)
            if not ctx and self.bos_token_id is not None:
                ctx = [self.bos_token_id]
            out.append(max(0, len(ctx) + len(cont) - self.max_length))
        return out

    def continuation_logprobs(
        self, contexts: Sequence[str], continuations: Sequence[str], *, batch_size: int = 16
    ) -> list[np.ndarray]:
        """Per-token log-probabilities of each continuation given its context (only continuation tokens).

        A context with no tokens is given the BOS token (or the first continuation token is not scored when the
        tokenizer has none). Inputs longer than the window lose tokens from the context's start
        (:meth:`dropped_context_tokens` says how many).
        """

        if len(contexts) != len(continuations):
            raise InputError("contexts and continuations differ in length")
        seqs, starts = [], []
        for c, x in zip(contexts, continuations):
            ctx, cont = self.split_tokens(c, x)
            if not ctx and self.bos_token_id is not None:
                ctx = [self.bos_token_id]
            ids = (ctx + cont)[-self.max_length :]
            seqs.append(ids)
            starts.append(max(1, len(ids) - len(cont)))
        return [chosen for chosen, _ in self.tail_logprobs(seqs, starts, batch_size=batch_size)]

    @no_grad
    def tail_logprobs(
        self, seqs: Sequence[Sequence[int]], starts: Sequence[int], *, batch_size: int = 16
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each token list ``seqs[i]``: ``(chosen, max)``, float64 arrays of log p(token j | tokens < j) and of
        the largest log-probability at that step, for j from ``starts[i]`` (at least 1) to the list's end.

        Rows go length-sorted into batches of ``batch_size``. Where the module can return the last positions'
        logits only (:meth:`keeps_last_logits`), the rows are left-padded so that every tail ends in the last
        column, and only the positions read are projected onto the vocabulary; otherwise right padding and every
        position. Same numbers either way up to float rounding."""
        import torch

        from dlmeval.models.base import length_sorted_batches

        if len(seqs) != len(starts):
            raise InputError(f"{len(seqs)} sequences but {len(starts)} start positions")
        lean = self.keeps_last_logits()
        out: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0), np.zeros(0))] * len(seqs)
        for batch in length_sorted_batches([len(s) for s in seqs], batch_size=batch_size):
            ids, attn = self.pad([seqs[i] for i in batch], side="left" if lean else "right")
            width = ids.shape[1]
            first_read = {i: max(1, int(starts[i])) for i in batch}
            keep = max(max(len(seqs[i]) - first_read[i] + 1 for i in batch), 1) if lean else width
            keep = min(keep, width)
            logits = self.forward(
                ids,
                attn,
                logits_to_keep=keep if lean else 0,
                position_ids=(attn.cumsum(-1) - 1).clamp(min=0) if lean else None,
            ).logits.float()
            # kept column c predicts padded column width - keep + c + 1
            lp = torch.log_softmax(logits[:, :-1], dim=-1)
            tgt = ids[:, width - keep + 1 :]
            chosen = lp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1).double().cpu().numpy()
            mx = lp.max(dim=-1).values.double().cpu().numpy()
            for r, i in enumerate(batch):
                n = len(seqs[i])
                col0 = (width - n) if lean else 0  # padded column of the row's token 0
                # token j sits at padded column col0 + j and is read from kept column col0 + j - 1 - (width - keep)
                a = col0 + first_read[i] - 1 - (width - keep)
                b = col0 + n - 1 - (width - keep)
                if b > a:
                    out[i] = (chosen[r, a:b].copy(), mx[r, a:b].copy())
        return out

    @no_grad
    def shared_context_logprobs(self, context: str, continuations: Sequence[str]) -> list[np.ndarray]:
        """:meth:`continuation_logprobs` for several continuations of one context (multiple choice): one request
        of :meth:`choice_logprobs`."""
        return self.choice_logprobs([(context, continuations)])[0]

    @no_grad
    def choice_logprobs(
        self,
        requests: Sequence[tuple[str, Sequence[str]]],
        *,
        batch_size: int = 16,
        max_tokens: int | None = None,
    ) -> list[list[np.ndarray]]:
        """Per-token log-probabilities of each continuation of each ``(context, continuations)`` request (multiple
        choice over many items), as :meth:`continuation_logprobs` gives them, with the tokens a request's
        continuations share run once and their KV cache reused: about ``k`` times fewer tokens through the model
        for ``k`` choices of a long prompt.

        Requests go through the model together, sorted by the length of their shared prefix, up to
        ``batch_size`` of them and ``max_tokens`` padded prefix tokens per batch (default: 1,024 on a CPU, where
        larger batches were slower, see ``benchmarks/bench_choice_batching.py``; unbounded elsewhere): two forward
        passes per batch (the left-padded prefixes, then every remainder of every request in one batch over the
        expanded KV cache), counted in ``nfe``. A request whose inputs need truncating, whose continuations share no
        token, or that has a single continuation goes through :meth:`continuation_logprobs`, as does everything
        when the module takes no cache. Same numbers up to float rounding."""
        from dlmeval.models.base import length_sorted_batches

        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        if max_tokens is None and self.device.type == "cpu":
            max_tokens = CPU_CHOICE_TOKENS
        out: list[list[np.ndarray]] = [[] for _ in requests]
        plans: dict[int, tuple[list[tuple[list[int], int]], int]] = {}  # request -> (sequences, shared)
        plain: list[int] = []
        for r, (context, conts) in enumerate(requests):
            seqs = []
            for ctx, cont in (self.split_tokens(context, x) for x in conts):
                if not ctx and self.bos_token_id is not None:
                    ctx = [self.bos_token_id]
                seqs.append((ctx + cont, len(ctx)))
            if not seqs:
                continue
            # the prefix never passes a context's end: every continuation token is scored
            shared = min(n for _, n in seqs)
            first = seqs[0][0]
            while shared > 0 and any(s[:shared] != first[:shared] for s, _ in seqs):
                shared -= 1
            if shared < 1 or max(len(s) for s, _ in seqs) > self.max_length or len(seqs) < 2:
                plain.append(r)
            else:
                plans[r] = (seqs, shared)
        order = list(plans)
        lengths = [plans[r][1] for r in order]
        cached = True  # until a prefix pass shows that the module keeps no usable cache
        for batch in length_sorted_batches(lengths, batch_size=batch_size, max_tokens=max_tokens):
            rs = [order[i] for i in batch]
            got = self._shared_prefix_batch([plans[r] for r in rs]) if cached else None
            if got is None:
                cached = False
                plain += rs
                continue
            for r, lps in zip(rs, got):
                out[r] = lps
        if plain:
            flat = [(r, c) for r in plain for c in requests[r][1]]
            lps = self.continuation_logprobs(
                [requests[r][0] for r, _ in flat], [c for _, c in flat], batch_size=batch_size
            )
            for (r, _), lp in zip(flat, lps):
                out[r].append(lp)
        return out

    def _shared_prefix_batch(self, plans: list[tuple[list[tuple[list[int], int]], int]]):
        """The two passes of :meth:`choice_logprobs` for one batch of requests; None without a usable cache."""
        import torch

        dev = self.device
        g = len(plans)
        p = max(shared for _, shared in plans)
        ids = torch.full((g, p), self.pad_token_id, dtype=torch.long, device=dev)
        attn = torch.zeros((g, p), dtype=torch.long, device=dev)
        for i, (seqs, shared) in enumerate(plans):  # left padding: every prefix ends at column p - 1
            ids[i, p - shared :] = torch.tensor(seqs[0][0][:shared], device=dev)
            attn[i, p - shared :] = 1
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        out = self.module(
            input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, **self._last_only(1)
        )
        self._count(g)
        past = getattr(out, _cache_kw(), None)
        if past is None or not hasattr(past, "batch_select_indices"):
            return None
        last = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # row i predicts its token `shared`
        rows = [(i, s[shared:]) for i, (seqs, shared) in enumerate(plans) for s, _ in seqs]
        m = max(len(rest) for _, rest in rows)
        lp_rest = None
        if m > 1:  # the remainders' own tokens (all but each one's last) predict the tokens after them
            k = len(rows)
            owner = torch.tensor([i for i, _ in rows], device=dev)
            rids = torch.full((k, m - 1), self.pad_token_id, dtype=torch.long, device=dev)
            rattn = torch.zeros((k, m - 1), dtype=torch.long, device=dev)
            for j, (_, rest) in enumerate(rows):
                n = len(rest) - 1
                if n > 0:
                    rids[j, :n] = torch.tensor(rest[:n], device=dev)
                    rattn[j, :n] = 1
            past.batch_select_indices(owner)
            starts = torch.tensor([plans[i][1] for i, _ in rows], device=dev)
            rpos = starts.unsqueeze(1) + torch.arange(m - 1, device=dev).unsqueeze(0)
            out2 = self.module(
                input_ids=rids,
                attention_mask=torch.cat([attn[owner], rattn], dim=1),
                position_ids=rpos,
                use_cache=True,
                **{_cache_kw(): past},
            )
            self._count(k)
            lp_rest = torch.log_softmax(out2.logits.float(), dim=-1)  # [k, m - 1, V]
        results: list[list[np.ndarray]] = [[] for _ in plans]
        j = 0
        for i, (seqs, shared) in enumerate(plans):
            for seq, n_ctx in seqs:
                vals = []
                for t in range(n_ctx, len(seq)):  # scored tokens: the continuation's
                    rel = t - shared  # index of token t inside the remainder
                    if rel == 0:
                        vals.append(float(last[i, seq[t]]))
                    else:
                        assert lp_rest is not None
                        vals.append(float(lp_rest[j, rel - 1, seq[t]]))
                results[i].append(np.asarray(vals, dtype=np.float64))
                j += 1
        return results

    # ------------------------------------------------------------------ generation
    @no_grad
    def generate(self, prompts: Sequence[Prompt], **kw: Any) -> list[str]:
        """Greedy (temperature 0) or sampled continuations; row i's draws come from (seed, item_ids[i]). A prompt
        is a text or its token ids (taken as given: an attack optimised in token space). Takes the keywords of :meth:`generate_scored` (``max_new_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``,
        ``item_ids``, ``batch_size``) and returns the texts."""
        return [g.text for g in self.generate_scored(prompts, **kw)]

    @no_grad
    def generate_scored(
        self,
        prompts: Sequence[Prompt],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        seed: int = 0,
        item_ids: Sequence[str] | None = None,
        batch_size: int = 8,
    ) -> list[Generation]:
        """Greedy (temperature 0) or sampled continuations, row i's draws from (seed, item_ids[i]), keeping each
        generated token's log-probability under the model (untempered) and the largest log-probability at its
        step, read off the logits the generation computed anyway (see :class:`Generation`). A prompt is a text or
        its token ids; each result names the ids it was conditioned on (``prompt_ids``)."""
        item_ids = list(item_ids) if item_ids is not None else [str(i) for i in range(len(prompts))]
        outs: list[Generation | None] = [None] * len(prompts)
        for s in range(0, len(prompts), batch_size):
            idx = list(range(s, min(len(prompts), s + batch_size)))
            res = generate_batch(
                self,
                [prompts[i] for i in idx],
                [item_ids[i] for i in idx],
                max_new_tokens,
                temperature,
                top_p,
                stop,
                seed,
                _cache_kw(),
            )
            for i, r in zip(idx, res):
                outs[i] = r
        return outs  # type: ignore[return-value]


def _takes(module, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


@functools.cache
def _cache_kw() -> str:
    """transformers 5 renamed ``past_key_values`` to ``cache``; support both (read once, when a model first
    generates: importing this module loads no transformers)."""
    import inspect

    from transformers import LlamaForCausalLM

    return "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


class HFCausalLM(CausalLM):
    family = "hf-causal"
