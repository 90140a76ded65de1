"""The mutable state of one sampled batch (:class:`Batch`): tokens, masks, per-row generators, the forward pass
with its NFE read from the model's counter, and the per-step bookkeeping behind :class:`SamplingHistory`."""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch

from dlmeval.sampling.config import SamplerConfig
from dlmeval.seeding import derive_seed, torch_generator


class SamplerParts(Protocol):
    """What a :class:`Batch` reads of the sampler that runs it (:class:`~dlmeval.sampling.sampler.RemaskingSampler`,
    which imports this module: the dependency runs one way, #35)."""

    model: Any
    config: SamplerConfig
    strategy: Any
    block_causal: int | None
    softmask: Any


class Batch:
    """The mutable state of one batch, in generation coordinates ``[B, L]``."""

    def __init__(self, sampler: SamplerParts, ids, attn, prompt_ids, item_ids):
        m, cfg = sampler.model, sampler.config
        dev, n, length = m.device, len(prompt_ids), cfg.length
        self.model, self.ids, self.attn = m, ids, attn
        self.prompt_ids, self.item_ids = prompt_ids, item_ids
        plen = torch.tensor([len(p) for p in prompt_ids], dtype=torch.long, device=dev)
        self.gen_start = m.offset(attn).to(dev) + plen  # column of generated position 0, per row
        self.same_start = bool((self.gen_start == self.gen_start[0]).all())
        self.col = torch.arange(length, device=dev)
        self.gen_cols = self.gen_start.unsqueeze(1) + self.col
        self.gens = [torch_generator(derive_seed(cfg.seed, "sample", iid), device=dev) for iid in item_ids]
        self.tokens = torch.full((n, length), int(m.mask_token_id), dtype=torch.long, device=dev)
        self.masked = torch.ones((n, length), dtype=torch.bool, device=dev)
        self.prev_tok = torch.full((n, length), -1, dtype=torch.long, device=dev)  # last decided token
        self.decided_step = torch.full((n, length), -1, dtype=torch.long, device=dev)
        self.active = torch.ones(n, dtype=torch.bool, device=dev)
        self.stopped = torch.zeros(n, dtype=torch.bool, device=dev)
        self.nfe = torch.zeros(n, dtype=torch.long, device=dev)
        self.steps_taken = torch.zeros(n, dtype=torch.long, device=dev)
        if sampler.strategy.tracks_running:
            self.run_sum = torch.zeros((n, length), dtype=torch.float32, device=dev)
            self.run_cnt = torch.zeros((n, length), dtype=torch.float32, device=dev)
        self.hist: dict[str, list[torch.Tensor]] = {
            k: [] for k in ("forwarded", "passes", "unmasked", "remasked", "replaced", "stable", "changed")
        }
        self.block_causal = sampler.block_causal  # block size of block-causal passes, or None
        self.soft = sampler.softmask.start(self) if sampler.softmask is not None else None
        self.t = 0
        self.calls = 0
        self.timing = {"total_s": 0.0, "model_s": 0.0, "fields_s": 0.0}

    def forward(self, rows: torch.Tensor, sl: slice, rr: torch.Tensor, cc: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, V]`` of the current state for ``rows`` at block positions ``(rr, cc)`` (``rr`` indexes
        ``rows``, ``cc`` the columns of the block ``sl``), in that order; NFE read from the model's counter."""
        if self.same_start:
            s0 = int(self.gen_start[0])
            self.ids[:, s0 : s0 + self.tokens.shape[1]] = self.tokens
        else:
            self.ids.scatter_(1, self.gen_cols, self.tokens)
        everyone = rows.numel() == self.ids.shape[0]
        x, a = (self.ids, self.attn) if everyone else (self.ids[rows], self.attn[rows])
        pos = (rr, self.gen_start[rows][rr] + sl.start + cc)
        kw = {}
        if self.block_causal is not None:  # block diffusion: the prompt, finished blocks and this block only
            from dlmeval.sampling.block_causal import dllm_valid

            end = int(self.gen_start[0]) + sl.stop  # prompts are padded to whole blocks: one start for all
            x, a = x[:, :end], a[:, :end]
            # dllm's rule: a pad id before the current block is padding (in the prompt or decoded earlier)
            a = dllm_valid(x, a, self.model.pad_token_id, int(self.gen_start[0]) + sl.start)
            kw["block_size"] = self.block_causal
        if self.soft is not None:
            emb = self.soft.embeds(self, rows, x)
            if emb is not None:
                kw["inputs_embeds"] = emb
        nfe0, t0 = self.model.nfe, time.perf_counter()
        out = self.model.logits_at(x, a, pos, **kw)
        self.timing["model_s"] += time.perf_counter() - t0
        self.nfe[rows] += self.model.nfe - nfe0
        self.calls += 1
        return out

    # per-step bookkeeping: begin_step() opens a nominal step, note() adds what a pass did, end_step() records
    def begin_step(self) -> None:
        self.steps_taken += self.active.long()
        self._nfe0 = self.nfe.clone()
        self._start_masked = self.masked.clone()
        self._start_tokens = self.tokens.clone()
        zeros = torch.zeros_like(self.nfe)
        self._acc = {k: zeros.clone() for k in ("unmasked", "remasked", "replaced")}
        self._changed = torch.zeros_like(self.masked)

    def note(self, rows, sl, *, unmasked=None, remasked=None, replaced=None) -> None:
        for name, v in (("unmasked", unmasked), ("remasked", remasked)):
            if v is not None:
                self._acc[name][rows] += v.sum(1)
                self._changed[rows, sl] |= v
        if replaced is not None:
            self._acc["replaced"][rows] += replaced

    def end_step(self) -> None:
        passes = self.nfe - self._nfe0
        ran = passes > 0
        # stable token-step cells: generated positions decided before the step and holding the same token
        # after it, at the steps the row took part in
        kept = ~self._start_masked & ~self.masked & (self.tokens == self._start_tokens)
        stable = torch.where(ran, kept.sum(1), 0)
        for name, v in (("passes", passes), ("stable", stable), *self._acc.items()):
            self.hist[name].append(v)
        self.hist["forwarded"].append(ran)
        self.hist["changed"].append(self._changed)
        self.t += 1

    def stop_finished_rows(self, eos: torch.Tensor) -> None:
        """Stop rows whose first EOS is decided with every position before it decided."""
        is_eos = torch.isin(self.tokens, eos) & ~self.masked
        has = is_eos.any(1)
        first = torch.where(has, is_eos.long().argmax(1), self.tokens.shape[1])
        open_before = (self.masked & (self.col < first.unsqueeze(1))).any(1)
        stop = self.active & has & ~open_before
        if bool(stop.any()):
            self.active &= ~stop
            self.stopped |= stop
