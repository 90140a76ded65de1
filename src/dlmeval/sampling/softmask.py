"""Soft-mask feedback (Hersche et al., "Soft-Masked Diffusion Language Models", arXiv 2510.17206; the Care
leaderboard's SM-Dream-7B row): a position that stays masked after a step is fed, at the next pass, a mix of the
mask embedding and the embeddings of the previous step's top-``k`` predicted tokens instead of the bare mask.

The rule, as the paper states it (Sec. 3). The authors' code was found only in part: the opening of
``softmasking_utils.py`` in the Hugging Face repo ``smoorsmith/Dream-coder-test`` (an author's; revision ded928f)
was readable through the search tools, with ``SMArgs(sm_alg="mixinputs_with_topk" | "mixinputs_with_temp",
sm_schedule="none" | "linear" | "stepwise", scale, steepness, offset, mixinputs_k=3, mixinputs_temp)``: a
sigmoid map from the *negative entropy* to lambda with a scale, a steepness and an offset, the mix formed against
a one-hot of ``x_t``. So here:

    e~ = (1 - lambda(p)) * e[MASK] + lambda(p) * sum_{i in top-k(p)} p~_i * e[v_i]

with ``p`` the model's previous-step distribution at that position (softmax of its logits, the padded vocabulary
excluded), ``v_i`` / ``p_i`` its ``k`` most probable tokens and ``p~_i = p_i / sum_top-k p`` (the top-k
probabilities renormalised: a convex combination; the mask token itself is never a candidate), and the mixing
weight a function of the distribution's
confidence, its negative entropy ``-H(p)`` (nats):

    lambda(p) = omega_s * sigmoid(omega_a * (-H(p) - omega_b))        (``rule="entropy"``)

``omega_s`` in [0, 1] bounds the share given to the predictions (its ``scale``), ``omega_a`` (> 0) is the
slope (``steepness``) and ``omega_b`` the negative entropy at which lambda is half its bound (``offset``; a
published ``transparency_config.json`` of the authors, ``smoorsmith/peft_test``, has steepness 6.75, centre
-0.832, k = 1). A soft-masked checkpoint learns the three: pass its values. Not reproduced (the rest of the file
was not readable): the time schedules of ``scale`` (``linear``, ``stepwise``), the ``mixinputs_with_temp``
variant, and whether the top-k weights are renormalised (here they are).
``rule="constant"`` uses ``lambda = omega_s`` everywhere (an ablation). ``k = 0`` or ``omega_s = 0`` is plain
masking.

Where it applies: positions still masked whose distribution the previous pass computed (the sampler's decode pass
projects only the current block's masked positions, so positions of later blocks keep the bare mask until their
block starts); the first pass of a sample has no previous distribution and feeds plain masks. The feedback
changes no NFE (it rides on the passes the sampler makes anyway) and is recorded in the sampler's settings
(``config_dict()["softmask"]``), so it enters run signatures. Any family whose adapter takes ``inputs_embeds``
can use it (every :class:`~dlmeval.models.base.DiffusionLM` here).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch

from dlmeval.errors import InputError

if TYPE_CHECKING:
    from dlmeval.sampling.state import Batch

RULES = ("entropy", "constant")


@dataclass(frozen=True)
class SoftMask:
    """The soft-mask feedback settings (see the module doc for the rule)."""

    k: int = 3
    rule: str = "entropy"
    omega_s: float = 1.0
    omega_a: float = 1.0
    omega_b: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise InputError(f"softmask k must be an integer >= 0, got {self.k!r}")
        if self.rule not in RULES:
            raise InputError(f"unknown softmask rule {self.rule!r}; choose one of {', '.join(RULES)}")
        for name in ("omega_s", "omega_a", "omega_b"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise InputError(f"softmask {name} must be a finite number, got {v!r}")
        if not 0 <= self.omega_s <= 1:
            raise InputError(
                f"softmask omega_s must be in [0, 1] (the share of the predictions), got {self.omega_s}"
            )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def weight(self, probs: torch.Tensor) -> torch.Tensor:
        """``lambda(p)`` for each row of ``probs`` ``[N, V]``."""
        if self.rule == "constant":
            return torch.full(probs.shape[:1], float(self.omega_s), device=probs.device)
        ent = -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1)
        return self.omega_s * torch.sigmoid(self.omega_a * (-ent - self.omega_b))

    def start(self, st: Batch) -> SoftMaskState:
        return SoftMaskState(self, st)


class SoftMaskState:
    """The previous step's top-k feedback of one batch, in generation coordinates ``[B, L]``."""

    def __init__(self, cfg: SoftMask, st: Batch):
        n, length = st.tokens.shape
        dev = st.tokens.device
        self.cfg = cfg
        self.mask_id = int(st.model.mask_token_id)
        k = max(cfg.k, 1)
        self.ids = torch.zeros((n, length, k), dtype=torch.long, device=dev)
        self.w = torch.zeros((n, length, k), dtype=torch.float32, device=dev)
        self.lam = torch.zeros((n, length), dtype=torch.float32, device=dev)
        self.valid = torch.zeros((n, length), dtype=torch.bool, device=dev)

    @property
    def active(self) -> bool:
        return self.cfg.k > 0 and self.cfg.omega_s > 0

    def record(
        self, rows: torch.Tensor, sl: slice, rr: torch.Tensor, cc: torch.Tensor, logits: torch.Tensor
    ) -> None:
        """Keep the top-k of the distributions ``logits`` ``[N, V]`` at block positions ``(rr, cc)`` of ``rows``
        (the mask token itself is never a candidate: feeding it back would only re-weight e[MASK])."""
        if not self.active or rr.numel() == 0:
            return
        z = logits.float().clone()
        z[:, self.mask_id] = torch.finfo(z.dtype).min
        p = torch.softmax(z, dim=-1)
        top, idx = p.topk(self.cfg.k, dim=-1)
        r, c = rows[rr], sl.start + cc
        self.ids[r, c] = idx
        self.w[r, c] = top / top.sum(-1, keepdim=True).clamp_min(1e-30)
        self.lam[r, c] = self.cfg.weight(p)
        self.valid[r, c] = True

    def forget(self, rows: torch.Tensor, sl: slice, decided: torch.Tensor) -> None:
        """Drop the feedback of positions just decided (``decided`` ``[R, block]`` bool)."""
        cols = torch.arange(sl.start, sl.stop, device=decided.device)
        sub = self.valid[rows][:, cols] & ~decided
        v = self.valid[rows]
        v[:, cols] = sub
        self.valid[rows] = v

    def embeds(self, st: Batch, rows: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
        """The input embeddings of ``x`` (``st.ids`` of ``rows``, possibly cut at a block end) with the feedback
        mixed in at still-masked positions that have some, or None when no position has any."""
        if not self.active:
            return None
        use = self.valid[rows] & st.masked[rows]  # [R, L]
        if not bool(use.any()):
            return None
        emb_layer = st.model.input_embeddings()
        e = emb_layer(x)
        r, c = use.nonzero(as_tuple=True)
        col = st.gen_start[rows][r] + c
        keep = col < x.shape[1]
        r, c, col = r[keep], c[keep], col[keep]
        rr = rows[r]
        tok = emb_layer(self.ids[rr, c])  # [N, k, H]
        mix = (self.w[rr, c].to(tok.dtype)[..., None] * tok).sum(1)
        lam = self.lam[rr, c].to(tok.dtype)[:, None]
        e_mask = emb_layer.weight[int(st.model.mask_token_id)].to(tok.dtype)
        e = e.clone()
        e[r, col] = (1 - lam) * e_mask + lam * mix
        return e
