"""dlmeval's tiny LLaDA stand-in, loaded with ``AutoModel.from_pretrained(dir, trust_remote_code=True)``.

It keeps the interface of LLaDA's published remote code, written by dlmeval from that interface: the outer
``LLaDAModelLM``-style class takes ``input_ids`` / ``inputs_embeds`` / a 2-D ``attention_mask`` and no other
keywords (an unknown keyword raises ``TypeError``, as LLaDA's forward does); the inner model takes
``input_embeddings``; logits at position i score token i; hidden states are the input of every block plus the
final normed state; the mask is bidirectional with padded keys masked out.
"""

from types import SimpleNamespace

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_tiny_llada import TinyLLaDAConfig
from .standin_layers import Block, RMSNorm


class TinyLLaDAInner(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.embedding_size, config.d_model),
                blocks=nn.ModuleList(
                    Block(
                        config.d_model,
                        config.n_heads,
                        config.n_kv_heads,
                        config.mlp_hidden_size,
                        config.rms_norm_eps,
                        config.rope_theta,
                    )
                    for _ in range(config.n_layers)
                ),
                ln_f=RMSNorm(config.d_model, config.rms_norm_eps),
                ff_out=nn.Linear(config.d_model, config.embedding_size, bias=False),
            )
        )

    def forward(self, input_ids=None, input_embeddings=None, attention_mask=None, output_hidden_states=False):
        x = self.transformer.wte(input_ids) if input_embeddings is None else input_embeddings
        b, n = x.shape[:2]
        bias = None
        if attention_mask is not None and bool((attention_mask == 0).any()):
            keep = attention_mask.to(torch.float32).view(b, 1, 1, n)
            bias = (1.0 - keep) * torch.finfo(torch.float32).min
        pos = torch.arange(n, device=x.device)
        hidden = []
        for block in self.transformer.blocks:
            if output_hidden_states:
                hidden.append(x)
            x = block(x, pos, bias)
        x = self.transformer.ln_f(x)
        if output_hidden_states:
            hidden.append(x)
        return SimpleNamespace(logits=self.transformer.ff_out(x), hidden_states=tuple(hidden) or None)


class TinyLLaDAModelLM(PreTrainedModel):
    config_class = TinyLLaDAConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = TinyLLaDAInner(config)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.05)

    def forward(
        self,
        input_ids=None,
        inputs_embeds=None,
        attention_mask=None,
        attention_bias=None,
        past_key_values=None,
        labels=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        cache_position=None,
    ):
        if output_attentions:
            raise ValueError("output_attentions is not supported")
        if attention_bias is not None or past_key_values is not None or use_cache:
            raise ValueError("the stand-in, like LLaDA, keeps no KV cache and takes no attention_bias here")
        out = self.model(
            input_ids=input_ids,
            input_embeddings=inputs_embeds,
            attention_mask=attention_mask,
            output_hidden_states=bool(output_hidden_states),
        )
        return CausalLMOutputWithPast(logits=out.logits, hidden_states=out.hidden_states)

    def get_input_embeddings(self):
        return self.model.transformer.wte

    def set_input_embeddings(self, value):
        self.model.transformer.wte = value

    def get_output_embeddings(self):
        return self.model.transformer.ff_out
