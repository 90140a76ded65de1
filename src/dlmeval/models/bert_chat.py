"""The BERT-Chat family (dllm's ``dllm-hub/ModernBERT-{base,large}-chat-v0.1``): ModernBERT fine-tuned to chat by
masked diffusion SFT, the Care leaderboard's BERT-Chat (150M) row.

Quirks kept here (docs/models.md, "BERT-Chat"):

* the network is an ordinary ``ModernBertForMaskedLM`` (no remote code, no shift, bidirectional);
* the **chat template** is dllm's (``[Question] ... [/Question]`` / ``[Answer] ... [/Answer]``, an optional
  ``[SYS]`` block), which dllm's ``get_tokenizer`` installs in code; a tokenizer that ships none gets it here,
  with a load warning;
* **EOS is the pad token**: ModernBERT's tokenizer names no EOS, dllm sets ``eos_token = pad_token`` and trains on
  the padded EOS (``NoAttentionMaskWrapper``: "padded <eos_token> should be visible"), so a generated answer
  ends with ``[PAD]``; ``[SEP]`` (which closes every encoded text) also ends one;
* ``[/Answer]`` (dllm's ``eot_token``) is text to ModernBERT's tokenizer, not one token: it is not an EOS id.
"""

from __future__ import annotations

from pathlib import Path

from dlmeval.errors import CheckpointError, InputError
from dlmeval.models import validate
from dlmeval.models.family import Family, path_loader, register_family
from dlmeval.models.hf_mlm import HFMaskedLM, load_masked_lm
from dlmeval.models.standin_families import CheckpointStandin, register_checkpoint_standin
from dlmeval.models.tiny import standin_loader

#: dllm's BERT-Chat template (``dllm.utils.get_tokenizer`` for BERT / RoBERTa / ModernBERT), written out
BERT_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}[SYS]\n{{ messages[0]['content'] | trim }}\n[/SYS]\n\n"
    "{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif -%}"
    "{%- for message in loop_messages %}{% if message['role'] == 'user' %}[Question]\n"
    "{{ message['content'] | trim }}\n[/Question]\n\n{% elif message['role'] == 'assistant' %}[Answer]\n"
    "{{ message['content'] | trim }}\n[/Answer]\n\n{% endif %}{% endfor -%}"
    "{%- if add_generation_prompt and (loop_messages | length == 0 or loop_messages[-1]['role'] != 'assistant') %}"
    "[Answer]\n{% endif %}"
)


class BertChatLM(HFMaskedLM):
    family = "bert-chat"
    # dllm's prompts: apply_chat_template(tokenize=True), no [CLS] / [SEP] around the templated text; its
    # sample_trim cuts an answer at the eot_token "[/Answer]" (text to ModernBERT's tokenizer)
    chat_special_tokens = False
    answer_end = ("[/Answer]",)


def bert_chat_eos(tok) -> list[int]:
    """EOS ids: the tokenizer's EOS (dllm: the pad token when it has none), then ``[SEP]``."""
    eos = tok.eos_token_id if tok.eos_token_id is not None else tok.pad_token_id
    out = [int(eos)] if eos is not None else []
    if tok.sep_token_id is not None and tok.sep_token_id not in out:
        out.append(int(tok.sep_token_id))
    return out


def load_bert_chat(
    path: str, *, device=None, dtype=None, allow_download: bool = False, name=None
) -> BertChatLM:
    def bert_local(p: str) -> None:
        raw = validate.check_dir(p, "BERT-Chat")
        validate.check_model_type(raw, ("bert",), p, "a BERT-style masked LM")

    def bert_config(cfg) -> None:
        if "bert" not in str(getattr(cfg, "model_type", "")):
            raise InputError(
                f"{path} is a {cfg.model_type!r} model, not a BERT-style masked LM; use the matching spec"
            )

    def has_mask(tok) -> None:
        if tok.mask_token_id is None:
            raise CheckpointError(
                f"BERT-Chat checkpoint {path}: the tokenizer has no mask token; use the release's tokenizer files"
            )

    module, tok, cfg, dev, dt = load_masked_lm(
        path,
        label="BERT-Chat",
        what="BERT-Chat model",
        device=device,
        dtype=dtype,
        allow_download=allow_download,
        check_local=bert_local,
        check_config=bert_config,
        check_tokenizer=has_mask,
    )
    notes = []
    if not getattr(tok, "chat_template", None):
        tok.chat_template = BERT_CHAT_TEMPLATE
        notes.append("bert-chat: the tokenizer ships no chat template; using dllm's BERT-Chat template")
    if tok.eos_token_id is None:
        notes.append("bert-chat: the tokenizer names no EOS; the pad token ends a text (as dllm trains it)")
    m = BertChatLM(
        module,
        tok,
        name=name or Path(path).name,
        source=str(path),
        max_length=int(getattr(cfg, "max_position_embeddings", 512)),
        device=dev,
        dtype=dt,
        eos_token_ids=bert_chat_eos(tok),
        chat_template=True,
    )
    m.load_warnings = notes
    return m


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
#: the words of dllm's BERT-Chat template that the stand-in's vocabulary adds to the shared stand-in words
BERT_CHAT_WORDS = ("[", "]", "/", "sys", "answer", "question")


def _standin_files(kind: str, out: Path, hidden: int, layers: int):
    """``tiny-bert-chat``: ``model_type: modernbert``, a BERT tokenizer whose EOS is ``[PAD]`` (as dllm's
    ``get_tokenizer`` sets it) and dllm's BERT-Chat chat template."""
    from dlmeval.models.standins import fast_tokenizer

    tok, vocab = fast_tokenizer(
        out,
        BERT_SPECIALS,
        extra_words=BERT_CHAT_WORDS,
        template=("[CLS] $A [SEP]", "[CLS] $A [SEP] $B [SEP]"),
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        eos_token="[PAD]",  # dllm: a BERT tokenizer without EOS gets its pad token as EOS
        mask_token="[MASK]",
        chat_template=BERT_CHAT_TEMPLATE,
    )
    cfg = {
        "model_type": "modernbert",
        "architectures": ["ModernBertForMaskedLM"],
        "vocab_size": len(vocab),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "max_position_embeddings": 128,
        "global_attn_every_n_layers": 1,
        "local_attention": 16,
        "pad_token_id": vocab["[PAD]"],
        "cls_token_id": vocab["[CLS]"],
        "sep_token_id": vocab["[SEP]"],
        "bos_token_id": vocab["[CLS]"],
        "eos_token_id": vocab["[SEP]"],
        "embedding_dropout": 0.0,
        "attention_dropout": 0.0,
        "mlp_dropout": 0.0,
        "reference_compile": False,
    }
    mask, start = vocab["[MASK]"], [vocab["[CLS]"]]
    return tok, vocab, cfg, mask, start


def _standin_module(kind: str, out: Path, cfg: dict):
    from transformers import AutoConfig, AutoModelForMaskedLM

    d = {k: v for k, v in cfg.items() if k != "model_type"}
    return AutoModelForMaskedLM.from_config(AutoConfig.for_model("modernbert", **d))


register_checkpoint_standin(
    "bert-chat",
    CheckpointStandin(
        files=_standin_files, module=_standin_module, adapter=BertChatLM, load=load_bert_chat, source=__file__
    ),
)

FAMILY = register_family(
    Family(
        name="bert-chat",
        kind="diffusion",
        prefix="bert-chat",
        description="dllm's BERT-Chat (ModernBERT fine-tuned to chat by diffusion SFT): dllm's chat template, "
        "EOS = the pad token",
        adapter=BertChatLM,
        load=path_loader("bert-chat", "bert-chat:./ModernBERT-large-chat-v0.1", load_bert_chat),
        standin="tiny-bert-chat",
        load_standin=standin_loader("bert-chat"),
        standin_description="BERT-Chat stand-in: a ModernBERT masked LM directory with dllm's chat template "
        "and [PAD] as EOS (tests)",
        mask_sources=("tokenizer",),
        bos="tokenizer",
        padding_side="right",
        tokenizer_quirks=(
            "[CLS] ... [SEP] wrapping",
            "no EOS in ModernBERT's tokenizer: the pad token ends an answer (dllm trains on padded EOS)",
            "[/Answer] is text, not one token",
        ),
        chat_template="required",
        logit_shift=0,
        likelihood_vocab="all",  # dllm's BERT harness: F.cross_entropy over every output row
        attention="bidirectional",
        native_schedule="linear",
        native_samplers={"low_confidence": "none", "random": "origin"},
        hub_ids=("dllm-hub/ModernBERT-base-chat-v0.1", "dllm-hub/ModernBERT-large-chat-v0.1"),
        module=__name__,
    )
)
