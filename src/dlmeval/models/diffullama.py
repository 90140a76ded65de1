"""The DiffuLLaMA family (HKUNLP, ``diffusionfamily/diffullama``): LLaMA-2-7B adapted to masked diffusion, the
Care leaderboard's DiffuLLaMA-7B row.

Quirks kept here (docs/models.md, "DiffuLLaMA"):

* the checkpoint is a plain ``LlamaForCausalLM`` (``model_type: llama``, no remote code); DiffuLLaMA's own code
  monkey-patches ``LlamaModel.forward`` to take a 4-D additive mask and passes an all-zero one (**full
  attention**). dlmeval passes an explicit 4-D mask too (padding-only), so the causal default never runs;
* the **one-position logit shift** (its ``shift=True``, "do not change this"): the output at ``i - 1`` predicts
  token ``i``; ``logit_shift = 1`` re-aligns it, and the first token (BOS, which the LLaMA tokenizer adds) reads
  its own output, as DiffuLLaMA's ``x0 = cat([x[:, :1], x0[:, :-1]])`` keeps it;
* the mask token is the one added to the tokenizer (``tokenizer.mask_token_id``; its embeddings were resized to
  ``len(tokenizer)``); a tokenizer without one is refused (no constant to fall back on);
* DiffuLLaMA's own sampler does not handle padding (its mask is all zeros); dlmeval masks padded keys and counts
  position ids from each row's first real token, so an unpadded row matches its code exactly and a padded one
  matches the unpadded row.
"""

from __future__ import annotations

from pathlib import Path

from dlmeval.errors import CheckpointError
from dlmeval.models.a2d import HFBidirectionalLM, load_hf_bidirectional
from dlmeval.models.family import Family, path_loader, register_family
from dlmeval.models.standin_families import CheckpointStandin, register_checkpoint_standin
from dlmeval.models.tiny import standin_loader


class DiffuLLaMALM(HFBidirectionalLM):
    family = "diffullama"
    logit_shift = 1
    block_attention = False  # full attention only


def _mask_id(tok, label: str, path: str, cfg: dict) -> tuple[int, list[str]]:
    if tok.mask_token_id is None:
        raise CheckpointError(
            f"{label} checkpoint {path}: the tokenizer has no mask token; DiffuLLaMA's tokenizer adds one "
            "(tokenizer.add_special_tokens({'mask_token': '[MASK]'})): use its released tokenizer files"
        )
    return int(tok.mask_token_id), []


def load_diffullama(path: str, *, device=None, dtype=None, allow_download: bool = False, name=None):
    return load_hf_bidirectional(
        DiffuLLaMALM,
        path,
        label="DiffuLLaMA",
        types={"llama": "llama"},
        device=device,
        dtype=dtype,
        allow_download=allow_download,
        name=name,
        mask_resolver=_mask_id,
    )


LLAMA_SPECIALS = ["<unk>", "<s>", "</s>", "[MASK]"]


def _standin_files(kind: str, out: Path, hidden: int, layers: int):
    """``tiny-diffullama``: ``model_type: llama`` (plain LLaMA weights), a LLaMA-style tokenizer that adds BOS, with
    ``[MASK]`` added as mask token; trained with the shift (output ``i - 1`` predicts token ``i``)."""
    from dlmeval.models.standins import fast_tokenizer

    tok, vocab = fast_tokenizer(
        out,
        LLAMA_SPECIALS,
        bos="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        mask_token="[MASK]",
    )
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": len(vocab),  # DiffuLLaMA resizes the embeddings to len(tokenizer) (mask token added)
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "bos_token_id": vocab["<s>"],
        "eos_token_id": vocab["</s>"],
    }
    mask, start = vocab["[MASK]"], [vocab["<s>"]]
    return tok, vocab, cfg, mask, start


def _standin_module(kind: str, out: Path, cfg: dict):
    from transformers import AutoConfig, AutoModelForCausalLM

    d = {k: v for k, v in cfg.items() if k != "model_type"}
    return AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", **d))


register_checkpoint_standin(
    "diffullama",
    CheckpointStandin(
        files=_standin_files,
        module=_standin_module,
        adapter=DiffuLLaMALM,
        load=load_diffullama,
        source=__file__,
    ),
)

FAMILY = register_family(
    Family(
        name="diffullama",
        kind="diffusion",
        prefix="diffullama",
        description="DiffuLLaMA (LLaMA-2 adapted to diffusion: full attention, shifted logits); plain LLaMA "
        "weights, no remote code",
        adapter=DiffuLLaMALM,
        load=path_loader("diffullama", "diffullama:./diffullama", load_diffullama),
        standin="tiny-diffullama",
        load_standin=standin_loader("diffullama"),
        standin_description="DiffuLLaMA stand-in: a model_type llama directory, [MASK] added to a BOS-adding "
        "tokenizer, trained with the shift (tests)",
        mask_sources=("tokenizer",),
        bos="tokenizer",
        padding_side="left",
        tokenizer_quirks=(
            "the LLaMA tokenizer adds BOS: the first text token is scored from the BOS output",
            "[MASK] added to the tokenizer (embeddings resized to len(tokenizer))",
        ),
        chat_template="none",
        logit_shift=1,
        attention="bidirectional",
        native_schedule="linear",
        hub_ids=("diffusionfamily/diffullama",),
        module=__name__,
    )
)
