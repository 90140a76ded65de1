"""The LLaDA family: bidirectional Llama-style diffusion LMs (GSAI-ML/LLaDA-8B-Base / -Instruct).

Quirks kept here (docs/models.md lists where each is tested):

* the remote code: ``LLaDAModelLM.forward`` takes ``inputs_embeds`` (its inner model calls the same tensor
  ``input_embeddings``) and no other keyword; loaded with ``trust_remote_code`` only when the user asks;
* the mask id: the released tokenizer gives ``<|mdm_mask|>`` (126336) no mask role, so it comes from the config
  (``mask_token_id``), then the tokenizer, then the constant below with a warning;
* EOS ``<|endoftext|>`` (126081) from the tokenizer / generation config and EoT ``<|eot_id|>`` (126348) from the
  chat template; the constants only as a warned fallback;
* left padding with EOS as the pad id; a vocabulary padded past the tokenizer (masked in the base class);
* the Instruct chat template starts with BOS and the tokenizer adds one: the base class keeps one;
* LLaDA-1.5 (``GSAI-ML/LLaDA-1.5``, VRPO-aligned LLaDA-8B-Instruct) is the same architecture and files: a row of
  this family, not a family of its own.

The family's facts are its registration at the end of this module (:mod:`dlmeval.models.family`).
"""

from __future__ import annotations

from pathlib import Path

from dlmeval.errors import CheckpointError
from dlmeval.models.base import DiffusionLM, RunOut, one_input
from dlmeval.models.family import CHECK_ROWS, Family, LoadOptions, register_family
from dlmeval.models.remote import remote_loader
from dlmeval.models.standins import RemoteCodeStandin, fast_tokenizer, register_remote_standin
from dlmeval.models.tiny import standin_loader

LLADA_MASK_ID = 126336
LLADA_EOS_ID = 126081
LLADA_EOT_ID = 126348


class LLaDALM(DiffusionLM):
    family = "llada"

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        kw = one_input(
            input_ids, inputs_embeds, attention_mask=attention_mask, output_hidden_states=output_hidden_states
        )
        return RunOut.of(self.module(**kw), output_hidden_states)


def _refuse_moe(path: str) -> None:
    """A LLaDA-MoE directory (its config names ``num_experts``; its ``model_type`` is also ``llada``) is refused
    with the spec to use, instead of loading under the dense family's facts."""
    from dlmeval.models.lladamoe import is_moe_config

    if is_moe_config(path):
        raise CheckpointError(
            f"{path} is a LLaDA-MoE checkpoint (config.json names num_experts), not dense LLaDA; use llada-moe:{path}"
        )


def load_llada(path: str, **kw) -> LLaDALM:
    """Load a LLaDA checkpoint directory (keywords of :func:`dlmeval.models.remote.load_remote_family`)."""
    from dlmeval.models.remote import load_remote_family

    _refuse_moe(path)
    return load_remote_family(FAMILY, path, **kw)


def _load(path: str, opts: LoadOptions) -> LLaDALM:
    _refuse_moe(path)
    return remote_loader("llada")(path, opts)


# the stand-in ``tiny-llada`` (:mod:`dlmeval.models.standins` builds, trains and caches it). What it reproduces of
# the real code (issue 12): the outer forward takes ``inputs_embeds`` (the inner model ``input_embeddings``) and
# raises on any other keyword; a 2-D attention mask; a fast tokenizer that adds BOS and a Llama-3-style chat
# template that starts with BOS; the mask token ``<|mdm_mask|>`` known to the config only (the tokenizer has no mask
# role); EoT ``<|eot_id|>`` only in the chat template; a model vocabulary padded past the tokenizer's.

STANDIN_SPECIALS = [
    "<|endoftext|>",
    "<|startoftext|>",
    "[UNK]",
    "<|mdm_mask|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
STANDIN_CHAT = (
    "{% for m in messages %}{% set c = '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
    "m['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set c = bos_token + c %}{% endif %}"
    "{{ c }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)


def _standin_tokenizer(out: Path) -> dict[str, int]:
    """LLaDA's fast tokenizer in miniature: it adds ``<|startoftext|>``; ``<|mdm_mask|>`` is no mask role (the
    mask id comes from ``config.json``)."""
    _, vocab = fast_tokenizer(
        out,
        STANDIN_SPECIALS,
        specials_first=False,
        bos="<|startoftext|>",
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|mdm_mask|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        chat_template=STANDIN_CHAT,
    )
    return vocab


def _standin_config(*, vocab_size: int, hidden: int, layers: int, eos: int, mask: int, bos: int) -> tuple:
    """The config of ``tiny-llada`` (``auto_map`` to dlmeval's LLaDA-interface code) and its generation config."""
    v = vocab_size
    cfg = {
        "architectures": ["TinyLLaDAModelLM"],
        "auto_map": {
            "AutoConfig": "configuration_tiny_llada.TinyLLaDAConfig",
            "AutoModel": "modeling_tiny_llada.TinyLLaDAModelLM",
            "AutoModelForCausalLM": "modeling_tiny_llada.TinyLLaDAModelLM",
        },
        "model_type": "llada",
        "d_model": hidden,
        "n_heads": 4,
        "n_kv_heads": 4,
        "n_layers": layers,
        "mlp_hidden_size": 2 * hidden,
        "vocab_size": v,
        "embedding_size": v,
        "max_sequence_length": 128,
        "mask_token_id": mask,
        "eos_token_id": eos,
        "pad_token_id": eos,
        "use_cache": False,
        "tie_word_embeddings": False,
    }
    return cfg, {"bos_token_id": bos, "eos_token_id": eos}


register_remote_standin(
    "llada",
    RemoteCodeStandin(
        tokenizer=_standin_tokenizer,
        eos_token="<|endoftext|>",
        mask_token="<|mdm_mask|>",
        bos_token="<|startoftext|>",
        config=_standin_config,
        code_files=("standin_layers.py", "configuration_tiny_llada.py", "modeling_tiny_llada.py"),
        load=load_llada,
        source=__file__,
    ),
)

FAMILY = register_family(
    Family(
        name="llada",
        kind="diffusion",
        prefix="llada",
        description="LLaDA family (mask 126336, left padding); remote code only with --trust-remote-code",
        adapter=LLaDALM,
        load=_load,
        standin="tiny-llada",
        load_standin=standin_loader("llada"),
        standin_description="LLaDA stand-in: a checkpoint directory with auto_map and dlmeval's own "
        "LLaDA-interface code (tests)",
        remote_code=True,
        model_type="llada",
        max_length_key="max_sequence_length",
        mask_sources=("config", "generation config", "tokenizer"),
        default_mask_id=LLADA_MASK_ID,
        default_eos_ids=(LLADA_EOS_ID, LLADA_EOT_ID),
        bos="tokenizer",
        padding_side="left",
        tokenizer_quirks=(
            "fast tokenizer adds BOS; a chat template that starts with BOS is kept to one",
            "<|mdm_mask|> has no mask role in the tokenizer: the id comes from config.json",
            "model vocabulary padded past the tokenizer (126,464 rows, 126,349 tokens)",
        ),
        chat_template="optional",
        logit_shift=0,
        likelihood_vocab="all",  # LLaDA's get_log_likelihood.py / eval_llada.py: F.cross_entropy over every output row
        attention="bidirectional",
        native_schedule="linear",
        # generate.py: remasking='low_confidence' is dlmeval's `none` (unmask by confidence, never re-mask);
        # remasking='random' is a random unmasking order, dlmeval's `origin` under the linear schedule
        native_samplers={"low_confidence": "none", "random": "origin"},
        # generate.py's defaults as its README calls it (chat.py / eval_llada.py): gen_length 128, steps 128,
        # block_length 32, temperature 0, cfg_scale 0, remasking low_confidence
        generation={
            "strategy": "none",
            "length": 128,
            "steps": 128,
            "block_length": 32,
            "temperature": 0.0,
            "schedule": "linear",
        },
        # the sampler row skips: the checkpoint ships no sampler (generate.py lives in the GitHub repository)
        checks=CHECK_ROWS,
        hub_ids=("GSAI-ML/LLaDA-8B-Base", "GSAI-ML/LLaDA-8B-Instruct", "GSAI-ML/LLaDA-1.5"),
        module=__name__,
    )
)
