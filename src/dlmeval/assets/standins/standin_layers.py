"""Layers shared by dlmeval's tiny family stand-ins (copied next to their modeling files at build time).

A pre-norm transformer trunk with rotary positions and SwiGLU MLPs; attention is bidirectional and takes an
additive float bias or a boolean mask broadcastable to ``[B, heads, L, L]`` (None: every position sees every
position). ``qkv_bias``: q/k/v projections with biases (Qwen2 / Dream); o_proj never has one. Written by dlmeval; no family code is copied here.
"""

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rotate(x, positions, theta: float):
    """Rotary embedding of ``x`` [B, H, L, D] at integer ``positions`` [L] or [B, L]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = positions.to(x.device).float()[..., None] * inv
    ang = torch.cat([ang, ang], dim=-1)
    ang = ang[None, None] if ang.dim() == 2 else ang[:, None]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    half = d // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


class Block(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int,
        mlp_hidden: int,
        eps: float,
        theta: float,
        qkv_bias: bool = False,
    ):
        super().__init__()
        self.h, self.kv, self.dh, self.theta = n_heads, n_kv_heads, d_model // n_heads, theta
        self.attn_norm = RMSNorm(d_model, eps)
        self.q_proj = nn.Linear(d_model, n_heads * self.dh, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.dh, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.dh, bias=qkv_bias)
        self.o_proj = nn.Linear(n_heads * self.dh, d_model, bias=False)
        self.ff_norm = RMSNorm(d_model, eps)
        self.gate_proj = nn.Linear(d_model, mlp_hidden, bias=False)
        self.up_proj = nn.Linear(d_model, mlp_hidden, bias=False)
        self.down_proj = nn.Linear(mlp_hidden, d_model, bias=False)

    def forward(self, x, positions, attn_mask=None):
        b, n, _ = x.shape
        y = self.attn_norm(x)
        q = self.q_proj(y).view(b, n, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(y).view(b, n, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(y).view(b, n, self.kv, self.dh).transpose(1, 2)
        q, k = rotate(q, positions, self.theta), rotate(k, positions, self.theta)
        if self.kv != self.h:
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.to(q.dtype)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=False)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, n, -1))
        y = self.ff_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))
