"""The LLaDA family: bidirectional Llama-style diffusion LMs (GSAI-ML/LLaDA-8B-Base / -Instruct).

Quirks kept here: the mask id (126336 in the released tokenizer; read from the tokenizer/config when present, and
overridable), EOS 126081 and EoT 126348, left padding, the remote-code forward that takes ``input_embeddings``
instead of ``inputs_embeds``, and loading with ``trust_remote_code`` only when the user asks for it.
"""

from __future__ import annotations

from pathlib import Path

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.base import DiffusionLM, RunOut, resolve_device, resolve_dtype

LLADA_MASK_ID = 126336
LLADA_EOS_ID = 126081
LLADA_EOT_ID = 126348


class LLaDALM(DiffusionLM):
    family = "llada"

    def __init__(self, module, tokenizer, *, embeds_kwarg: str = "input_embeddings", **kw):
        kw.setdefault("padding_side", "left")
        super().__init__(module, tokenizer, **kw)
        self._embeds_kwarg = embeds_kwarg

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        kw = {"attention_mask": attention_mask, "output_hidden_states": output_hidden_states}
        if inputs_embeds is not None:
            kw[self._embeds_kwarg] = inputs_embeds
        else:
            kw["input_ids"] = input_ids
        out = self.module(**kw)
        return RunOut(logits=out.logits, hidden_states=out.hidden_states if output_hidden_states else None)


def _token_id(tokenizer, config, names, default):
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, int):
            return v
    return default


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
) -> LLaDALM:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    local = Path(path).exists()
    if not local and not allow_download:
        raise ModelNotFoundError(
            f"LLaDA model {path!r} is not on disk. Pass a local directory, or add --allow-download (needs internet) "
            "to fetch it from the Hugging Face hub."
        )
    if not trust_remote_code:
        raise InputError(
            "LLaDA checkpoints ship their model code with the weights; loading them runs that code. "
            "Re-run with --trust-remote-code if you trust the source."
        )
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    kw = {"trust_remote_code": True, "local_files_only": not allow_download}
    cfg = AutoConfig.from_pretrained(path, **kw)
    if "llada" not in (getattr(cfg, "model_type", "") or "").lower():
        raise InputError(
            f"{path} is a {cfg.model_type!r} model, not LLaDA; use the matching spec (hf:, dream:, ...)"
        )
    tok = AutoTokenizer.from_pretrained(path, **kw)
    tok.padding_side = "left"
    module = AutoModel.from_pretrained(path, dtype=dt, **kw).to(dev).eval()
    mid = mask_token_id or _token_id(tok, cfg, ("mask_token_id",), LLADA_MASK_ID)
    eos = eos_token_ids or (_token_id(tok, cfg, ("eos_token_id",), LLADA_EOS_ID), LLADA_EOT_ID)
    return LLaDALM(
        module,
        tok,
        name=name or Path(path).name,
        source=str(path),
        mask_token_id=mid,
        max_length=int(getattr(cfg, "max_sequence_length", 4096)),
        device=dev,
        dtype=dt,
        eos_token_ids=eos,
        bos_token_id=tok.bos_token_id,
        pad_token_id=LLADA_EOS_ID,
        chat_template=bool(getattr(tok, "chat_template", None)),
    )
