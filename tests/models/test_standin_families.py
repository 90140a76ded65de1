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
    from dlmeval.models.standins import words as standin_words

    words = standin_words()
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


# --------------------------------------------------------------------------------------------- block diffusion
def _reference_bd3lm(m, prompt, length, block, steps_per_block):
    """dllm's BD3LM loop at temperature 0, written out: left-pad the prompt to whole blocks, then per block the
    k most confident masked positions of that block (k from the linear schedule), the network run block-causally
    over the prefix and the block only."""
    from dlmeval.models.base import block_causal_mask
    from dlmeval.sampling.config import linear_schedule

    pad = -(-len(prompt) // block) * block
    x = [m.pad_token_id] * (pad - len(prompt)) + list(prompt)
    valid = [0] * (pad - len(prompt)) + [1] * len(prompt)
    passes = 0
    for _ in range(length // block):
        x += [m.mask_token_id] * block
        valid += [1] * block
        for n in linear_schedule(block, steps_per_block):
            if n == 0:
                continue
            ids, attn = torch.tensor([x]), torch.tensor([valid])
            mask4, pos = block_causal_mask(attn, ids.shape, block)
            h = m._run_4d(ids, None, mask4, pos, False).last_hidden
            z = m._vocab_masked(m._head(h)[0, -block:].float())
            z[:, m.mask_token_id] = torch.finfo(z.dtype).min
            p = z.softmax(-1)
            conf, tok = p.max(-1)
            masked = torch.tensor(x[-block:]) == m.mask_token_id
            conf = torch.where(masked, conf, -1.0)
            for j in conf.topk(n).indices.tolist():
                x[len(x) - block + j] = int(tok[j])
            passes += 1
    return x[pad:], passes


def test_block_sampler_matches_the_bd3lm_loop_at_temperature_zero(models):
    from dlmeval.sampling import SamplerConfig
    from dlmeval.sampling.block import BlockDiffusionSampler

    m = models["tiny-a2d-bd3lm"]
    assert m.block_size == 4
    prompts = [m.encode("the cat sat"), m.encode("a dog ran to the big")]
    for steps in (8, 4, 16):  # 2, 1 and 4 steps per block of 4 (the last: steps past the block are skipped)
        cfg = SamplerConfig(length=8, steps=steps, strategy="none", stop_at_eos=False)
        s = BlockDiffusionSampler(m, cfg)
        res = s.sample(prompts, item_ids=["a", "b"])
        for b, p in enumerate(prompts):
            want, passes = _reference_bd3lm(m, p, 8, 4, steps // 2)
            assert res.tokens[b].tolist() == want, steps
            assert int(res.nfe[b]) == passes
        assert int(res.nfe[0]) == s.nfe_predicted


def test_block_sampler_exact_nfe_for_remasking_strategies(models):
    from dlmeval.sampling import SamplerConfig, predict_nfe
    from dlmeval.sampling.block import BlockDiffusionSampler, block_nfe_dllm

    m = models["tiny-a2d-bd3lm"]
    cases = [("none", 16, 16), ("none", 8, 8), ("high_entropy", 16, None), ("low_confidence", 8, None)]
    for strategy, steps, want in cases:
        cfg = SamplerConfig(
            length=16, steps=steps, block_length=8, strategy=strategy, remask_fraction=0.25, stop_at_eos=False
        )
        res = BlockDiffusionSampler(m, cfg).sample([m.encode("the cat")])
        pred = predict_nfe(16, steps, strategy=strategy, block_length=8, remask_fraction=0.25)
        assert int(res.nfe[0]) == pred, (strategy, steps)
        if want is not None:
            assert pred == want
        assert block_nfe_dllm(cfg) == pred + 2  # dllm: one KV-cache prefix pass per block
    # the hand count for high_entropy, 8 steps on a block of 8, k = int(0.25 * 8) = 2, window from step
    # ceil(2k * S / B) = 4: 8 decode passes + 4 scoring passes + 1 drain pass = 13 per block
    assert predict_nfe(16, 16, strategy="high_entropy", block_length=8, remask_fraction=0.25) == 26


def test_block_causal_passes_never_see_later_columns(models):
    """A block-causal pass over prefix + block gives the same block logits with any later columns present."""
    from dlmeval.models.base import block_causal_mask

    m = models["tiny-a2d-bd3lm"]
    x = torch.tensor([m.encode("the cat sat on the big red dog")[:8]])
    mask4, pos = block_causal_mask(None, x.shape, 4)
    full = m._head(m._run_4d(x, None, mask4, pos, False).last_hidden)
    short = x[:, :4]
    mask4s, poss = block_causal_mask(None, short.shape, 4)
    part = m._head(m._run_4d(short, None, mask4s, poss, False).last_hidden)
    assert torch.allclose(full[0, :4], part[0], atol=1e-5)
    from dlmeval.models.a2d import padding_mask

    bidir = m._head(m._run_4d(x, None, *padding_mask(None, 1, 8, x.device), False).last_hidden)
    assert float((full[0, :4] - bidir[0, :4]).abs().max()) > 1e-4  # a bidirectional pass would see block 2
    # a plain pass (scoring) is block-causal too, blocks counted from the first real token: equal to the
    # physical blocks when there is no padding, and unchanged by left padding
    assert torch.allclose(m.logits(x, torch.ones_like(x)), m._vocab_masked(full.float()), atol=1e-5)
    ids, attn = m.pad([x[0].tolist(), x[0, :3].tolist()])
    assert torch.allclose(
        m.logits(ids, attn)[1, -3:], m.logits(x[:, :3], torch.ones(1, 3, dtype=torch.long))[0], atol=1e-5
    )


def test_block_sampler_refuses_a_bidirectional_only_family(models):
    from dlmeval.sampling import SamplerConfig
    from dlmeval.sampling.block import BlockDiffusionSampler, make_sampler

    with pytest.raises(InputError, match="block"):
        BlockDiffusionSampler(models["tiny-llada-moe"], SamplerConfig(length=8, steps=8))
    with pytest.raises(InputError, match="names no block size"):
        BlockDiffusionSampler(models["tiny-a2d"], SamplerConfig(length=8, steps=8))
    # the remasking sampler itself runs a block-diffusion family block-causally (Care needs nothing special)
    plain = make_sampler(models["tiny-a2d-bd3lm"], SamplerConfig(length=8, steps=8))
    assert plain.block_causal == 4 and plain.config.block_length == 4
    assert make_sampler(models["tiny-a2d"], SamplerConfig(length=8, steps=8)).block_causal is None
    forced = BlockDiffusionSampler(models["tiny-a2d"], SamplerConfig(length=8, steps=8, block_length=4))
    assert forced.block_causal == 4


# --------------------------------------------------------------------------------------------- soft-mask feedback
def test_softmask_weight_rule_by_hand():
    from dlmeval.sampling.softmask import SoftMask

    p = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    sm = SoftMask(k=2, omega_s=0.8, omega_a=2.0, omega_b=-1.0)
    lam = sm.weight(p)
    h = torch.tensor([torch.log(torch.tensor(2.0)), 0.0])
    assert torch.allclose(lam, 0.8 * torch.sigmoid(2.0 * (-h + 1.0)), atol=1e-6)
    assert torch.allclose(SoftMask(rule="constant", omega_s=0.3).weight(p), torch.full((2,), 0.3))
    for bad in (dict(k=-1), dict(rule="x"), dict(omega_s=1.5), dict(omega_a=float("nan"))):
        with pytest.raises(InputError, match="softmask"):
            SoftMask(**bad)


def test_softmask_feeds_the_mix_of_mask_and_top_k_embeddings(models):
    """The embeddings a pass receives at a still-masked position are (1 - lambda) e[MASK] + lambda sum p~ e[v]."""
    from dlmeval.sampling import SamplerConfig
    from dlmeval.sampling.sampler import RemaskingSampler
    from dlmeval.sampling.softmask import SoftMask
    from dlmeval.sampling.state import Batch

    m = models["tiny-a2d"]
    sm = SoftMask(k=2, rule="constant", omega_s=0.6)
    s = RemaskingSampler(m, SamplerConfig(length=4, steps=4), softmask=sm)
    p = m.encode("the cat")
    ids, attn = s._pad_batch([p])
    st = Batch(s, ids, attn, [p], ["0"])
    logits = torch.full((1, m.vocab_size), -30.0)
    logits[0, 7], logits[0, 9] = 2.0, 1.0  # top-2 tokens 7 and 9, p~ = softmax([2, 1])
    rows = torch.tensor([0])
    st.soft.record(rows, slice(0, 4), torch.tensor([0]), torch.tensor([2]), logits)
    e = st.soft.embeds(st, rows, st.ids)
    emb = m.input_embeddings().weight
    w = torch.softmax(torch.tensor([2.0, 1.0]), 0)
    want = 0.4 * emb[m.mask_token_id] + 0.6 * (w[0] * emb[7] + w[1] * emb[9])
    col = int(st.gen_start[0]) + 2
    assert torch.allclose(e[0, col], want, atol=1e-5)
    assert torch.allclose(e[0, col + 1], emb[m.mask_token_id])  # no feedback recorded there: the bare mask
    st.soft.forget(rows, slice(0, 4), torch.tensor([[False, False, True, False]]))
    assert st.soft.embeds(st, rows, st.ids) is None


def test_softmask_changes_samples_not_nfe_and_zero_weight_is_plain_masking(models):
    from dlmeval.sampling import SamplerConfig
    from dlmeval.sampling.sampler import RemaskingSampler
    from dlmeval.sampling.softmask import SoftMask

    m = models["tiny-a2d"]
    cfg = SamplerConfig(length=8, steps=4, strategy="none", stop_at_eos=False, temperature=0.0)
    prompts = [m.encode("the cat"), m.encode("a dog ran")]
    plain = RemaskingSampler(m, cfg).sample(prompts)
    off = RemaskingSampler(m, cfg, softmask=SoftMask(omega_s=0.0)).sample(prompts)
    assert (off.tokens == plain.tokens).all()
    on_s = RemaskingSampler(m, cfg, softmask=SoftMask(k=3, rule="constant", omega_s=1.0))
    on = on_s.sample(prompts)
    assert (on.nfe == plain.nfe).all()
    assert (on.tokens != plain.tokens).any()
    assert on_s.config_dict()["softmask"] == {
        "k": 3,
        "rule": "constant",
        "omega_s": 1.0,
        "omega_a": 1.0,
        "omega_b": 0.0,
    }


# --------------------------------------------------------------------------------------------- the leaderboard
def test_care_leaderboard_plan_lists_the_papers_thirteen_rows_with_nfe(capsys):
    from dlmeval.cli.main import main

    assert main(["--json", "care", "care-leaderboard", "--plan"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 13
    by = {r["model"]: r for r in rows}
    assert [r["tier"] for r in rows].count(1) == 6 and [r["tier"] for r in rows].count(2) == 6
    assert (
        by["GPT-2-XL (p=0.95)"]["tier"] == "reference"
        and by["GPT-2-XL (p=0.95)"]["sampler"] == "nucleus p=0.95"
    )
    # LLaDA at L = 128, 256 steps: none decodes 128 passes; high_entropy 256 + 180 + 1 (Table 3)
    assert (by["LLaDA-8B-Base"]["nfe_baseline"], by["LLaDA-8B-Base"]["nfe_strategy"]) == (128, 437)
    assert by["LLaDA-MoE-A1B"]["temperature"] == 0.1  # the paper's footnote
    # Dream's own loop spends a pass at every step: none@256 is 256 passes; its entropy row never re-masks
    assert (by["Dream-7B-Base"]["nfe_baseline"], by["Dream-7B-Base"]["nfe_strategy"]) == (256, 256)
    assert "entropy" in by["Dream-7B-Base"]["sampler"]
    assert "soft-mask" in by["SM-Dream-7B"]["sampler"]
    assert by["GPT-2-XL (p=0.95)"]["nfe_baseline"] == 128


def test_leaderboard_spec_errors_name_the_key(tmp_path):
    from dlmeval.protocols.care.leaderboard import parse_leaderboard

    base = {
        "kind": "care-leaderboard",
        "preset": "tiny",
        "models": {"evaluator": "tiny-causal"},
        "rows": [{"label": "a", "model": "tiny-llada", "tier": 1}],
    }
    parse_leaderboard(base)
    for bad, msg in (
        ({"rows": [{"label": "a", "model": "tiny-llada", "tier": 3}]}, "tier"),
        ({"rows": [{"model": "tiny-llada", "tier": 1}]}, "label is required"),
        ({"rows": [{"label": "a", "model": "tiny-llada", "tier": 1, "softmask": {"k": -1}}]}, "softmask"),
        ({"models": {"diffusion": ["tiny-llada"]}}, "models.diffusion"),
        ({"rows": [{"label": "a", "model": "tiny-llada", "tier": 1, "strategy": "nope"}]}, "strategy"),
    ):
        with pytest.raises(InputError, match=msg):
            parse_leaderboard({**base, **bad})


@pytest.mark.slow
def test_care_leaderboard_tiny_runs_end_to_end_and_prints_the_tiered_table(tmp_path, capsys):
    from dlmeval.cli.main import main

    store = str(tmp_path / "lb.sqlite")
    assert (
        main(
            ["--store", store, "--json", "--no-progress", "care", "care-leaderboard-tiny", "--device", "cpu"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    table = out["table"]
    rows = {r["model"]: r for r in (dict(zip(table["columns"], v)) for v in table["rows"])}
    assert len(rows) == 9
    assert rows["tiny-causal (p=0.95)"]["tier"] == "reference"
    for label, r in rows.items():
        assert 0 <= r["mauve_none"] <= 1, label
        if r["tier"] != "reference":
            assert r["nfe_none"] <= 16 and r["nfe_strategy"] <= 28, label
    # a row with soft-mask feedback is its own Care run (the feedback is in the model identity)
    assert rows["tiny-sm-dream"]["care_run"] != rows["tiny-dream"]["care_run"]
    assert main(["--store", store, "leaderboard", "-o", str(tmp_path / "lb")]) == 0
    text = capsys.readouterr().out
    assert "| Tier | Model | Scale | PPL none | MAUVE none |" in text
    assert "| reference | tiny-causal (p=0.95) |" in text and "tiny-dream (entropy)‡" in text
    # every diffusion row's status under the paper-shaped table (#39): nothing verified yet
    status = next(line for line in text.splitlines() if line.startswith("status: "))
    assert status.count(" pending") == 8 and "tiny-sm-dream pending" in status


def test_softmask_never_feeds_the_mask_token_back(models):
    from dlmeval.sampling import SamplerConfig
    from dlmeval.sampling.sampler import RemaskingSampler
    from dlmeval.sampling.softmask import SoftMask
    from dlmeval.sampling.state import Batch

    m = models["tiny-a2d"]
    s = RemaskingSampler(m, SamplerConfig(length=4, steps=4), softmask=SoftMask(k=2))
    p = m.encode("the cat")
    st = Batch(s, *s._pad_batch([p]), [p], ["0"])
    logits = torch.full((1, m.vocab_size), -30.0)
    logits[0, m.mask_token_id], logits[0, 7], logits[0, 9] = 5.0, 2.0, 1.0
    st.soft.record(torch.tensor([0]), slice(0, 4), torch.tensor([0]), torch.tensor([1]), logits)
    assert sorted(st.soft.ids[0, 1].tolist()) == [7, 9]


def test_bert_chat_prompts_go_through_dllms_template(models):
    """The chat path of the tasks (HumanEval / GSM8K prompts) formats with BERT-Chat's template."""
    from dlmeval.tasks.base import chat_formatter

    fmt = chat_formatter(models["tiny-bert-chat"])
    assert fmt("the cat").startswith("[Question]\nthe cat\n[/Question]") and fmt("the cat").endswith(
        "[Answer]\n"
    )


def test_diffullama_without_a_mask_token_is_refused(tmp_path):
    from dlmeval.models.diffullama import load_diffullama
    from dlmeval.models.standin_families import standin_dir

    d = tmp_path / "nomask"
    shutil.copytree(standin_dir("diffullama"), d)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        cfg = json.loads((d / name).read_text())
        cfg.pop("mask_token", None)
        (d / name).write_text(json.dumps(cfg))
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["added_tokens"] = [t for t in tj["added_tokens"] if t["content"] != "[MASK]"]
    (d / "tokenizer.json").write_text(json.dumps(tj))
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["added_tokens_decoder"] = {
        k: v for k, v in cfg.get("added_tokens_decoder", {}).items() if v["content"] != "[MASK]"
    }
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="no mask token"):
        load_diffullama(str(d), dtype="float32")
