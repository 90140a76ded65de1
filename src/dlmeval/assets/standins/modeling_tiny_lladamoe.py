"""dlmeval's tiny LLaDA-MoE stand-in, loaded with ``AutoModel.from_pretrained(dir, trust_remote_code=True)``.

Written by dlmeval from the interface of LLaDA-MoE's published remote code (``modeling_lladamoe.py``); no family
code is copied. What it keeps: the outer ``*ModelLM`` class with ``.model`` (``embed_tokens``, ``layers``,
``norm``) and ``.lm_head``, a forward taking ``input_ids`` / ``inputs_embeds``, a **2-D** attention mask turned
into a non-causal additive mask (padded keys masked), ``position_ids`` (default ``0..L-1``) and refusing a loss or
``num_logits_to_keep``; bidirectional attention with per-head q/k RMSNorm; decoder layers that are dense where
``moe_layer_freq[i] == 0`` and mixture-of-experts otherwise: a router ``gate`` with **softmax** scores (plus an
optional ``expert_bias`` buffer added after the softmax), the top ``num_experts_per_tok`` experts weighted by
their **un-renormalised** scores, plus a shared expert; logits at position i score token i.
"""

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import MoeCausalLMOutputWithPast

from .configuration_tiny_lladamoe import TinyLLaDAMoEConfig
from .standin_layers import RMSNorm, rotate


class MLP(nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SparseMoe(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.gate = nn.Linear(config.hidden_size, config.num_experts, bias=False)
        self.experts = nn.ModuleList(
            MLP(config.hidden_size, config.expert_intermediate_size) for _ in range(config.num_experts)
        )
        if config.moe_router_enable_expert_bias:
            self.register_buffer("expert_bias", torch.zeros(config.num_experts))
        else:
            self.expert_bias = None

    def forward(self, x):
        b, n, h = x.shape
        flat = x.reshape(-1, h)
        scores = F.softmax(self.gate(flat), dim=1, dtype=torch.float)
        if self.expert_bias is not None:
            scores = scores + self.expert_bias
        weights, chosen = torch.topk(scores, self.top_k, dim=-1)
        weights = weights.to(flat.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        return out.view(b, n, h)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.h, self.kv = config.num_attention_heads, config.num_key_value_heads
        self.dh = config.hidden_size // self.h
        self.theta = config.rope_theta
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, self.h * self.dh, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.kv * self.dh, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.kv * self.dh, bias=bias)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=bias)
        self.qk_norm = bool(config.qk_layernorm)
        if self.qk_norm:
            self.q_norm = RMSNorm(self.dh, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.dh, config.rms_norm_eps)

    def forward(self, x, positions, bias):
        b, n, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q, k, v = (t.view(b, n, -1, self.dh) for t in (q, k, v))
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = rotate(q, positions, self.theta), rotate(k, positions, self.theta)
        if self.kv != self.h:
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=False)
        return self.o_proj(a.transpose(1, 2).reshape(b, n, -1))


class DecoderLayer(nn.Module):
    def __init__(self, config, i):
        super().__init__()
        moe = config.moe_layer_freq[i] != 0
        self.self_attn = Attention(config)
        self.mlp = SparseMoe(config) if moe else MLP(config.hidden_size, config.dense_intermediate_size)
        self.shared_expert = (
            MLP(config.hidden_size, config.shared_expert_intermediate_size)
            if moe and config.shared_expert_intermediate_size
            else None
        )
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, positions, bias):
        x = x + self.self_attn(self.input_layernorm(x), positions, bias)
        y = self.post_attention_layernorm(x)
        out = self.mlp(y)
        if self.shared_expert is not None:
            out = out + self.shared_expert(y)
        return x + out


class TinyLLaDAMoEModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        output_router_logits=None,
        return_dict=None,
        cache_position=None,
    ):
        hidden = bool(output_hidden_states)
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        b, n = x.shape[:2]
        bias = None
        if attention_mask is not None:
            if attention_mask.dim() != 2:
                raise ValueError(
                    f"the attention mask must be 2-D [B, L], got shape {tuple(attention_mask.shape)}"
                )
            keep = attention_mask.to(x.dtype).view(b, 1, 1, n)
            bias = (1.0 - keep) * torch.finfo(x.dtype).min
        if position_ids is None:
            position_ids = torch.arange(n, device=x.device)[None]
        states = []
        for layer in self.layers:
            if hidden:
                states.append(x)
            x = layer(x, position_ids, bias)
        x = self.norm(x)
        if hidden:
            states.append(x)
        return SimpleNamespace(last_hidden_state=x, hidden_states=tuple(states) if hidden else None)


class TinyLLaDAMoEModelLM(PreTrainedModel):
    config_class = TinyLLaDAMoEConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = TinyLLaDAMoEModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.05)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        output_router_logits=None,
        return_dict=None,
        cache_position=None,
        num_logits_to_keep=0,
    ):
        if labels is not None or num_logits_to_keep != 0:
            raise ValueError("LLaDAMoE model does not support calculate loss in the forward pass.")
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
        )
        return MoeCausalLMOutputWithPast(
            logits=self.lm_head(out.last_hidden_state), hidden_states=out.hidden_states
        )
