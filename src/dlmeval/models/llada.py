"""The LLaDA family: bidirectional Llama-style diffusion LMs (GSAI-ML/LLaDA-8B-Base / -Instruct).

Quirks kept here (docs/models.md lists where each is tested):

* the remote code: ``LLaDAModelLM.forward`` takes ``inputs_embeds`` (its inner model calls the same tensor
  ``input_embeddings``) and no other keyword; loaded with ``trust_remote_code`` only when the user asks;
* the mask id: the released tokenizer gives ``<|mdm_mask|>`` (126336) no mask role, so it comes from the config
  (``mask_token_id``), then the tokenizer, then the constant below with a warning;
* EOS ``<|endoftext|>`` (126081) from the tokenizer / generation config and EoT ``<|eot_id|>`` (126348) from the
  chat template; the constants only as a warned fallback;
* left padding with EOS as the pad id; a vocabulary padded past the tokenizer (masked in the base class);
* the Instruct chat template starts with BOS and the tokenizer adds one: the base class keeps one.
"""

from __future__ import annotations

from dlmeval.models.base import DiffusionLM, RunOut

LLADA_MASK_ID = 126336
LLADA_EOS_ID = 126081
LLADA_EOT_ID = 126348


class LLaDALM(DiffusionLM):
    family = "llada"

    def __init__(self, module, tokenizer, **kw):
        kw.setdefault("padding_side", "left")
        super().__init__(module, tokenizer, **kw)

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        kw = {"attention_mask": attention_mask, "output_hidden_states": output_hidden_states}
        if inputs_embeds is not None:
            kw["inputs_embeds"] = inputs_embeds
        else:
            kw["input_ids"] = input_ids
        out = self.module(**kw)
        return RunOut(logits=out.logits, hidden_states=out.hidden_states if output_hidden_states else None)


def load_llada(
    path: str,
    *,
    device=None,
    dtype=None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    mask_token_id: int | None = None,
    eos_token_ids=None,
    name: str | None = None,
    random_init: int | None = None,
) -> LLaDALM:
    from dlmeval.models.remote import load_remote_family

    return load_remote_family(
        LLaDALM,
        path,
        label="LLaDA",
        model_type="llada",
        max_length_key="max_sequence_length",
        default_mask=LLADA_MASK_ID,
        default_eos=(LLADA_EOS_ID, LLADA_EOT_ID),
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        allow_download=allow_download,
        mask_token_id=mask_token_id,
        eos_token_ids=eos_token_ids,
        name=name,
        random_init=random_init,
        padding_side="left",
    )
