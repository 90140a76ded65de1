"""Chat prompts as the families' own code builds them (#34): dllm's get_tokenizer / samplers take
``apply_chat_template(tokenize=True)`` ids (no special tokens added to the templated text), its Qwen A2D tokenizers
render with ``enable_thinking=False``, and its ``sample_trim`` cuts a BERT-Chat answer at ``[/Answer]``."""

from __future__ import annotations

import pytest

from dlmeval.models import load_diffusion
from dlmeval.protocols.common import cut_at
from dlmeval.tasks import chat_formatter

USER = "What is 2+2?"
# Qwen3's chat template ends this way: an empty think block when enable_thinking is false
QWEN3_TAIL = (
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% endif %}"
)


def _dllm_ids(m, **kw):
    """What dllm's samplers are given: tokenizer.apply_chat_template(messages, add_generation_prompt=True,
    tokenize=True) (with dllm's enable_thinking=False default for Qwen A2D tokenizers)."""
    out = m.tokenizer.apply_chat_template(
        [{"role": "user", "content": USER}], add_generation_prompt=True, tokenize=True, **kw
    )
    return list(out["input_ids"] if isinstance(out, dict) else out)


def test_bert_chat_prompt_ids_are_dllms_no_cls():
    m = load_diffusion("tiny-bert-chat")
    text = chat_formatter(m)(USER)
    assert text == "[Question]\nWhat is 2+2?\n[/Question]\n\n[Answer]\n"
    assert m.encode_chat(text) == _dllm_ids(m)
    assert m.encode(text)[0] == m.tokenizer.cls_token_id  # what was fed before: [CLS] in front
    assert m.encode_chat(text)[0] != m.tokenizer.cls_token_id


def test_bert_chat_answers_end_at_the_answer_marker():
    m = load_diffusion("tiny-bert-chat")
    assert cut_at("four\n[/Answer]\n\n[Question]\nmore", m.answer_end) == "four\n"


@pytest.mark.parametrize("kind", ["tiny-a2d", "tiny-a2d-bd3lm"])
def test_a2d_on_a_qwen3_template_closes_the_think_block_as_dllm(kind):
    m = load_diffusion(kind)
    tpl = m.tokenizer.chat_template
    m.tokenizer.chat_template = tpl[: tpl.index("{% if add_generation_prompt %}")] + QWEN3_TAIL
    text = chat_formatter(m)(USER)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert m.encode_chat(text) == _dllm_ids(m, enable_thinking=False)


def test_families_without_dllm_quirks_keep_their_prompts():
    m = load_diffusion("tiny-llada")
    assert m.chat_kwargs == {} and m.chat_special_tokens and m.answer_end == ()
    text = chat_formatter(m)(USER)
    assert m.encode_chat(text) == m.encode(text)


def test_bert_chat_prompt_ids_match_values_recorded_from_dllm():
    """Parity: dlmeval's BERT-Chat template and encoding give the prompt ids dllm's template and
    apply_chat_template(tokenize=True) gave (tests/parity/bert_chat_prompts.json says how they were recorded)."""
    import json
    from pathlib import Path

    rec = json.loads((Path(__file__).parents[1] / "parity" / "bert_chat_prompts.json").read_text())
    m = load_diffusion(rec["model"])
    assert len(rec["cases"]) == 3
    for case in rec["cases"]:
        text = m.tokenizer.apply_chat_template(case["messages"], tokenize=False, add_generation_prompt=True)
        assert m.encode_chat(text) == case["prompt_ids"], case["messages"]
    first = rec["cases"][0]
    assert m.encode_chat(chat_formatter(m)(first["messages"][0]["content"])) == first["prompt_ids"]
