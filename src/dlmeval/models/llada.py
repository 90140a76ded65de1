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

from pathlib import Path

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.base import DiffusionLM, RunOut, resolve_device, resolve_dtype

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


def _version_note(family: str) -> list[str]:
    """A warning when the installed transformers is outside the range the families' remote code runs on."""
    import warnings

    from dlmeval.models.registry import SUPPORTED_TRANSFORMERS, transformers_status

    version, ok = transformers_status()
    if ok:
        return []
    note = f"{family}: transformers {version} is outside {SUPPORTED_TRANSFORMERS}, the range its remote code runs on"
    warnings.warn(note, UserWarning, stacklevel=3)
    return [note]


def _generation_config(path: str, kw: dict):
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(path, **kw)
    except (OSError, ValueError):
        return None


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

    from dlmeval.models.tokens import special_ids_from_files

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
    mid, eos, notes = special_ids_from_files(
        tok,
        cfg,
        _generation_config(path, {"local_files_only": not allow_download}),
        family="llada",
        mask_override=mask_token_id,
        eos_override=eos_token_ids,
        default_mask=LLADA_MASK_ID,
        default_eos=(LLADA_EOS_ID, LLADA_EOT_ID),
    )
    pad = tok.pad_token_id if tok.pad_token_id is not None else getattr(cfg, "pad_token_id", None)
    m = LLaDALM(
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
        pad_token_id=pad if pad is not None else eos[0],
        chat_template=bool(getattr(tok, "chat_template", None)),
    )
    m.load_warnings = notes + _version_note("llada")
    return m
