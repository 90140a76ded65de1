"""The leaderboard families beyond LLaDA and Dream (issue 21): A2D (MDLM / BD3LM), DiffuLLaMA, BERT-Chat,
LLaDA-MoE, each loaded from a stand-in checkpoint directory through the loader a real checkpoint takes; the
block-diffusion sampler and its NFE; soft-mask feedback."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models.family import FAMILIES
from dlmeval.models.registry import load_diffusion

NEW = ("tiny-a2d", "tiny-a2d-bd3lm", "tiny-diffullama", "tiny-bert-chat", "tiny-llada-moe")


@pytest.fixture(scope="module")
def models():
    return {k: load_diffusion(k) for k in NEW}


def test_every_new_family_is_registered_with_its_facts():
    facts = {f.name: f for f in FAMILIES.values()}
    assert facts["a2d"].attention == "bidirectional" and facts["a2d-bd3lm"].attention == "block-causal"
    assert facts["diffullama"].logit_shift == 1 and facts["a2d"].logit_shift == 0
    assert facts["lladamoe"].remote_code and not facts["a2d"].remote_code
    assert facts["bert-chat"].chat_template == "required"
    assert {f.standin for f in FAMILIES.values()} >= set(NEW)


@pytest.mark.parametrize("spec", NEW)
def test_left_or_right_padding_changes_no_logit(models, spec):
    m = models[spec]
    long, short = m.encode("the cat sat on the big red"), m.encode("a dog")
    alone = m.logits(*m.pad([short]))[0]
    for side in ("left", "right"):
        ids, attn = m.pad([long, short], side=side)
        z = m.logits(ids, attn)[1]
        z = z[-len(short) :] if side == "left" else z[: len(short)]
        assert torch.allclose(z, alone, atol=1e-4), (spec, side, float((z - alone).abs().max()))


@pytest.mark.parametrize("spec", ["tiny-a2d", "tiny-diffullama", "tiny-llada-moe", "tiny-bert-chat"])
def test_attention_is_bidirectional(models, spec):
    """Changing the last token changes the logits at the first positions (a causal network could not)."""
    m = models[spec]
    a, b = m.encode("the cat sat on the mat"), m.encode("the cat sat on the dog")
    za, zb = m.logits(*m.pad([a])), m.logits(*m.pad([b]))
    assert float((za[0, :2] - zb[0, :2]).abs().max()) > 1e-4


def test_diffullama_output_is_shifted_back_into_place(models):
    """DiffuLLaMA's output at i - 1 predicts token i: dlmeval's position i (i > 0) is the module's i - 1."""
    m = models["tiny-diffullama"]
    ids, attn = m.pad([m.encode("the cat sat on the mat")])
    raw = m.module(input_ids=ids, attention_mask=_full4(ids)).logits.float()
    z = m.logits(ids, attn)
    assert torch.allclose(z[0, 1:], m._vocab_masked(raw[0, :-1]), atol=1e-4)
    assert torch.allclose(z[0, 0], m._vocab_masked(raw[0, 0]), atol=1e-4)  # the BOS reads its own output


def _full4(ids):
    n = ids.shape[1]
    return torch.zeros(ids.shape[0], 1, n, n)


def test_the_trained_standins_predict_successors_with_their_own_alignment(models):
    """Each stand-in was trained through its adapter: a masked word is predicted from its neighbours. (The
    ModernBERT stand-in does not learn the task in the build's few steps: its loss stays near 2 nats, so it is
    not asked.)"""
    from dlmeval.models.standins import _words

    words = _words()
    for spec, m in models.items():
        if spec == "tiny-bert-chat":
            continue
        text = " ".join(words[10:18])
        ids = m.encode(text)
        k = len(ids) // 2
        x = list(ids)
        x[k] = m.mask_token_id
        inp, attn = m.pad([x])
        if spec == "tiny-a2d-bd3lm":
            z = m.logits_at(inp, attn, (torch.tensor([0]), torch.tensor([k])), block_size=len(ids) + 8)
        else:
            z = m.logits(inp, attn)[0, k][None]
        assert int(z.argmax()) == ids[k], spec


def test_bert_chat_template_and_eos(models):
    m = models["tiny-bert-chat"]
    text = m.tokenizer.apply_chat_template(
        [{"role": "user", "content": "the cat"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "[Question]\nthe cat\n[/Question]\n\n[Answer]\n"
    assert m.has_chat_template
    tok = m.tokenizer
    assert m.eos_token_ids == (tok.pad_token_id, tok.sep_token_id)  # dllm: EOS is the pad token


def test_bert_chat_without_a_template_gets_dllms_with_a_warning(tmp_path):
    from dlmeval.models.bert_chat import BERT_CHAT_TEMPLATE, load_bert_chat
    from dlmeval.models.standin_families import standin_dir

    d = tmp_path / "bc"
    shutil.copytree(standin_dir("bert-chat"), d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    for f in d.glob("chat_template.*"):
        f.unlink()
    m = load_bert_chat(str(d), dtype="float32")
    assert m.tokenizer.chat_template == BERT_CHAT_TEMPLATE
    assert any("chat template" in w for w in m.load_warnings)


def test_lladamoe_routes_tokens_through_its_experts(models):
    """The MoE layer's output changes when its router's choice does (the experts are really used)."""
    m = models["tiny-llada-moe"]
    layer = m.module.model.layers[1]
    assert type(layer.mlp).__name__ == "SparseMoe" and layer.shared_expert is not None
    assert type(m.module.model.layers[0].mlp).__name__ == "MLP"  # moe_layer_freq[0] == 0: dense
    ids, attn = m.pad([m.encode("the cat sat on the mat")])
    z0 = m.logits(ids, attn)
    with torch.no_grad():
        w = layer.mlp.gate.weight.clone()
        layer.mlp.gate.weight.mul_(-1.0)
        try:
            z1 = m.logits(ids, attn)
        finally:
            layer.mlp.gate.weight.copy_(w)
    assert float((z0 - z1).abs().max()) > 1e-4


def test_lladamoe_refuses_a_dense_config_and_needs_trust(tmp_path):
    from dlmeval.models.lladamoe import load_lladamoe
    from dlmeval.models.standin_families import standin_dir

    src = standin_dir("lladamoe")
    with pytest.raises(InputError, match="trust-remote-code"):
        load_lladamoe(str(src))
    d = tmp_path / "dense"
    shutil.copytree(src, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.pop("num_experts")
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="num_experts"):
        load_lladamoe(str(d), trust_remote_code=True)


def test_a2d_qwen3_standin_loads_with_qk_norm():
    from dlmeval.models.standin_families import load_family_standin

    q3 = load_family_standin("a2d-qwen3")
    attn = q3.module.model.layers[0].self_attn
    assert hasattr(attn, "q_norm") and attn.q_proj.bias is None
    q2 = load_diffusion("tiny-a2d")
    assert q2.module.model.layers[0].self_attn.q_proj.bias is not None  # Qwen2: q/k/v biases


def test_a2d_without_a_mask_token_is_refused(tmp_path):
    from dlmeval.models.a2d import load_a2d
    from dlmeval.models.standin_families import standin_dir

    d = tmp_path / "nomask"
    shutil.copytree(standin_dir("a2d"), d)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["added_tokens"] = [t for t in tj["added_tokens"] if t["content"] != "<|mask|>"]
    tj["model"]["vocab"].pop("<|mask|>")
    (d / "tokenizer.json").write_text(json.dumps(tj))
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg.pop("mask_token", None)
    cfg["added_tokens_decoder"] = {
        k: v for k, v in cfg.get("added_tokens_decoder", {}).items() if v["content"] != "<|mask|>"
    }
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    (d / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    with pytest.raises(InputError, match="no mask token"):
        load_a2d(str(d), dtype="float32")
