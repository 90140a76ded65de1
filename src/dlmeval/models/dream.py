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
* a vocabulary padded past the tokenizer (152,064 rows, 151,667 tokens; masked in the base class);
* q/k/v projections with biases (Qwen2's attention), o_proj without;
* Dream-Coder (``Dream-org/Dream-Coder-v0-Instruct-7B``, Dream trained on code from Qwen2.5-Coder) has the same
  architecture, tokenizer layout and ``diffusion_generate``: a row of this family.

The family's facts (the shift, BOS rule, schedule, native samplers) are its registration at the end of this
module (:mod:`dlmeval.models.family`).
"""

from __future__ import annotations

from pathlib import Path

from dlmeval.models.base import DiffusionLM, RunOut, one_input
from dlmeval.models.family import CHECK_ROWS, Family, register_family
from dlmeval.models.remote import remote_loader
from dlmeval.models.standins import RemoteCodeStandin, register_remote_standin, words, write_json
from dlmeval.models.tiny import standin_loader

DREAM_MASK_ID = 151666
DREAM_EOS_ID = 151643
DREAM_IM_END_ID = 151645


class DreamLM(DiffusionLM):
    family = "dream"

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        import torch

        x = input_ids if input_ids is not None else inputs_embeds
        b, n = x.shape[0], x.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(b, n, dtype=torch.long, device=x.device)
        am = attention_mask.bool()
        mask4 = (am[:, None, :, None] & am[:, None, None, :]) | torch.eye(
            n, dtype=torch.bool, device=x.device
        )
        pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        kw = one_input(
            input_ids,
            inputs_embeds,
            attention_mask=mask4,
            position_ids=pos,
            output_hidden_states=output_hidden_states,
        )
        return RunOut.of(self.module(**kw), output_hidden_states)


def load_dream(path: str, **kw) -> DreamLM:
    """Load a Dream checkpoint directory (keywords of :func:`dlmeval.models.remote.load_remote_family`)."""
    from dlmeval.models.remote import load_remote_family

    return load_remote_family(FAMILY, path, **kw)


# the stand-in ``tiny-dream`` (:mod:`dlmeval.models.standins` builds, trains and caches it). What it reproduces of
# the real code (issue 12): a 4-D boolean attention mask and position ids consumed as given (a 2-D mask is
# refused); the output at ``i - 1`` predicts token ``i`` (trained with that shift); a *slow* tokenizer (no offsets)
# that adds no BOS; ``<|im_end|>`` only in the chat template; ``diffusion_generate`` (Dream's sampler semantics); a
# config whose ``bos_token_id`` is the tokenizer's EOS (as Dream's); a padded model vocabulary.

STANDIN_SPECIALS = ["<|unk|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"]
STANDIN_CHAT = (
    "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nyou are a helpful assistant .<|im_end|>\\n' }}"
    "{% endif %}{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _standin_tokenizer(out: Path) -> dict[str, int]:
    vocab = {t: i for i, t in enumerate(words() + STANDIN_SPECIALS)}
    write_json(out / "vocab.json", vocab)
    write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "TinyDreamTokenizer",
            "auto_map": {"AutoTokenizer": ["tokenization_tiny_dream.TinyDreamTokenizer", None]},
            "add_bos_token": False,
            "bos_token": "<|beginoftext|>",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "mask_token": "<|mask|>",
            "unk_token": "<|unk|>",
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "chat_template": STANDIN_CHAT,
            "model_max_length": 128,
            "clean_up_tokenization_spaces": False,
        },
    )
    return vocab


def _standin_config(*, vocab_size: int, hidden: int, layers: int, eos: int, mask: int, bos: int) -> tuple:
    """The config of ``tiny-dream`` (``auto_map`` to dlmeval's Dream-interface code) and its generation config."""
    v = vocab_size
    cfg = {
        "architectures": ["TinyDreamModel"],
        "auto_map": {
            "AutoConfig": "configuration_tiny_dream.TinyDreamConfig",
            "AutoModel": "modeling_tiny_dream.TinyDreamModel",
        },
        "model_type": "Dream",
        "vocab_size": v,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "mask_token_id": mask,
        "bos_token_id": eos,  # Dream's config names <|endoftext|> as BOS; its tokenizer's BOS is <|beginoftext|>
        "eos_token_id": eos,
        "pad_token_id": eos,
        "tie_word_embeddings": False,
    }
    gen = {
        "alg": "origin",
        "alg_temp": None,
        "eps": 0.001,
        "steps": 512,
        "mask_token_id": None,
        "bos_token_id": eos,
        "eos_token_id": eos,
        "pad_token_id": eos,
    }
    return cfg, gen


register_remote_standin(
    "dream",
    RemoteCodeStandin(
        tokenizer=_standin_tokenizer,
        eos_token="<|endoftext|>",
        mask_token="<|mask|>",
        bos_token="<|beginoftext|>",
        config=_standin_config,
        code_files=(
            "standin_layers.py",
            "configuration_tiny_dream.py",
            "modeling_tiny_dream.py",
            "tokenization_tiny_dream.py",
        ),
        load=load_dream,
        logit_shift=1,  # the family's shift: the stand-in is trained with Dream's alignment
        source=__file__,
    ),
)

FAMILY = register_family(
    Family(
        name="dream",
        kind="diffusion",
        prefix="dream",
        description="Dream family (mask 151666, shifted logits re-aligned); remote code only with "
        "--trust-remote-code",
        adapter=DreamLM,
        load=remote_loader("dream"),
        standin="tiny-dream",
        load_standin=standin_loader("dream"),
        standin_description="Dream stand-in: auto_map directory, Dream's interface (4-D mask, shift, q/k/v "
        "biases, slow tokenizer, diffusion_generate) (tests)",
        remote_code=True,
        model_type="dream",
        max_length_key="max_position_embeddings",
        mask_sources=("config", "generation config", "tokenizer"),
        default_mask_id=DREAM_MASK_ID,
        default_eos_ids=(DREAM_EOS_ID, DREAM_IM_END_ID),
        bos="prepend",
        padding_side="left",
        tokenizer_quirks=(
            "slow tokenizer (DreamTokenizer): character spans by incremental decoding",
            "adds no BOS: <|beginoftext|> is prepended so the first token is scored from a real position",
            "config bos_token_id 151643 is the tokenizer's EOS: the tokenizer's BOS is used",
            "model vocabulary padded past the tokenizer (152,064 rows, 151,667 tokens)",
        ),
        chat_template="optional",
        logit_shift=1,
        likelihood_vocab="all",  # Dream's lm-eval harness (dllm's port): F.cross_entropy over every output row
        attention="bidirectional",
        native_schedule="dream",  # diffusion_generate: int(M * (1 - s / t)) per step, a pass at every step
        # generation_utils.py's `alg` values -> the dlmeval strategy that reproduces each (docs/models.md)
        native_samplers={
            "origin": "origin",
            "maskgit_plus": "maskgit",
            "topk_margin": "topk_margin",
            "entropy": "entropy",
        },
        # what dlmeval reproduces: diffusion_generate with an explicit generation config of these values and
        # top_k=None (the released generation_config.json has no top_k, but `diffusion_generate(**kwargs)`
        # builds its config from the model's, and the model card's call passes alg="entropy", alg_temp=0.,
        # top_p=0.95, temperature=0.2, steps=max_new_tokens)
        generation={
            "strategy": "entropy",
            "position_temperature": 0.0,
            "temperature": 0.2,
            "top_p": 0.95,
            "top_k": None,
            "eps": 1e-3,
            "schedule": "dream",
        },
        checks=CHECK_ROWS,
        hub_ids=(
            "Dream-org/Dream-v0-Base-7B",
            "Dream-org/Dream-v0-Instruct-7B",
            "Dream-org/Dream-Coder-v0-Instruct-7B",
        ),
        module=__name__,
    )
)
