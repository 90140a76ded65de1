"""Masked diffusion training for any :class:`~dlmeval.models.base.DiffusionLM` with trainable weights.

Per sequence a masking rate ``t`` is drawn, stratified across the batch (``t_i = eps + (1 - eps) * (i + u_i) / B``,
then shuffled), each eligible token is hidden independently with probability ``t``, and the loss is cross-entropy
on hidden tokens only:

* ``weighting="elbo"``: ``sum_hidden CE / t`` per sequence, divided by the number of eligible tokens of that
  sequence, averaged over sequences: the negative ELBO of masked diffusion per token (unbiased for
  ``E_t[...]``, but high variance from small ``t``);
* ``weighting="mean"`` (the default for training the shipped model): total CE over hidden tokens divided by the
  number of hidden tokens in the batch. Same minimiser per ``t``, much lower gradient variance.

Every random draw of step ``s`` comes from a generator seeded by ``(seed, s)`` and the data order of epoch ``e`` by
``(seed, e)``, so a run killed and resumed from its last checkpoint takes exactly the same steps.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from dlmeval.errors import InputError
from dlmeval.models.base import DiffusionLM
from dlmeval.seeding import derive_seed, torch_generator


# --------------------------------------------------------------------------------------------- the loss
def sample_rates(batch: int, gen: torch.Generator, eps: float = 1e-3) -> torch.Tensor:
    """Stratified rates in (eps, 1]: one draw in each of ``batch`` equal strata, in random order."""
    u = torch.rand(batch, generator=gen, dtype=torch.float64)
    strata = (torch.arange(batch, dtype=torch.float64) + u) / batch
    perm = torch.randperm(batch, generator=gen)
    return (eps + (1 - eps) * strata[perm]).float()


def sample_masks(eligible: torch.Tensor, rates: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Hide each eligible token independently with its row's rate; every row with an eligible token hides >= 1."""
    u = torch.rand(eligible.shape, generator=gen)
    hidden = (u < rates.unsqueeze(1)) & eligible
    # a row that drew nothing hides its eligible token with the smallest u (keeps every sequence in the loss)
    empty = (~hidden.any(1)) & eligible.any(1)
    if empty.any():
        masked_u = torch.where(eligible, u, torch.full_like(u, 2.0))
        first = masked_u.argmin(1)
        rows = empty.nonzero(as_tuple=True)[0]
        hidden[rows, first[rows]] = True
    return hidden


def diffusion_loss(
    model: DiffusionLM,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    eligible: torch.Tensor,
    hidden: torch.Tensor,
    rates: torch.Tensor,
    *,
    weighting: str = "mean",
) -> tuple[torch.Tensor, dict]:
    """Loss of one batch given its hidden-token pattern. Only hidden positions contribute."""
    if weighting not in ("mean", "elbo"):
        raise InputError(f"weighting must be 'mean' or 'elbo', got {weighting!r}")
    noisy = torch.where(hidden, torch.full_like(input_ids, model.mask_token_id), input_ids)
    sc = model.score_positions(noisy, attention_mask, hidden, input_ids, grad=torch.is_grad_enabled())
    ce = -sc.logprob  # [N] in row-major order of `hidden`
    n_hidden = hidden.sum(1)
    if weighting == "mean":
        loss = ce.sum() / n_hidden.sum().clamp(min=1)
    else:
        per_row = torch.zeros(hidden.shape[0], device=ce.device).index_add(0, sc.batch_index, ce)
        n_elig = eligible.sum(1).clamp(min=1)
        used = eligible.any(1)
        loss = (per_row / rates.to(ce.device) / n_elig)[used].mean()
    correct = (
        (sc.top_ids[:, 0] == input_ids[sc.batch_index, sc.position]).float()
        if sc.top_ids is not None
        else None
    )
    stats = {"hidden": int(n_hidden.sum()), "ce_sum": float(ce.detach().sum())}
    if correct is not None:
        stats["correct"] = float(correct.sum())
    return loss, stats


# --------------------------------------------------------------------------------------------- data
@dataclass
class Example:
    ids: list[int]
    eligible: list[bool]


def pack_documents(model: DiffusionLM, docs: Sequence[str], seq_len: int) -> list[Example]:
    """Tokenize documents and pack them into rows of exactly ``seq_len`` tokens (last row may be shorter).

    Rows are ``[CLS] tokens... [SEP] tokens...`` for BERT-style tokenizers (documents joined by the separator); every
    non-special token is eligible for masking.
    """
    tok = model.tokenizer
    cls_id = getattr(tok, "cls_token_id", None)
    sep_id = getattr(tok, "sep_token_id", None)
    if sep_id is None:
        sep_id = model.eos_token_ids[0] if model.eos_token_ids else model.pad_token_id
    body = seq_len - (1 if cls_id is not None else 0)
    if body < 4:
        raise InputError(f"seq_len {seq_len} is too short")
    stream: list[int] = []
    for d in docs:
        stream.extend(tok(d, add_special_tokens=False)["input_ids"])
        stream.append(sep_id)
    rows = []
    for s in range(0, len(stream), body):
        chunk = stream[s : s + body]
        ids = ([cls_id] if cls_id is not None else []) + chunk
        rows.append(Example(ids, [i != cls_id and i != sep_id for i in ids]))
    return rows


class _Window:
    """The model seen with a shorter window: the scorer's truncation rule applied at ``max_length`` tokens."""

    def __init__(self, model: DiffusionLM, max_length: int):
        self._model = model
        self.max_length = int(max_length)

    def __getattr__(self, name):
        return getattr(self._model, name)


def conditional_examples(
    model: DiffusionLM,
    pairs: Sequence[dict],
    max_len: int | None = None,
    *,
    chat: bool | None = False,
    prompt: str | None = None,
) -> list[Example]:
    """``{source, target}`` pairs laid out exactly as DiffScore's ``cond`` direction scores them; only the target
    tokens are eligible for masking (the paper's ``mask_prompt_loss``: the source is context, never a target).

    The rows come from the scorer's own :class:`dlmeval.scoring.configs.PairFormatter` with the same ``chat`` /
    ``prompt`` settings (``chat=None``: the model's chat template when it has one, as the scorer's default), so a
    training row and the row ``DiffScorer(model, chat=chat, prompt=prompt)`` scores for that pair are the same
    token sequence. ``max_len`` below the model's window applies the scorer's truncation at ``max_len`` tokens
    (the source is cut from its end first).
    """
    from dlmeval.scoring.configs import PairFormatter

    window = int(model.max_length)
    view = _Window(model, max_len) if max_len is not None and int(max_len) < window else model
    fmt = PairFormatter(view, prompt=prompt, chat=chat)
    out = []
    for n, p in enumerate(pairs):
        if (
            not isinstance(p, dict)
            or not isinstance(p.get("source"), str)
            or not isinstance(p.get("target"), str)
        ):
            raise InputError(f"pair {n}: expected an object with text fields 'source' and 'target'")
        lay = fmt.layout("cond", p["target"], p["source"])
        a, b = lay.candidate
        if b <= a:
            raise InputError(
                f"pair {n}: empty target"
                if not fmt.tokens(p["target"])
                else f"pair {n}: no room for the target"
            )
        out.append(Example(list(lay.ids), [a <= i < b for i in range(len(lay.ids))]))
    return out


def collate(model: DiffusionLM, batch: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids, attn = model.pad([e.ids for e in batch])
    elig = torch.zeros_like(ids, dtype=torch.bool)
    for i, e in enumerate(batch):
        n = len(e.ids)
        if model.padding_side == "left":
            elig[i, ids.shape[1] - n :] = torch.tensor(e.eligible)
        else:
            elig[i, :n] = torch.tensor(e.eligible)
    return ids, attn, elig


# --------------------------------------------------------------------------------------------- trainer
@dataclass
class TrainConfig:
    steps: int = 1000
    batch_size: int = 32
    grad_accum: int = 1
    seq_len: int = 128
    lr: float = 3e-4  # encoder
    lr_head: float | None = None  # new head (default: lr)
    lr_embeddings: float | None = None  # input embeddings, tied to the decoder (default: lr)
    weight_decay: float = 0.01
    warmup: int = 100
    min_lr_ratio: float = 0.1
    clip: float = 1.0
    weighting: str = "mean"
    eps: float = 1e-3
    seed: int = 0
    eval_every: int = 100
    eval_rates: tuple[float, ...] = (0.15, 0.5, 0.9)
    eval_batches: int = 4
    checkpoint_every: int = 50
    lora: bool = False
    lora_r: int = 8
    lora_alpha: float = 16
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] | None = None
    extra: dict = field(default_factory=dict)


def lr_lambda(cfg: TrainConfig):
    def f(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / max(1, cfg.warmup)
        prog = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * prog))

    return f


def apply_lora(model: DiffusionLM, cfg: TrainConfig):
    """Freeze the base weights and inject LoRA layers (peft) into the model's module, in place; returns the
    ``LoraConfig`` (:func:`dlmeval.models.adapters.attach_lora`)."""
    from dlmeval.models.adapters import attach_lora

    return attach_lora(
        model,
        r=cfg.lora_r,
        alpha=cfg.lora_alpha,
        dropout=cfg.lora_dropout,
        targets=cfg.lora_targets,
        seed=derive_seed(cfg.seed, "lora-init"),
    )


def param_groups(model: DiffusionLM, cfg: TrainConfig) -> list[dict]:
    emb = model.input_embeddings().weight
    head_ids = set()
    heads = [getattr(model.module, attr, None) for attr in ("cls", "lm_head", "head")]
    out_emb = getattr(model.module, "get_output_embeddings", None)
    heads.append(out_emb() if callable(out_emb) else None)  # LLaDA's head is transformer.ff_out
    for m in heads:
        if m is not None:
            head_ids |= {id(p) for p in m.parameters()}
    groups = {"embeddings": [], "head": [], "encoder": [], "no_decay": []}
    seen = set()
    for p in model.module.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        if p is emb:
            groups["embeddings"].append(p)
        elif id(p) in head_ids:
            groups["head"].append(p)
        elif p.ndim < 2:
            groups["no_decay"].append(p)
        else:
            groups["encoder"].append(p)
    out = [
        {"params": groups["encoder"], "lr": cfg.lr, "name": "encoder"},
        {"params": groups["no_decay"], "lr": cfg.lr, "weight_decay": 0.0, "name": "no_decay"},
        {"params": groups["head"], "lr": cfg.lr_head or cfg.lr, "name": "head"},
        {"params": groups["embeddings"], "lr": cfg.lr_embeddings or cfg.lr, "name": "embeddings"},
    ]
    return [g for g in out if g["params"]]


class Trainer:
    """Masked diffusion training with checkpoints every ``checkpoint_every`` steps and exact resume."""

    def __init__(
        self,
        model: DiffusionLM,
        train: Sequence[Example],
        heldout: Sequence[Example],
        cfg: TrainConfig,
        out_dir: str | Path,
        *,
        log=print,
    ):
        if not train:
            raise InputError("no training examples")
        self.model, self.train_rows, self.heldout_rows, self.cfg = model, list(train), list(heldout), cfg
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = log
        self.lora_config = apply_lora(model, cfg) if cfg.lora else None
        self.opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(cfg))
        self.step = 0
        self.history: list[dict] = []

    # -- data order: epoch e is a permutation seeded by (seed, "epoch", e)
    def _batch_indices(self, step: int, micro: int) -> list[int]:
        n = len(self.train_rows)
        bs = self.cfg.batch_size
        start = (step * self.cfg.grad_accum + micro) * bs
        idx = []
        for k in range(start, start + bs):
            e, r = divmod(k, n)
            perm = self._perm(e)
            idx.append(int(perm[r]))
        return idx

    def _perm(self, epoch: int) -> torch.Tensor:
        cache = getattr(self, "_perm_cache", None)
        if cache is None or cache[0] != epoch:
            g = torch_generator(derive_seed(self.cfg.seed, "epoch", epoch))
            self._perm_cache = (epoch, torch.randperm(len(self.train_rows), generator=g))
        return self._perm_cache[1]

    # -- checkpoints
    @property
    def ckpt_path(self) -> Path:
        return self.out / "checkpoint.pt"

    def save_checkpoint(self) -> None:
        state = {
            "step": self.step,
            "model": self._model_state(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict(),
            "history": json.dumps(self.history),
            "config": json.dumps(asdict(self.cfg)),
        }
        tmp = self.ckpt_path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(self.ckpt_path)  # atomic: a kill never leaves a half-written checkpoint

    def _model_state(self) -> dict:
        """The weights a resume needs: all of them, or with LoRA only the adapters (the base is frozen; an 8B
        base would otherwise be written at every checkpoint)."""
        if self.cfg.lora:
            return {n: p.detach() for n, p in self.model.module.named_parameters() if p.requires_grad}
        return dict(self.model.module.state_dict())

    def try_resume(self) -> bool:
        if not self.ckpt_path.exists():
            return False
        state = torch.load(self.ckpt_path, map_location="cpu", weights_only=True)
        saved_cfg = json.loads(state["config"])
        mine = json.loads(json.dumps(asdict(self.cfg)))
        if {k: v for k, v in saved_cfg.items() if k != "steps"} != {
            k: v for k, v in mine.items() if k != "steps"
        }:
            raise InputError(f"{self.ckpt_path} was written with another configuration; use a fresh --out")
        self.model.module.load_state_dict(state["model"], strict=not self.cfg.lora)
        self.opt.load_state_dict(state["opt"])
        self.sched.load_state_dict(state["sched"])
        self.step = int(state["step"])
        self.history = json.loads(state["history"])
        self.model.invalidate_identity()
        return True

    # -- evaluation: fixed masks per (seed, rate, batch)
    @torch.no_grad()
    def evaluate(self) -> dict:
        return evaluate_rows(
            self.model,
            self.heldout_rows,
            self.cfg.eval_rates,
            batch_size=self.cfg.batch_size,
            max_batches=self.cfg.eval_batches,
            seed=self.cfg.seed,
        )

    def train_step(self) -> dict:
        cfg = self.cfg
        self.model.train_mode(True)
        self.opt.zero_grad(set_to_none=True)
        tot = {"hidden": 0, "ce_sum": 0.0, "correct": 0.0, "tokens": 0}
        for micro in range(cfg.grad_accum):
            rows = [self.train_rows[i] for i in self._batch_indices(self.step, micro)]
            ids, attn, elig = collate(self.model, rows)
            g = torch_generator(derive_seed(cfg.seed, "step", self.step, micro))
            rates = sample_rates(len(rows), g, cfg.eps)
            hidden = sample_masks(elig.cpu(), rates, g).to(ids.device)
            # dropout (the model's and LoRA's) draws from torch's global generator, which takes no generator
            # argument: it is forked and seeded by (seed, step, micro-batch), so a run and its resumption drop
            # the same units and the caller's global RNG is left as it was
            devices = [ids.device.index or 0] if ids.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(derive_seed(cfg.seed, "dropout", self.step, micro))
                loss, st = diffusion_loss(self.model, ids, attn, elig, hidden, rates, weighting=cfg.weighting)
                (loss / cfg.grad_accum).backward()
            tot["hidden"] += st["hidden"]
            tot["ce_sum"] += st["ce_sum"]
            tot["tokens"] += int(attn.sum())
        gn = torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], cfg.clip)
        self.opt.step()
        self.sched.step()
        self.step += 1
        self.model.train_mode(False)
        self.model.invalidate_identity()
        return {
            "step": self.step,
            "loss": tot["ce_sum"] / max(1, tot["hidden"]),
            "grad_norm": float(gn),
            "tokens": tot["tokens"],
            "lr": self.sched.get_last_lr()[0],
        }

    def fit(self, *, progress: bool = True, stop_at: int | None = None) -> list[dict]:
        """Train to ``cfg.steps`` (or stop after step ``stop_at`` of that schedule; a later call continues)."""
        from dlmeval.progress import progress_bar

        end = min(self.cfg.steps, stop_at or self.cfg.steps)
        resumed = self.try_resume()
        if resumed:
            self.log(f"resumed from {self.ckpt_path} at step {self.step}")
        t0 = time.time()
        toks = 0
        with progress_bar("training", total=self.cfg.steps, completed=self.step, enabled=progress) as bar:
            while self.step < end:
                rec = self.train_step()
                toks += rec["tokens"]
                rec["tokens_per_s"] = toks / max(1e-9, time.time() - t0)
                if self.step % self.cfg.eval_every == 0 or self.step == end:
                    if self.heldout_rows:
                        rec["eval"] = self.evaluate()
                    self.log(json.dumps(rec))
                self.history.append(rec)
                if self.step % self.cfg.checkpoint_every == 0 or self.step == end:
                    self.save_checkpoint()
                bar.update(1, info=f"loss {rec['loss']:.3f} | {rec['tokens_per_s']:.0f} tok/s")
        return self.history


@torch.no_grad()
def evaluate_rows(
    model: DiffusionLM,
    rows: Sequence[Example],
    rates: Sequence[float],
    *,
    batch_size: int = 32,
    max_batches: int | None = None,
    seed: int = 0,
) -> dict:
    """Masked-token NLL and top-1 accuracy at fixed rates, with masks seeded by (seed, rate, batch)."""
    model.train_mode(False)
    res = {}
    nb = math.ceil(len(rows) / batch_size)
    if max_batches is not None:
        nb = min(nb, max_batches)
    for r in rates:
        nll = correct = n = 0.0
        for b in range(nb):
            chunk = rows[b * batch_size : (b + 1) * batch_size]
            ids, attn, elig = collate(model, chunk)
            g = torch_generator(derive_seed(seed, "eval", r, b))
            hidden = sample_masks(elig.cpu(), torch.full((len(chunk),), float(r)), g).to(ids.device)
            noisy = torch.where(hidden, torch.full_like(ids, model.mask_token_id), ids)
            sc = model.score_positions(noisy, attn, hidden, ids, top_k=1)
            nll += float(-sc.logprob.sum())
            correct += float((sc.top_ids[:, 0] == ids[sc.batch_index, sc.position]).sum())
            n += sc.logprob.numel()
        res[f"{r:g}"] = {"nll": nll / max(1, n), "acc": correct / max(1, n), "tokens": int(n)}
    return res
