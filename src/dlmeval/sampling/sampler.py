"""The remasking sampler: masked diffusion generation over any :class:`~dlmeval.models.base.DiffusionLM`, with
actual forward passes counted per row and a compact per-step history (churn statistics)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import DiffusionLM, length_sorted_batches
from dlmeval.sampling.block_causal import block_layout, block_setup
from dlmeval.sampling.config import (
    SamplerConfig,
    dream_transfer_count,
    dream_transfer_probability,
    linear_schedule,
    paper_remask_k,
    paper_window_start,
    predict_nfe,
    steps_for_nfe,
)
from dlmeval.sampling.fields import step_fields
from dlmeval.sampling.noise import gumbel, gumbel_noise_width, row_uniforms, top_k_mask
from dlmeval.sampling.results import SampleResult, SamplingHistory
from dlmeval.sampling.state import Batch
from dlmeval.sampling.strategies import StepView, get_strategy

Prompt = str | Sequence[int] | torch.Tensor


# --------------------------------------------------------------------------------------------- sampler
class RemaskingSampler:
    """Masked diffusion sampling with a remasking strategy, over any :class:`DiffusionLM`.

    >>> from dlmeval.models import tiny_model
    >>> sampler = RemaskingSampler(tiny_model("llada"), SamplerConfig(length=8, steps=8, strategy="low_confidence"))
    >>> res = sampler.sample(["the river", "a king"], item_ids=["a", "b"])
    >>> len(res.texts), res.nfe.tolist()                 # re-masked tokens are decoded again: real passes counted
    (2, [15, 15])

    ``SamplerConfig(nfe=N, steps=None)`` is the compute-matched mode: the nominal steps are chosen so that the
    strategy spends ``N`` forward passes per row (see :func:`~dlmeval.sampling.config.steps_for_nfe`);
    ``sampler.config.steps`` holds them, ``sampler.nfe_predicted`` what the count rules promise.
    """

    def __init__(
        self, model: DiffusionLM, config: SamplerConfig | None = None, *, softmask=None, **overrides: Any
    ):
        config = config or SamplerConfig()
        if overrides:
            config = replace(config, **overrides)
        # a block-diffusion family is sampled block-causally (its block size by default): dlmeval.sampling.block
        config, block_causal = block_setup(model, config)
        self.model = model
        #: soft-mask feedback (:class:`dlmeval.sampling.softmask.SoftMask`): given, else the model's own (a
        #: soft-masked checkpoint's settings, ``model.softmask``), else None
        self.softmask = softmask if softmask is not None else getattr(model, "softmask", None)
        #: the block size of block-causal passes (:mod:`dlmeval.sampling.block`) or None (bidirectional)
        self.block_causal: int | None = block_causal
        self.strategy = get_strategy(config.strategy, remask_fraction=config.remask_fraction)
        self.time_conditioned = bool(getattr(model, "time_conditioned", False))
        if config.schedule is None:  # the family's own schedule; Dream's loop never re-masks
            native = str(getattr(model, "native_schedule", "linear"))
            config = replace(config, schedule="linear" if self.strategy.remasks else native)
        kw = dict(
            strategy=config.strategy,
            block_length=config.block_length,
            remask_fraction=config.remask_fraction,
            accounting=config.accounting,
            time_conditioned=self.time_conditioned,
            schedule=config.schedule,
        )
        self.nfe_target = config.nfe
        if config.nfe is not None:
            steps, self.nfe_predicted = steps_for_nfe(config.nfe, config.length, **kw)
            self.config = config.with_steps(steps)
        else:
            self.config = config
            self.nfe_predicted = predict_nfe(config.length, config.steps, **kw)
        dev = model.device
        banned = {int(model.mask_token_id)}
        if config.suppress_eos:
            banned |= set(model.eos_token_ids)
        self._banned = torch.tensor(sorted(banned), dtype=torch.long, device=dev)
        self._eos = torch.tensor(sorted(set(model.eos_token_ids)), dtype=torch.long, device=dev)

    @property
    def _needs_decode(self) -> frozenset[str]:
        """The fields of a decode pass (paper accounting): what the unmasking order reads, and ``confidence``
        for running means."""
        extra = {"confidence"} if self.strategy.tracks_running else set()
        return frozenset(self.strategy.needs) | extra

    @property
    def _needs_refill(self) -> frozenset[str]:
        """The fields of a refill-accounting pass: everything the strategy reads, from the one pass."""
        return self.strategy.all_needs

    def config_dict(self) -> dict[str, Any]:
        """The settings as run (nominal steps resolved; ``nfe`` is the compute-matched target or None)."""
        out = {**self.config.as_dict(), "nfe": self.nfe_target}
        if self.softmask is not None:
            out["softmask"] = self.softmask.as_dict()
        if self.block_causal is not None:
            out["attention"] = "block-causal"
        return out

    # ------------------------------------------------------------------ prompts
    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt. A string is encoded with the family's special tokens, minus trailing EOS ids
        (a BERT-style ``[SEP]`` would end the text before it starts); token ids are taken as given."""
        if isinstance(prompt, str):
            ids = self.model.encode(prompt)
            eos = set(self.model.eos_token_ids)
            while ids and ids[-1] in eos:
                ids.pop()
            return ids
        if isinstance(prompt, torch.Tensor):
            prompt = prompt.reshape(-1).tolist()
        try:
            return [int(t) for t in prompt]
        except (TypeError, ValueError):
            raise InputError(
                f"a prompt must be a string or a sequence of token ids, got {type(prompt).__name__}"
            ) from None

    # ------------------------------------------------------------------ entry point
    def sample(
        self,
        prompts: Prompt | Sequence[Prompt],
        *,
        item_ids: Sequence[Any] | None = None,
        batch_size: int | None = None,
    ) -> SampleResult:
        """Sample one continuation of ``config.length`` tokens per prompt.

        Row ``b`` draws from a generator seeded by ``derive_seed(config.seed, "sample", item_ids[b])`` (item ids
        default to the prompt's index), so a sample does not depend on the rest of its batch. ``batch_size``
        splits the prompts into length-sorted batches; results come back in input order.
        """
        if isinstance(prompts, torch.Tensor) and prompts.dim() == 2:
            prompts = list(prompts)  # [B, P] ids: one prompt per row
        if isinstance(prompts, str | torch.Tensor) or (
            isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], int)
        ):
            prompts = [prompts]  # one prompt
        prompts = list(prompts)
        if not prompts:
            raise InputError("no prompts to sample from; pass at least one (an empty string for none)")
        ids = [self.encode_prompt(p) for p in prompts]
        if item_ids is None:
            iids = [str(i) for i in range(len(ids))]
        else:
            iids = [str(i) for i in item_ids]
            if len(iids) != len(ids):
                raise InputError(f"{len(iids)} item ids for {len(ids)} prompts; give one id per prompt")
            if len(set(iids)) != len(iids):
                raise InputError("item ids must be unique: each one seeds its own row's generator")
        batches = self.batches([len(x) for x in ids], batch_size)
        if len(batches) == 1:
            return self._sample_batch(ids, iids)
        parts = []
        for idx in batches:
            parts.append((idx, self._sample_batch([ids[i] for i in idx], [iids[i] for i in idx])))
        return SampleResult.merge(parts, len(ids))

    @staticmethod
    def batches(lengths: Sequence[int], batch_size: int | None) -> list[list[int]]:
        """The batches :meth:`sample` cuts ``len(lengths)`` prompts into (prompt token counts ``lengths``): all of
        them in input order when they fit one batch, else length-sorted batches of ``batch_size``. The rule reads
        only the prompts and ``batch_size``, so a data-parallel run that shares these batches among its ranks
        forwards exactly the batches of one process."""
        if batch_size is not None and batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        if batch_size is None or batch_size >= len(lengths):
            return [list(range(len(lengths)))]
        return list(length_sorted_batches(list(lengths), batch_size=batch_size))

    # ------------------------------------------------------------------ one batch
    @torch.no_grad()
    def _sample_batch(self, prompt_ids: list[list[int]], item_ids: list[str]) -> SampleResult:
        t_start = time.perf_counter()
        m, cfg = self.model, self.config
        length = cfg.length
        width = max(len(p) for p in prompt_ids) + length
        if width > m.max_length:
            raise InputError(
                f"a prompt of {width - length} tokens plus {length} generated tokens exceeds the model's window "
                f"of {m.max_length}; shorten the prompt or the length"
            )
        ids, attn = self._pad_batch(prompt_ids)
        st = Batch(self, ids, attn, prompt_ids, item_ids)
        if cfg.schedule == "dream":
            block_loop = self._dream_block
        else:
            block_loop = self._paper_block if cfg.accounting == "paper" else self._refill_block
        for j, s_b in enumerate(cfg.block_steps()):
            block_loop(st, j, s_b)
            if not bool(st.active.any()):
                break
        while st.t < cfg.steps:  # every row stopped: the remaining nominal steps are recorded as skipped
            st.begin_step()
            st.end_step()
        st.timing["total_s"] = time.perf_counter() - t_start
        return self._result(st)

    def _pad_batch(self, prompt_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` of the prompts followed by the masked generation region (block
        diffusion: prompts left-padded to whole blocks, :func:`dlmeval.sampling.block_causal.block_layout`)."""
        mask_id = int(self.model.mask_token_id)
        rows = [p + [mask_id] * self.config.length for p in prompt_ids]
        if self.block_causal is not None:
            return block_layout(self.model, prompt_ids, rows, self.block_causal, self.config.length)
        return self.model.pad(rows)

    @property
    def _can_stop(self) -> bool:
        return self.config.stop_at_eos and self._eos.numel() > 0

    def _steps(self, st: Batch, s_b: int):
        """The nominal steps of a block, each opened and recorded in ``st``; ends early once every row stopped.
        After a step, rows whose text can no longer change stop (a re-masking strategy only at the block's end,
        since re-masking could still change the text)."""
        for i in range(s_b):
            if not bool(st.active.any()):
                return
            st.begin_step()
            yield i
            st.end_step()
            if self._can_stop and (i == s_b - 1 or not self.strategy.remasks):
                st.stop_finished_rows(self._eos)

    def _paper_block(self, st: Batch, j: int, s_b: int) -> None:
        """One block under the paper's accounting (see :mod:`dlmeval.sampling.config`)."""
        strat, blk = self.strategy, self.config.block
        sl = slice(j * blk, (j + 1) * blk)
        sched = linear_schedule(blk, s_b)
        k = paper_remask_k(strat.remask_fraction, blk) if strat.remasks else 0
        w0 = paper_window_start(strat.remask_fraction, blk, s_b) if strat.remasks else None
        waiting = torch.zeros_like(st.nfe)
        for i in self._steps(st, s_b):
            last = i == s_b - 1
            n_masked = st.masked[:, sl].sum(1)
            k_un = torch.minimum(sched[i] + waiting, n_masked)
            need = st.active.clone() if self.time_conditioned else st.active & (k_un > 0)
            if bool(need.any()):  # the decode pass (a step with nothing to decode is skipped)
                rows = need.nonzero().squeeze(1)
                self._decode(st, rows, k_un[rows], sl, block=j, block_step=i, block_steps=s_b)
            waiting = torch.zeros_like(st.nfe)
            in_window = w0 is not None and i >= w0
            decided = st.active & (~st.masked[:, sl]).any(1)
            if bool(decided.any()) and (strat.scoring == "every" or in_window):
                rows = decided.nonzero().squeeze(1)
                k_re = torch.full_like(rows, k if in_window else 0)
                if strat.scoring == "none":  # random: no pass, its own generator chooses
                    n_rem = self._remask_unscored(st, rows, k_re, sl)
                else:  # the scoring pass
                    n_rem = self._score_and_remask(st, rows, k_re, sl, block=j, block_step=i, block_steps=s_b)
                waiting[rows] = n_rem
            if last and bool((waiting > 0).any()):  # the drain pass: decode what the last step re-masked
                rows = (st.active & (waiting > 0)).nonzero().squeeze(1)
                k_all = st.masked[rows, sl].sum(1)
                self._decode(st, rows, k_all, sl, block=j, block_step=i, block_steps=s_b)

    def _dream_block(self, st: Batch, j: int, s_b: int) -> None:
        """One block under Dream's own loop (``diffusion_generate``): every step is a forward pass, even one that
        decodes nothing; step ``i`` decodes ``int(M * (1 - s / t))`` of the ``M`` masked positions (all at the
        last step), or, for a strategy that transfers by coin flips (``origin``), each masked position with
        probability ``1 - s / t``."""
        cfg, blk = self.config, self.config.block
        sl = slice(j * blk, (j + 1) * blk)
        bernoulli = self.strategy.transfer == "bernoulli"
        for i in self._steps(st, s_b):
            rows = st.active.nonzero().squeeze(1)
            if bernoulli:
                k_un = st.masked[rows, sl].sum(1)
                p = dream_transfer_probability(i, s_b, cfg.eps)
            else:
                counts = st.masked[rows, sl].sum(1).tolist()
                per = {c: dream_transfer_count(c, i, s_b, cfg.eps) for c in set(counts)}  # rows share counts
                k_un = torch.tensor([per[c] for c in counts], device=rows.device)
                p = None
            self._decode(st, rows, k_un, sl, transfer_p=p, block=j, block_step=i, block_steps=s_b)

    def _refill_block(self, st: Batch, j: int, s_b: int) -> None:
        """One block under the refill accounting: re-masked tokens are refilled inside the nominal budget."""
        strat, blk = self.strategy, self.config.block
        sl = slice(j * blk, (j + 1) * blk)
        sched = linear_schedule(blk, s_b)
        zeros = torch.zeros_like(st.nfe)
        refill = zeros
        for i in self._steps(st, s_b):
            last = i == s_b - 1
            n_masked = st.masked[:, sl].sum(1)
            k_un = torch.minimum(sched[i] + refill, n_masked)
            k_re = zeros
            if strat.remasks and not last and strat.remask_fraction > 0:
                k_re = torch.floor(strat.remask_fraction * (blk - n_masked).double() + 1e-9).long()
            need = st.active.clone() if self.time_conditioned else st.active & ((k_un > 0) | (k_re > 0))
            refill = zeros
            if bool(need.any()):  # a step that changes nothing is skipped: no forward pass, no NFE
                rows = need.nonzero().squeeze(1)
                n_rem = self._decode(
                    st, rows, k_un[rows], sl, k_re=k_re[rows], block=j, block_step=i, block_steps=s_b
                )
                refill = zeros.clone()
                refill[rows] = n_rem

    # ------------------------------------------------------------------ passes
    def _view(self, st, rows, sl, tok_w, msk_w, cand, rr, cc, fields, vocab, gens, **where) -> StepView:
        n_r = rows.numel()
        return StepView(
            tokens=tok_w,
            masked=msk_w,
            decided=~msk_w,
            candidates=cand,
            region_rows=rr,
            region_cols=cc,
            fields=fields,
            vocab_size=vocab,
            temperature=float(self.config.temperature),
            uniform=lambda: row_uniforms(gens, [1] * n_r, self.config.block, device=self.model.device),
            step=st.t,
            strategy=self.strategy.name,
            **where,
        )

    def _decode(
        self,
        st: Batch,
        rows: torch.Tensor,
        k_un: torch.Tensor,
        sl: slice,
        *,
        k_re: torch.Tensor | None = None,
        transfer_p: float | None = None,
        block: int,
        block_step: int,
        block_steps: int,
    ) -> torch.Tensor:
        """A decode pass for ``rows``: unmask ``k_un`` masked positions of the block ``sl`` (with ``transfer_p``,
        each masked position with that probability instead: Dream's ``origin``). Under the refill accounting
        (``k_re`` given) it also re-masks ``k_re`` decided tokens chosen from the same logits. Returns the
        re-mask count per row."""
        m, strat, cfg = self.model, self.strategy, self.config
        dev, blk, n_r = m.device, cfg.block, rows.numel()
        temp, pos_temp = float(cfg.temperature), float(cfg.position_temperature)
        tok_w, msk_w = st.tokens[rows, sl], st.masked[rows, sl]
        dec_w = ~msk_w
        remask_now = k_re is not None and strat.remasks and bool((k_re > 0).any())
        refill_scores = k_re is not None and (strat.tracks_running or remask_now)
        # the positions that matter: masked ones (row-major), then decided ones when the strategy reads them
        rr, cc = msk_w.nonzero(as_tuple=True)
        n_m = int(rr.numel())
        if refill_scores:
            dr, dc = dec_w.nonzero(as_tuple=True)
            rr, cc = torch.cat([rr, dr]), torch.cat([cc, dc])
        flat = st.forward(rows, sl, rr, cc)  # [N, V] logits at (rr, cc) only
        if st.soft is not None:  # soft-mask feedback: this pass's distributions at the masked positions
            st.soft.record(rows, sl, rr[:n_m], cc[:n_m], flat[:n_m])
        gens = [st.gens[r] for r in rows.tolist()]
        u = None
        if temp > 0:  # one row of uniforms per masked position, in row-major order like (rr, cc)
            u = row_uniforms(gens, msk_w.sum(1).tolist(), gumbel_noise_width(flat.shape[1]), device=dev)
        needs = self._needs_refill if k_re is not None else self._needs_decode
        t0 = time.perf_counter()
        cand_flat, fields = step_fields(
            flat,
            n_masked=n_m,
            current=tok_w[rr, cc],
            banned=self._banned,
            temperature=temp,
            uniforms=u,
            needs=needs,
            top_p=float(cfg.top_p),
            top_k=cfg.top_k,
        )
        st.timing["fields_s"] += time.perf_counter() - t0
        vocab = int(flat.shape[1])
        del flat
        cand = tok_w.clone()
        cand[rr, cc] = cand_flat
        where = dict(block=block, block_step=block_step, block_steps=block_steps)
        view = self._view(st, rows, sl, tok_w, msk_w, cand, rr, cc, fields, vocab, gens, **where)
        if refill_scores and strat.tracks_running:  # this step's probability of every decided token
            rs = torch.where(
                dec_w, st.run_sum[rows, sl] + torch.nan_to_num(view.confidence), st.run_sum[rows, sl]
            )
            rc = st.run_cnt[rows, sl] + dec_w.float()
            view._running = torch.where(dec_w, rs / rc.clamp(min=1), torch.nan)
            st.run_sum[rows, sl], st.run_cnt[rows, sl] = rs, rc

        rem = torch.zeros_like(msk_w)
        if remask_now:
            assert k_re is not None
            rem = top_k_mask(torch.where(dec_w, strat.remask_scores(view).double(), -math.inf), k_re)
        if transfer_p is not None:  # coin flips from the rows' own generators
            flips = row_uniforms(gens, [1] * n_r, blk, device=dev)
            unm = msk_w & (flips < transfer_p)
        else:
            sc = strat.unmask_scores(view).double()
            if pos_temp > 0:
                sc = sc / pos_temp + gumbel(row_uniforms(gens, [1] * n_r, blk, device=dev))
            sc = torch.nan_to_num(
                sc, nan=-1e300, posinf=1e300, neginf=-1e300
            )  # every masked position eligible
            unm = self._unmask_choice(sc, msk_w, k_un, cand)

        prev_w = st.prev_tok[rows, sl]
        replaced = unm & (prev_w >= 0) & (prev_w != cand)
        if st.soft is not None:
            st.soft.forget(rows, sl, unm)
        st.tokens[rows, sl] = torch.where(unm, cand, tok_w).masked_fill(rem, m.mask_token_id)
        st.masked[rows, sl] = (msk_w & ~unm) | rem
        st.prev_tok[rows, sl] = torch.where(unm, cand, prev_w)
        st.decided_step[rows, sl] = torch.where(unm, st.t, st.decided_step[rows, sl]).masked_fill(rem, -1)
        if (
            strat.tracks_running
        ):  # a newly decided token starts its mean at the probability it was chosen with
            conf = torch.nan_to_num(view.confidence)
            st.run_sum[rows, sl] = torch.where(unm, conf, st.run_sum[rows, sl]).masked_fill(rem, 0.0)
            st.run_cnt[rows, sl] = torch.where(unm, 1.0, st.run_cnt[rows, sl]).masked_fill(rem, 0.0)
        n_rem = rem.sum(1)
        st.note(rows, sl, unmasked=unm, remasked=rem, replaced=replaced.sum(1))
        return n_rem

    def _unmask_choice(self, sc, msk_w, k_un, cand) -> torch.Tensor:
        """The ``k_un`` highest-scoring masked positions per row; with ``eos_rank_last`` positions whose
        candidate is EOS/EoT come only after every other masked position."""
        if not self.config.eos_rank_last or self._eos.numel() == 0:
            return top_k_mask(torch.where(msk_w, sc, -math.inf), k_un)
        is_eos = torch.isin(cand, self._eos) & msk_w
        other = msk_w & ~is_eos
        k_other = torch.minimum(k_un, other.sum(1))
        first = top_k_mask(torch.where(other, sc, -math.inf), k_other)
        return first | top_k_mask(torch.where(is_eos, sc, -math.inf), k_un - k_other)

    def _score_and_remask(
        self,
        st: Batch,
        rows: torch.Tensor,
        k_re: torch.Tensor,
        sl: slice,
        *,
        block: int,
        block_step: int,
        block_steps: int,
    ) -> torch.Tensor:
        """The scoring pass (paper accounting): the strategy's fields over the sequence after this step's
        unmasking, running means updated, then ``k_re`` positions re-masked. Returns the re-mask count."""
        strat = self.strategy
        tok_w, msk_w = st.tokens[rows, sl], st.masked[rows, sl]
        dec_w = ~msk_w
        pool = torch.ones_like(msk_w) if strat.remask_pool == "block" else dec_w
        rr, cc = pool.nonzero(as_tuple=True)
        flat = st.forward(rows, sl, rr, cc)
        needs = frozenset(strat.remask_needs) | ({"confidence"} if strat.tracks_running else set())
        t0 = time.perf_counter()
        _, fields = step_fields(
            flat,
            n_masked=0,
            current=tok_w[rr, cc],
            banned=self._banned,
            temperature=float(self.config.temperature),
            uniforms=None,
            needs=needs,
        )
        st.timing["fields_s"] += time.perf_counter() - t0
        vocab = int(flat.shape[1])
        del flat
        gens = [st.gens[r] for r in rows.tolist()]
        where = dict(block=block, block_step=block_step, block_steps=block_steps)
        view = self._view(st, rows, sl, tok_w, msk_w, tok_w, rr, cc, fields, vocab, gens, **where)
        if strat.tracks_running:
            rs = st.run_sum[rows, sl] + torch.where(dec_w, torch.nan_to_num(view.confidence), 0.0)
            rc = st.run_cnt[rows, sl] + dec_w.float()
            st.run_sum[rows, sl], st.run_cnt[rows, sl] = rs, rc
            view._running = torch.where(dec_w, rs / rc.clamp(min=1), torch.nan)
        if not bool((k_re > 0).any()):
            st.note(rows, sl)
            return torch.zeros_like(k_re)
        picked = top_k_mask(torch.where(pool, strat.remask_scores(view).double(), -math.inf), k_re)
        return self._apply_remask(st, rows, sl, picked & dec_w)

    def _remask_unscored(self, st: Batch, rows: torch.Tensor, k_re: torch.Tensor, sl: slice) -> torch.Tensor:
        """Re-masking chosen without the model (``random``): no forward pass."""
        gens = [st.gens[r] for r in rows.tolist()]
        dec_w = ~st.masked[rows, sl]
        scores = row_uniforms(gens, [1] * rows.numel(), self.config.block, device=self.model.device)
        picked = top_k_mask(torch.where(dec_w, scores, -math.inf), k_re)
        return self._apply_remask(st, rows, sl, picked & dec_w)

    def _apply_remask(self, st: Batch, rows: torch.Tensor, sl: slice, rem: torch.Tensor) -> torch.Tensor:
        m = self.model
        st.tokens[rows, sl] = st.tokens[rows, sl].masked_fill(rem, m.mask_token_id)
        st.masked[rows, sl] = st.masked[rows, sl] | rem
        st.decided_step[rows, sl] = st.decided_step[rows, sl].masked_fill(rem, -1)
        if self.strategy.tracks_running:
            st.run_sum[rows, sl] = st.run_sum[rows, sl].masked_fill(rem, 0.0)
            st.run_cnt[rows, sl] = st.run_cnt[rows, sl].masked_fill(rem, 0.0)
        st.note(rows, sl, remasked=rem)
        return rem.sum(1)

    def _result(self, st: Batch) -> SampleResult:
        m = self.model
        eos = set(m.eos_token_ids)
        tok = st.tokens.masked_fill(st.masked, m.pad_token_id).cpu().numpy()
        token_ids = []
        for row in tok.tolist():
            cut = next((k for k, v in enumerate(row) if v in eos), len(row))
            token_ids.append(row[:cut])
        hist = {
            k: torch.stack(v).cpu().numpy().astype(np.bool_ if k in ("forwarded", "changed") else np.int32)
            for k, v in st.hist.items()
        }
        return SampleResult(
            item_ids=list(st.item_ids),
            prompt_ids=[list(p) for p in st.prompt_ids],
            tokens=tok,
            token_ids=token_ids,
            texts=[m.decode(ids) for ids in token_ids],
            nfe=st.nfe.cpu().numpy(),
            steps_taken=st.steps_taken.cpu().numpy(),
            stopped_at_eos=st.stopped.cpu().numpy(),
            nfe_calls=st.calls,
            history=SamplingHistory(**hist, decided_step=st.decided_step.cpu().numpy().astype(np.int32)),
            config=self.config_dict(),
            nfe_predicted=self.nfe_predicted,
            timing=st.timing,
        )


def sample(model: DiffusionLM, prompts, config: SamplerConfig | None = None, **kw) -> SampleResult:
    """One-call form: ``sample(model, ["The cat"], SamplerConfig(length=32, steps=32))``; ``item_ids=`` and
    ``batch_size=`` go to :meth:`RemaskingSampler.sample`, other keywords override the config."""
    call = {k: kw.pop(k) for k in ("item_ids", "batch_size") if k in kw}
    return RemaskingSampler(model, config, **kw).sample(prompts, **call)
