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


def test_bd3lm_pass_treats_pad_ids_in_the_prefix_as_dllm_does():
    """dllm's BD3LM sampler marks every pad id before the current block as padding (the prompt's own pad ids and
    the EOS = pad ids a finished block decoded); dlmeval's block passes build the same mask and positions
    (tests/parity/dllm_bd3lm_prefix.json, recorded from dllm's _prepare_for_sampling)."""
    import json
    from pathlib import Path

    import torch

    from dlmeval.models.base import block_causal_mask
    from dlmeval.sampling.block_causal import dllm_valid

    rec = json.loads((Path(__file__).parents[1] / "parity" / "dllm_bd3lm_prefix.json").read_text())
    x = torch.tensor(rec["rows"])
    start, block = rec["current_block_start"], rec["block_size"]
    # dlmeval's layout marks only the left padding of the prompt as padding
    layout = torch.ones_like(x)
    layout[0, :4] = 0
    layout[1, :3] = 0
    valid = dllm_valid(x, layout, rec["pad_id"], start)
    mask, pos = block_causal_mask(valid, x.shape, block)
    real = valid.bool()
    want = torch.tensor(rec["full_attention_mask"]).bool()
    # queries that are tokens see exactly dllm's keys (a padded query sees itself in dlmeval, nothing in dllm)
    assert torch.equal(mask[:, 0][real], want[real])
    assert torch.equal(pos, torch.tensor(rec["full_position_ids"]))
    pmask, ppos = block_causal_mask(valid[:, :start], (x.shape[0], start), block)
    pwant = torch.tensor(rec["prefix_attention_mask"]).bool()
    assert torch.equal(pmask[:, 0][real[:, :start]], pwant[real[:, :start]])
    assert torch.equal(ppos, torch.tensor(rec["prefix_position_ids"]))
    # without dllm's rule the pad ids inside would be tokens: the rule is what makes them equal
    assert not torch.equal(block_causal_mask(layout, x.shape, block)[1], pos)


def test_bd3lm_sampler_passes_drop_pad_ids_from_the_prefix():
    """The sampler's block passes use that rule: a prompt holding the pad id reaches the network without it."""
    from dlmeval.sampling.block import BlockDiffusionSampler
    from dlmeval.sampling.config import SamplerConfig

    m = load_diffusion("tiny-a2d-bd3lm", device="cpu")
    seen = []
    orig = m.logits_at

    def spy(x, a, pos, **kw):
        seen.append((x.clone(), a.clone(), kw.get("block_size")))
        return orig(x, a, pos, **kw)

    m.logits_at = spy
    pad = m.pad_token_id
    prompt = [4, pad, 59, 60, 61]
    BlockDiffusionSampler(m, SamplerConfig(length=8, steps=8, seed=0)).sample([prompt])
    x, a, block = seen[0]
    assert block == m.block_size
    cols = (x[0] == pad).nonzero().flatten().tolist()
    assert cols and all(int(a[0, c]) == 0 for c in cols)  # left padding and the pad id inside: no token
    assert (
        int(a[0].sum()) == len(prompt) - 1 + m.block_size
    )  # the prompt's other tokens and the current block
