"""The Dream family (Dream-org/Dream-v0-Base-7B / -Instruct-7B): diffusion LMs adapted from Qwen2.5.

Quirks kept here (docs/models.md lists where each is tested):

* the **one-position logit shift**: Dream keeps Qwen's head convention, the output at ``i - 1`` predicts token
  ``i``; ``logit_shift = 1`` makes the base class re-align, so above this layer position ``i`` scores token ``i``;
* the first token has no preceding position: the tokenizer adds no BOS, so this adapter prepends the tokenizer's
  BOS (``<|beginoftext|>``, what Dream's own evaluation prepends with ``add_bos_token``) and a text's first token
  is scored from the BOS output; the BOS position itself reads its own output and is never a prediction;
* a 4-D boolean attention mask and position ids counted from each row's first real token; the first real token
  is read from the mask, so left and right padding give the same logits;
* the mask id 151666 (``<|mask|>``: tokenizer and config agree; a disagreement is warned about);
* EOS ``<|endoftext|>`` from the tokenizer / configs and ``<|im_end|>`` from the Instruct chat template;
* a slow tokenizer (``DreamTokenizer``): character spans come from incremental decoding (base class);
* a config ``bos_token_id`` (151643) that is the tokenizer's EOS: the tokenizer's BOS is used;
* a vocabulary padded past the tokenizer (152,064 rows, 151,667 tokens; masked in the base class).
"""

from __future__ import annotations

import torch

from dlmeval.models.base import DiffusionLM, RunOut

DREAM_MASK_ID = 151666
DREAM_EOS_ID = 151643
DREAM_IM_END_ID = 151645


class DreamLM(DiffusionLM):
    family = "dream"
    logit_shift = 1
    native_schedule = "dream"  # diffusion_generate: int(M * (1 - s / t)) per step, a pass at every step
    prepend_bos = True

    def __init__(self, module, tokenizer, **kw):
        kw.setdefault("padding_side", "left")
        super().__init__(module, tokenizer, **kw)

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        x = input_ids if input_ids is not None else inputs_embeds
        b, n = x.shape[0], x.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(b, n, dtype=torch.long, device=x.device)
        am = attention_mask.bool()
        mask4 = (am[:, None, :, None] & am[:, None, None, :]) | torch.eye(
            n, dtype=torch.bool, device=x.device
        )
        pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        kw = {"attention_mask": mask4, "position_ids": pos, "output_hidden_states": output_hidden_states}
        if inputs_embeds is not None:
            kw["inputs_embeds"] = inputs_embeds
        else:
            kw["input_ids"] = input_ids
        out = self.module(**kw)
        return RunOut(logits=out.logits, hidden_states=out.hidden_states if output_hidden_states else None)


def load_dream(
    path: str,
    *,
    device=None,
    dtype=None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    mask_token_id: int | None = None,
    name: str | None = None,
    random_init: int | None = None,
) -> DreamLM:
    from dlmeval.models.remote import load_remote_family

    return load_remote_family(
        DreamLM,
        path,
        label="Dream",
        model_type="dream",
        max_length_key="max_position_embeddings",
        default_mask=DREAM_MASK_ID,
        default_eos=(DREAM_EOS_ID, DREAM_IM_END_ID),
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        allow_download=allow_download,
        mask_token_id=mask_token_id,
        name=name,
        random_init=random_init,
    )
