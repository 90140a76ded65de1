"""dlmeval's tiny Dream stand-in, loaded with ``AutoModel.from_pretrained(dir, trust_remote_code=True)``.

It keeps the interface of Dream's published remote code, written by dlmeval from that interface: ``forward(
input_ids, attention_mask, position_ids, ..., inputs_embeds=...)`` where ``attention_mask`` is either a boolean
4-D mask ``[B, 1, L, L]`` handed to the attention as it is, or anything else (Dream passes the string "full") for
full attention; ``position_ids`` place the rotary positions (Dream counts them from a row's first real token).
The output at position ``i - 1`` predicts token ``i`` (Qwen's head convention kept by Dream).

``diffusion_generate`` follows the published semantics of Dream's sampler: timesteps ``linspace(1, eps,
steps + 1)``; per step one forward pass, logits shifted right by one; ``origin`` unmasks each masked position with
probability ``1 - s / t`` (all at the last step); the other algorithms (``maskgit_plus``: top probability,
``topk_margin``: top-1 minus top-2, ``entropy``: negative entropy) unmask the ``int(n_masked * (1 - s / t))``
most confident positions (all at the last step), drawn with ``alg_temp`` when it is set;
``generation_logits_hook_func(step, x, logits)`` sees the shifted logits of every step, as in Dream's.
"""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

from .configuration_tiny_dream import TinyDreamConfig
from .standin_layers import Block, RMSNorm


class TinyDreamBase(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            Block(
                config.hidden_size,
                config.num_attention_heads,
                config.num_key_value_heads,
                config.intermediate_size,
                config.rms_norm_eps,
                config.rope_theta,
                qkv_bias=True,  # Qwen2's attention, kept by Dream: q/k/v biases, none on o_proj
            )
            for _ in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


#: DreamGenerationConfig's own defaults (the settings diffusion_generate reads)
_DREAM_DEFAULTS = {
    "temperature": 0.0,
    "top_p": None,
    "top_k": None,
    "max_new_tokens": None,
    "eps": 1e-3,
    "steps": 512,
    "alg": "origin",
    "alg_temp": None,
    "mask_token_id": None,
}


def _choose(logits, temperature, top_p, top_k, kind):
    if temperature and temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        srt, idx = logits.sort(dim=-1, descending=True)
        cum = srt.softmax(-1).cumsum(-1)
        drop = cum > top_p
        drop[..., 1:] = drop[..., :-1].clone()
        drop[..., 0] = False
        logits = logits.masked_fill(
            torch.zeros_like(drop).scatter(-1, idx, drop), torch.finfo(logits.dtype).min
        )
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)
    probs = logits.softmax(-1)
    if temperature and temperature > 0:
        tok = torch.distributions.Categorical(probs=probs).sample()
        conf = probs.gather(-1, tok[:, None])[:, 0]
    else:
        conf, tok = probs.max(-1)
    if kind == "topk_margin":
        two = probs.topk(2, dim=-1).values
        conf = two[:, 0] - two[:, 1]
    elif kind == "entropy":
        conf = (probs * torch.log(probs + 1e-10)).sum(-1)
    return conf, tok


class TinyDreamModel(PreTrainedModel):
    config_class = TinyDreamConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = TinyDreamBase(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.05)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.normal_(0.0, 0.05)  # non-zero, so a loader or adapter that drops them is caught

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
        return_dict=None,
        cache_position=None,
        num_logits_to_keep=0,
        **loss_kwargs,
    ):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        x = self.model.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        n = x.shape[1]
        if position_ids is None:
            position_ids = torch.arange(n, device=x.device)[None]
        mask = attention_mask if isinstance(attention_mask, torch.Tensor) else None
        if mask is not None and mask.dim() != 4:
            raise ValueError(
                f"the attention mask must be 4-D [B, 1, L, L] or 'full', got shape {tuple(mask.shape)}"
            )
        hidden = []
        for layer in self.model.layers:
            if output_hidden_states:
                hidden.append(x)
            x = layer(x, position_ids, mask)
        x = self.model.norm(x)
        if output_hidden_states:
            hidden.append(x)
        logits = self.lm_head(x[:, -num_logits_to_keep:, :])
        return MaskedLMOutput(logits=logits, hidden_states=tuple(hidden) if output_hidden_states else None)

    @torch.no_grad()
    def diffusion_generate(self, inputs, generation_config=None, **kwargs):
        """Dream's calling convention: without ``generation_config`` the settings start from the *model* config
        (``from_model_config``: a ``PretrainedConfig`` carries the legacy defaults temperature 1.0, top_p 1.0 and
        top_k 50) over Dream's own defaults; then every keyword passed overrides, an explicit None included. So a
        call with plain keywords inherits top_k=50 unless it passes ``top_k=None``, as the released code does."""
        attention_mask = kwargs.pop("attention_mask", None)
        logits_hook = kwargs.pop("generation_logits_hook_func", lambda step, x, logits: logits)
        return_dict_in_generate = kwargs.pop("return_dict_in_generate", False)
        settings = dict(_DREAM_DEFAULTS)
        if generation_config is None:
            model_cfg = {k: v for k, v in self.config.to_dict().items() if v is not None}
            settings.update({k: model_cfg[k] for k in _DREAM_DEFAULTS if k in model_cfg})
        else:
            settings.update(
                {k: getattr(generation_config, k) for k in _DREAM_DEFAULTS if hasattr(generation_config, k)}
            )
            if settings["mask_token_id"] is None:
                settings["mask_token_id"] = getattr(self.generation_config, "mask_token_id", None)
        settings.update({k: v for k, v in kwargs.items() if k in _DREAM_DEFAULTS})
        steps, alg, eps = settings["steps"], settings["alg"], settings["eps"]
        temperature, top_p, top_k, alg_temp = (
            settings["temperature"],
            settings["top_p"],
            settings["top_k"],
            settings["alg_temp"],
        )
        max_new = settings["max_new_tokens"] or 16
        mask_id = settings["mask_token_id"]
        x = F.pad(inputs, (0, max_new), value=mask_id)
        if attention_mask is not None and bool((attention_mask == 0).any()):
            am = F.pad(attention_mask, (0, max_new), value=1)
            pos = am.long().cumsum(-1) - 1
            pos.masked_fill_(am == 0, 1)
            keep = am.bool()
            mask4 = keep[:, None, None, :] & keep[:, None, :, None]
        else:
            pos, mask4 = None, "full"
        times = torch.linspace(1, eps, steps + 1, device=x.device)
        for i in range(steps):
            masked = x == mask_id
            z = self(x, mask4, pos).logits
            z = logits_hook(i, x, torch.cat([z[:, :1], z[:, :-1]], dim=1))[masked]
            t, s = times[i], times[i + 1]
            if alg == "origin":
                p = 1 - s / t if i < steps - 1 else 1
                new = torch.full_like(x[masked], mask_id)
                go = torch.rand(new.shape, device=x.device) < p
                new[go] = _choose(z[go], temperature, top_p, top_k, alg)[1]
                x[masked] = new
                continue
            conf, tok = _choose(z, temperature, top_p, top_k, alg)
            per_row = masked.sum() / masked.shape[0]
            n = int(per_row * (1 - s / t)) if i < steps - 1 else int(per_row)
            if n <= 0:
                continue
            full = torch.full(x.shape, -torch.inf, device=x.device, dtype=z.dtype)
            full[masked] = conf
            if alg_temp:
                idx = torch.multinomial((full / alg_temp).softmax(-1), num_samples=n)
            else:
                idx = full.topk(n, dim=-1).indices
            cand = torch.full_like(x, mask_id)
            cand[masked] = tok
            x.scatter_(1, idx, cand.gather(1, idx))
        if return_dict_in_generate:
            return _Generated(x)
        return x


class _Generated(dict):
    def __init__(self, sequences):
        super().__init__(sequences=sequences)
        self.sequences = sequences
