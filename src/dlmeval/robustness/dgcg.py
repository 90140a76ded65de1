"""D-GCG: greedy coordinate gradient adversarial suffixes for diffusion LMs, and standard GCG for the AR partner.

An attack item is a prompt split around the suffix slot, ``before + suffix + after``, and a target answer. The
optimizer *raises* the loss of the target (the paper's Eq. 5: "maximizes the model's difficulty in predicting the
target"):

* diffusion LM (D-GCG): the sequence ``[before; s; after; y]``; each step samples one timestep ``t ~ U(0, 1)`` and
  one mask ``m ~ Bernoulli(t)`` over the target positions (at least one: when none is drawn, one target position
  is masked uniformly at random) and uses ``L = -sum_{i: m_i} log p(y_i | y_{\\m}, [x; s])`` (Eq. 6) both for the
  gradient and for judging that step's candidate swaps;
* causal LM (GCG): ``L = -log p(y | before + s + after)``, summed over target tokens (deterministic).

Gradients reach the discrete suffix through a one-hot matrix ``E [K, V]`` and the input embedding matrix,
``S = E @ W_e`` (App. C), fed as ``inputs_embeds``. Per step: the gradient ``dL/dE``; for each suffix position the
``top_k`` allowed tokens of largest gradient (first-order increase of the loss); ``search_width`` candidates, each
the current suffix with one random position set to a random token from that position's top-k; all candidates are
scored in batches and the suffix moves to the best one (standard GCG: always, even when no candidate beats the
current loss).

API
    ``GCGConfig(suffix_length=8, steps=50, top_k=64, search_width=64, eval_batch_size=32, ascii_only=True,
    retokenize_filter=True, eval_samples=8)``             frozen; ``.key``
    ``attack_item(model, user_text, target_text, item_id, wrap=None) -> AttackItem``  token ids of the pieces
    ``run_gcg(model, items, config, seed=0) -> list[GCGResult]``  D-GCG for a DiffusionLM, GCG for a CausalLM
    ``dgcg_loss(model, item, onehot, target_mask) -> Tensor``   the differentiable D-GCG loss (one mask)
    ``gcg_loss(model, item, onehot) -> Tensor``                 the differentiable AR loss
    ``allowed_tokens(model, ascii_only=True) -> Tensor``        the candidate vocabulary (no special tokens)
    ``degradation(clean_acc, attacked_acc, relative=True)``     accuracy drop caused by a suffix
    ``min_suffix_length(degradation_by_length, threshold=0.2)`` shortest suffix reaching the drop, or None
    ``summarize_gcg(results) -> dict``                          mean gradient norm, mean loss trajectory, ...
    ``append_suffix(text, suffix_text)``                        the text form (transfer to another model)

Outputs per item (:class:`GCGResult`): the suffix (ids and text), the prompt ids with the suffix in place (give
them to the sampler), the loss of the current suffix at every step (under that step's mask), the best candidate
loss, the gradient norm ``||dL/dE||_F`` per step, the sampled ``t`` and mask size per step, and an evaluation of the
initial and the final suffix on ``eval_samples`` fresh masks shared by both (common random numbers; one exact
value for the AR model). Accuracy degradation, the shortest suffix reaching a 20% drop and the transfer of DLM
suffixes to the AR model need generations: the protocol generates with ``prompt_ids`` (or ``append_suffix``) and
calls :func:`degradation` / :func:`min_suffix_length`.

Randomness: the initial suffix from ``derive_seed(seed, "dgcg", item_id, "init")``; step ``j``'s timestep, mask and
candidates from ``derive_seed(seed, "dgcg", item_id, j)``; evaluation masks from ``derive_seed(seed, "dgcg-eval",
item_id, i)``. A result is a function of (model, item, config, seed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import DiffusionLM
from dlmeval.seeding import derive_seed, torch_generator


# ---------------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class GCGConfig:
    """The search budget (defaults: the paper's App. C: 50 steps, top-k 64, suffix length 8)."""

    suffix_length: int = 8
    steps: int = 50
    top_k: int = 64
    search_width: int = 64  # candidate swaps evaluated per step
    eval_batch_size: int = 32  # rows per forward pass when scoring candidates
    ascii_only: bool = True  # candidate tokens decode to printable ASCII
    retokenize_filter: bool = True  # drop candidates whose decoded suffix re-encodes to other ids
    eval_samples: int = 8  # DLM: masks for the initial/final suffix evaluation

    def __post_init__(self) -> None:
        for name in ("suffix_length", "steps", "top_k", "search_width", "eval_batch_size", "eval_samples"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InputError(f"GCG {name} must be a positive integer, got {v!r}")

    @property
    def key(self) -> str:
        """Every setting that changes a result, ``eval_batch_size`` too: which candidates share a forward pass
        moves a loss in its last bits (robust-tiny, batch 32 vs 1: 9.940315246582031 vs 9.940314769744873) and a
        near-tie could pick another swap; it also sets the attack's forward-pass count."""
        return (
            f"gcg[K={self.suffix_length},steps={self.steps},topk={self.top_k},width={self.search_width}"
            f"{',ascii' if self.ascii_only else ''}{',retok' if self.retokenize_filter else ''}"
            f",evals={self.eval_samples},batch={self.eval_batch_size}]"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "key": self.key}


# ---------------------------------------------------------------------------------------------------- items
@dataclass(frozen=True)
class AttackItem:
    """Token ids: ``before + suffix + after`` is the prompt, ``target`` the answer whose loss is raised."""

    item_id: str
    before: tuple[int, ...]
    after: tuple[int, ...]
    target: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.target:
            raise InputError(f"item {self.item_id}: the target answer has no tokens")


def attack_item(
    model: Any,
    user_text: str,
    target_text: str,
    item_id: Any,
    *,
    wrap: Callable[[str], str] | None = None,
) -> AttackItem:
    """Split a user message for the attack: the suffix goes right after the user text, inside the chat template
    (``wrap``, e.g. :func:`dlmeval.tasks.chat_formatter`) when there is one.

    ``before`` is encoded with special tokens (a chat-templated one as the model encodes chat prompts,
    ``encode_chat``) and without trailing EOS ids (as the sampler encodes a prompt),
    ``after`` (the rest of the template) and ``target`` without special tokens. Give ``target_text`` the spacing
    it has after the prompt (e.g. ``" Paris"`` for a causal LM whose prompt ends in ``"Answer:"``).
    """
    wrapped = wrap(user_text) if wrap is not None else user_text
    at = wrapped.rfind(user_text)
    if at < 0:
        raise InputError("the chat template does not contain the user text; cannot place the suffix")
    cut = at + len(user_text)
    # a chat-templated prompt is encoded as the family's own code encodes it (BERT-Chat, A2D: no [CLS] / BOS
    # before the template), as the responder encodes the same prompt without a suffix
    enc = getattr(model, "encode_chat", None) if wrap is not None else None
    before = list(enc(wrapped[:cut]) if enc is not None else model.encode(wrapped[:cut]))
    eos = set(getattr(model, "eos_token_ids", ()))
    while before and before[-1] in eos:
        before.pop()
    after = model.encode(wrapped[cut:], add_special_tokens=False) if wrapped[cut:] else []
    target = model.encode(target_text, add_special_tokens=False)
    return AttackItem(str(item_id), tuple(before), tuple(after), tuple(target))


def append_suffix(text: str, suffix_text: str) -> str:
    """A suffix in text form after a user message (one space between): how a suffix found on one model is
    given to another (transfer) or to a generation API that takes text."""
    return f"{text.rstrip()} {suffix_text.strip()}"


# ---------------------------------------------------------------------------------------------------- vocabulary
_ALLOWED_CACHE: dict[tuple, tuple[Any, tuple[int, ...]]] = {}


def _allowed(tokenizer: Any, vocab_size: int, banned: tuple[int, ...], ascii_only: bool) -> tuple[int, ...]:
    key = (id(tokenizer), vocab_size, banned, ascii_only)
    hit = _ALLOWED_CACHE.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    ban = set(banned)
    texts = tokenizer.batch_decode([[i] for i in range(vocab_size)]) if ascii_only else None
    keep = []
    for i in range(vocab_size):
        if i in ban:
            continue
        if texts is not None:
            s = texts[i]
            if not s.strip() or not s.isascii() or not s.isprintable():
                continue
        keep.append(i)
    _ALLOWED_CACHE[key] = (tokenizer, tuple(keep))
    return tuple(keep)


def allowed_tokens(model: Any, *, ascii_only: bool = True) -> torch.Tensor:
    """Token ids a suffix may use: not special (nor the mask token); with ``ascii_only``, decoding to printable
    ASCII with a non-space character (GCG's usual filter)."""
    tok = model.tokenizer
    banned = {int(t) for t in getattr(tok, "all_special_ids", ())}
    if getattr(model, "mask_token_id", None) is not None:
        banned.add(int(model.mask_token_id))
    v = int(model.input_embeddings().weight.shape[0])
    keep = _allowed(tok, min(v, len(tok)), tuple(sorted(banned)), ascii_only)
    if not keep:
        raise InputError("no token of this vocabulary can be used in a suffix")
    return torch.tensor(keep, dtype=torch.long)


# ---------------------------------------------------------------------------------------------------- losses
def _layout(item: AttackItem, k: int) -> tuple[int, int, int]:
    """(suffix start, target start, sequence length)."""
    a = len(item.before)
    b = a + k + len(item.after)
    return a, b, b + len(item.target)


def _sequence(item: AttackItem, suffix: Sequence[int]) -> list[int]:
    return [*item.before, *[int(x) for x in suffix], *item.after, *item.target]


def _embed_with_onehot(model: Any, ids: torch.Tensor, onehot: torch.Tensor, start: int) -> torch.Tensor:
    emb = model.input_embeddings()
    base = emb(ids.unsqueeze(0))  # [1, L, H]
    suf = (onehot.to(emb.weight.dtype) @ emb.weight).unsqueeze(0)  # [1, K, H]
    k = onehot.shape[0]
    return torch.cat([base[:, :start], suf, base[:, start + k :]], dim=1)


def dgcg_loss(
    model: DiffusionLM, item: AttackItem, onehot: torch.Tensor, target_mask: torch.Tensor
) -> torch.Tensor:
    """``-sum_{i: m_i} log p(y_i | y_{\\m}, [x; s])`` with the suffix given as a (relaxed) one-hot ``[K, V]``.

    ``target_mask`` (bool ``[len(target)]``) says which target tokens are masked (and scored); the suffix enters
    as ``onehot @ W_e``, so the loss is differentiable in ``onehot`` (also off the simplex: the finite-difference
    test perturbs single entries).
    """
    k = onehot.shape[0]
    a, b, n = _layout(item, k)
    m = torch.as_tensor(target_mask, dtype=torch.bool).to(model.device)
    if m.shape != (len(item.target),):
        raise InputError(f"target_mask must have {len(item.target)} entries, got {tuple(m.shape)}")
    ids = torch.tensor(_sequence(item, [0] * k), dtype=torch.long, device=model.device)
    targets = ids.clone()
    cols = torch.arange(b, n, device=model.device)[m]
    ids[cols] = int(model.mask_token_id)
    embeds = _embed_with_onehot(model, ids, onehot, a)
    pos = torch.zeros(1, n, dtype=torch.bool, device=model.device)
    pos[0, cols] = True
    attn = torch.ones(1, n, dtype=torch.long, device=model.device)
    sc = model.score_positions(None, attn, pos, targets.unsqueeze(0), inputs_embeds=embeds, grad=True)
    return -sc.logprob.sum()


def gcg_loss(model: Any, item: AttackItem, onehot: torch.Tensor) -> torch.Tensor:
    """``-sum_j log p(y_j | before + s + after + y_{<j})`` under a causal LM, suffix as a one-hot ``[K, V]``."""
    k = onehot.shape[0]
    a, b, n = _layout(item, k)
    ids = torch.tensor(_sequence(item, [0] * k), dtype=torch.long, device=model.device)
    embeds = _embed_with_onehot(model, ids, onehot, a)
    attn = torch.ones(1, n, dtype=torch.long, device=model.device)
    logits = model.forward(None, attn, inputs_embeds=embeds).logits[0, b - 1 : n - 1].float()
    lp = torch.log_softmax(logits, dim=-1).gather(1, ids[b:n].unsqueeze(1)).squeeze(1)
    return -lp.sum()


def _candidate_losses_dlm(
    model: DiffusionLM, item: AttackItem, suffixes: torch.Tensor, target_mask: torch.Tensor, batch: int
) -> np.ndarray:
    """Each candidate suffix's loss (:func:`dgcg_loss` with a one-hot suffix): the masked target tokens scored
    through the masked-scoring core (:mod:`dlmeval.scoring.core`), ``batch`` candidates a pass."""
    from dlmeval.scoring.core import MaskedRow, iter_scores

    k = suffixes.shape[1]
    a, b, n = _layout(item, k)
    base = _sequence(item, [0] * k)
    cols = [b + j for j, on in enumerate(torch.as_tensor(target_mask).tolist()) if on]
    rows = [MaskedRow(base[:a] + [int(t) for t in suf] + base[a + k :], cols) for suf in suffixes.tolist()]
    out = np.zeros(len(rows), dtype=np.float64)
    for scored in iter_scores(model, rows, batch_size=batch):  # one length: the candidates in order
        for r, lp in zip(scored.rows, scored.logprob):
            for v in lp.tolist():
                out[r] -= v
    return out


def _candidate_losses_ar(model: Any, item: AttackItem, suffixes: torch.Tensor, batch: int) -> np.ndarray:
    k = suffixes.shape[1]
    a, b, n = _layout(item, k)
    base = torch.tensor(_sequence(item, [0] * k), dtype=torch.long, device=model.device)
    out = []
    with torch.no_grad():
        for s in range(0, suffixes.shape[0], batch):
            suf = suffixes[s : s + batch].to(model.device)
            x = base.repeat(suf.shape[0], 1)
            x[:, a : a + k] = suf
            logits = model.forward(x, torch.ones_like(x)).logits[:, b - 1 : n - 1].float()
            lp = torch.log_softmax(logits, dim=-1).gather(2, x[:, b:n].unsqueeze(2)).squeeze(2)
            out.append((-lp.double().sum(1)).cpu().numpy())
    return np.concatenate(out)


def sample_target_mask(n: int, gen: torch.Generator) -> tuple[float, torch.Tensor]:
    """One timestep ``t ~ U(0, 1)`` and mask ``m ~ Bernoulli(t)^n`` (one position forced when none is drawn)."""
    t = float(torch.rand((), generator=gen, dtype=torch.float64))
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    forced = int(torch.randint(n, (), generator=gen))  # drawn always, so the stream does not depend on u
    m = u < t
    if not bool(m.any()):
        m[forced] = True
    return t, m


# ---------------------------------------------------------------------------------------------------- results
@dataclass
class GCGResult:
    """One item's attack. Per-step lists have ``config.steps`` entries."""

    item_id: str
    kind: str  # "dlm" (D-GCG) or "ar" (GCG)
    config: str  # GCGConfig.key
    init_ids: list[int]
    suffix_ids: list[int]
    suffix_text: str
    prompt_ids: list[int]  # before + suffix + after: the attacked prompt
    loss: list[float]  # loss of the current suffix at each step (its step's mask)
    candidate_loss: list[float]  # the best candidate's loss at each step (the next current suffix)
    grad_norm: list[float]  # ||dL/dE||_F at each step
    timestep: list[float]  # DLM: the sampled t per step (NaN for AR)
    masked: list[int]  # target tokens scored per step
    initial_eval_loss: float  # mean loss of the initial suffix over the evaluation masks
    final_eval_loss: float  # the same for the final suffix (same masks)
    nfe: int
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def loss_increase(self) -> float:
        return self.final_eval_loss - self.initial_eval_loss

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---------------------------------------------------------------------------------------------------- the search
def _retokenizes(model: Any, suffix: list[int]) -> bool:
    return model.encode(model.decode(suffix, skip_special_tokens=False), add_special_tokens=False) == suffix


def run_gcg(
    model: Any, items: Sequence[AttackItem], config: GCGConfig | None = None, *, seed: int = 0
) -> list[GCGResult]:
    """Attack each item on its own: D-GCG when ``model`` is a :class:`DiffusionLM`, GCG otherwise (a CausalLM).

    Item results do not depend on the other items. ``nfe`` counts the forward passes of the item (one per
    gradient step, ``ceil(candidates / eval_batch_size)`` per candidate evaluation, plus the evaluations).
    """
    cfg = config or GCGConfig()
    is_dlm = isinstance(model, DiffusionLM)
    allowed = allowed_tokens(model, ascii_only=cfg.ascii_only).to(model.device)
    v = int(model.input_embeddings().weight.shape[0])
    not_allowed = torch.ones(v, dtype=torch.bool, device=model.device)
    not_allowed[allowed] = False
    return [_attack(model, it, cfg, seed, is_dlm, allowed, not_allowed) for it in items]


def _attack(model, item, cfg, seed, is_dlm, allowed, not_allowed) -> GCGResult:
    t0 = time.perf_counter()
    nfe0 = model.nfe
    k, v, dev = cfg.suffix_length, not_allowed.shape[0], model.device
    g0 = torch_generator(derive_seed(seed, "dgcg", item.item_id, "init"))
    init = allowed[torch.randint(len(allowed), (k,), generator=g0).to(allowed.device)].cpu()
    suffix = init.clone()
    losses, cand_losses, norms, ts, nmask = [], [], [], [], []
    was_training = getattr(model.module, "training", False)
    model.module.eval()
    for j in range(cfg.steps):
        g = torch_generator(derive_seed(seed, "dgcg", item.item_id, j))
        if is_dlm:
            t, m = sample_target_mask(len(item.target), g)
        else:
            t, m = math.nan, torch.ones(len(item.target), dtype=torch.bool)
        onehot = torch.zeros(k, v, device=dev)
        onehot[torch.arange(k, device=dev), suffix.to(dev)] = 1.0
        onehot.requires_grad_(True)
        loss = dgcg_loss(model, item, onehot, m) if is_dlm else gcg_loss(model, item, onehot)
        (grad,) = torch.autograd.grad(loss, onehot)
        grad = grad.detach()
        norms.append(float(grad.norm()))
        losses.append(float(loss.detach()))
        ts.append(t)
        nmask.append(int(m.sum()))
        # top-k tokens per position by gradient (the loss is raised: largest first-order increase)
        topk = grad.masked_fill(not_allowed.unsqueeze(0), -math.inf).topk(min(cfg.top_k, len(allowed)), dim=1)
        top = topk.indices.cpu()  # [K, top_k]
        pos = torch.randint(k, (cfg.search_width,), generator=g)
        pick = torch.randint(top.shape[1], (cfg.search_width,), generator=g)
        cands = suffix.repeat(cfg.search_width, 1)
        cands[torch.arange(cfg.search_width), pos] = top[pos, pick]
        if cfg.retokenize_filter:
            ok = [c for c in cands.tolist() if _retokenizes(model, c)]
            if ok:
                cands = torch.tensor(ok, dtype=torch.long)
        if is_dlm:
            cl = _candidate_losses_dlm(model, item, cands, m, cfg.eval_batch_size)
        else:
            cl = _candidate_losses_ar(model, item, cands, cfg.eval_batch_size)
        best = int(np.argmax(cl))
        cand_losses.append(float(cl[best]))
        suffix = cands[best].clone()
    # evaluation of the initial and final suffix on shared masks (exact for AR)
    both = torch.stack([init, suffix])
    if is_dlm:
        vals = []
        for i in range(cfg.eval_samples):
            _, m = sample_target_mask(
                len(item.target), torch_generator(derive_seed(seed, "dgcg-eval", item.item_id, i))
            )
            vals.append(_candidate_losses_dlm(model, item, both, m, cfg.eval_batch_size))
        ev = np.mean(vals, axis=0)
    else:
        ev = _candidate_losses_ar(model, item, both, cfg.eval_batch_size)
    model.module.train(was_training)
    sfx = suffix.tolist()
    return GCGResult(
        item_id=item.item_id,
        kind="dlm" if is_dlm else "ar",
        config=cfg.key,
        init_ids=init.tolist(),
        suffix_ids=sfx,
        suffix_text=model.decode(sfx),
        prompt_ids=[*item.before, *sfx, *item.after],
        loss=losses,
        candidate_loss=cand_losses,
        grad_norm=norms,
        timestep=ts,
        masked=nmask,
        initial_eval_loss=float(ev[0]),
        final_eval_loss=float(ev[1]),
        nfe=model.nfe - nfe0,
        seconds=time.perf_counter() - t0,
    )


# ---------------------------------------------------------------------------------------------------- summaries
def degradation(clean_acc: float, attacked_acc: float, *, relative: bool = True) -> float:
    """The accuracy drop a suffix causes: ``(A_clean - A_suffix) / A_clean`` (relative, like RDI; NaN when
    ``A_clean = 0``) or ``A_clean - A_suffix`` (``relative=False``). Negative: the suffix helped."""
    for name, x in (("clean_acc", clean_acc), ("attacked_acc", attacked_acc)):
        if not 0 <= x <= 1:
            raise InputError(f"{name} must be an accuracy in [0, 1], got {x!r}")
    if not relative:
        return float(clean_acc - attacked_acc)
    return float("nan") if clean_acc == 0 else float((clean_acc - attacked_acc) / clean_acc)


def min_suffix_length(degradation_by_length: Mapping[int, float], threshold: float = 0.2) -> int | None:
    """The shortest suffix length whose degradation reaches ``threshold`` (the paper's "Min-len"), or None."""
    hits = [
        k for k, d in degradation_by_length.items() if d is not None and not math.isnan(d) and d >= threshold
    ]
    return min(hits) if hits else None


def summarize_gcg(results: Sequence[GCGResult]) -> dict[str, Any]:
    """Across items: mean per-step gradient norm (the paper's Table 3 column), the mean loss trajectory per step
    (its Fig. 6D), the mean evaluated loss increase, and the fraction of steps whose best candidate beat the
    current loss under the same mask (how often the greedy step made progress)."""
    if not results:
        raise InputError("no GCG results to summarize")
    loss = np.array([r.loss for r in results], dtype=np.float64)
    cand = np.array([r.candidate_loss for r in results], dtype=np.float64)
    return {
        "n": len(results),
        "kind": sorted({r.kind for r in results}),
        "mean_grad_norm": float(np.mean([np.mean(r.grad_norm) for r in results])),
        "loss_trajectory": loss.mean(0).tolist(),
        "candidate_loss_trajectory": cand.mean(0).tolist(),
        "mean_loss_increase": float(np.mean([r.loss_increase for r in results])),
        "step_improvement_rate": float((cand > loss).mean()),
        "nfe": int(sum(r.nfe for r in results)),
    }
