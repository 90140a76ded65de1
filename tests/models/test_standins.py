"""The family stand-ins load and behave like the real LLaDA / Dream code (issue 12), and check-model tells a good
checkpoint from a broken one."""

from __future__ import annotations

import json
import shutil
import warnings
from types import SimpleNamespace

import pytest
import torch

from dlmeval.cli.main import main
from dlmeval.errors import CheckpointError, InputError
from dlmeval.models import load_diffusion, tiny_model
from dlmeval.models.checks import check_alignment, check_mask
from dlmeval.models.standins import standin_checkpoint
from dlmeval.models.tokens import special_ids_from_files
from dlmeval.sampling.checks import run_checks

TEXTS = ["the cat sat on the big red house .", "a dog", "paris is the capital of france", "one two three"]


@pytest.fixture(scope="module")
def llada():
    return tiny_model("llada")


@pytest.fixture(scope="module")
def dream():
    return tiny_model("dream")


# ------------------------------------------------------------------------------------------------ load path
@pytest.mark.parametrize("kind", ["llada", "dream"])
def test_standin_is_a_remote_code_directory_loaded_through_automodel(kind):
    d = standin_checkpoint(kind)
    cfg = json.loads((d / "config.json").read_text())
    assert (
        "AutoModel" in cfg["auto_map"]
        and (d / cfg["auto_map"]["AutoModel"].split(".")[0]).with_suffix(".py").exists()
    )
    with pytest.raises(InputError, match="trust-remote-code"):
        load_diffusion(f"{kind}:{d}")
    m = load_diffusion(f"{kind}:{d}", trust_remote_code=True)
    # the module class comes from the directory's code (transformers' dynamic modules), not from dlmeval
    assert type(m.module).__module__.startswith("transformers_modules.")
    assert m.family == kind
    assert m.vocab_size > len(m.tokenizer)  # a padded vocabulary, like the released models
    # tiny_model and the tiny-* specs take the same path
    assert type(tiny_model(kind).module).__module__.startswith("transformers_modules.")
    assert type(load_diffusion(f"tiny-{kind}").module).__module__.startswith("transformers_modules.")


def test_llada_forward_takes_inputs_embeds_and_refuses_other_keywords(llada):
    ids, attn = llada.pad([llada.encode(t) for t in TEXTS])
    emb = llada.input_embeddings()(ids)
    with pytest.raises(TypeError):
        llada.module(input_embeddings=emb, attention_mask=attn)  # the inner model's name, not the outer one's
    with pytest.raises(TypeError):
        llada.module(input_ids=ids, attention_mask=attn, position_ids=attn)
    raw = llada.module(inputs_embeds=emb, attention_mask=attn).logits
    v = len(llada.tokenizer)
    torch.testing.assert_close(llada.logits(ids, attn)[..., :v], raw[..., :v].float())


@pytest.mark.parametrize("kind", ["llada", "dream"])
def test_score_positions_grad_reaches_the_embeddings(kind):
    m = tiny_model(kind)
    ids, attn = m.pad([m.encode(t) for t in TEXTS[:2]])
    e = m.input_embeddings()(ids).detach().requires_grad_(True)
    pos = attn.bool().clone()
    pos[:, :3] = False
    sc = m.score_positions(None, attn, pos, ids, inputs_embeds=e, grad=True)
    sc.logprob.sum().backward()
    assert e.grad is not None and torch.isfinite(e.grad).all() and e.grad.abs().sum() > 0
    # and the embeddings path scores what the ids path scores
    plain = m.score_positions(ids, attn, pos, ids)
    torch.testing.assert_close(sc.logprob.detach(), plain.logprob, atol=1e-5, rtol=0)


def test_dream_module_consumes_a_4d_mask_and_refuses_a_2d_one(dream):
    ids, attn = dream.pad([dream.encode(t) for t in TEXTS])
    with pytest.raises(ValueError, match="4-D"):
        dream.module(input_ids=ids, attention_mask=attn)


def test_dream_right_padding_equals_left_padding(dream):
    seqs = [dream.encode(t) for t in TEXTS]
    li, la = dream.pad(seqs, side="left")
    ri, ra = dream.pad(seqs, side="right")
    left, right = dream.logits(li, la), dream.logits(ri, ra)
    for b in range(len(seqs)):
        diff = (left[b][la[b].bool()] - right[b][ra[b].bool()]).abs().max()
        assert float(diff) <= 1e-5
    # the lean path too
    pos_l, pos_r = la.bool().clone(), ra.bool().clone()
    sl, sr = dream.score_positions(li, la, pos_l, li), dream.score_positions(ri, ra, pos_r, ri)
    torch.testing.assert_close(sl.logprob, sr.logprob, atol=1e-5, rtol=0)


def test_dream_prepends_bos_and_scores_the_first_word_from_it(dream):
    ids = dream.encode("the cat")
    assert ids[0] == dream.bos_token_id and dream.tokenizer("the cat")["input_ids"][0] != dream.bos_token_id
    assert dream.encode("the cat", add_special_tokens=False)[0] != dream.bos_token_id
    t, a = dream.pad([ids])
    pos = torch.zeros_like(a, dtype=torch.bool)
    pos[0, 1] = True  # "the": read from the BOS position's output (Dream's i - 1)
    sc = dream.score_positions(t, a, pos, t)
    mask4 = torch.ones(1, 1, t.shape[1], t.shape[1], dtype=torch.bool)
    with torch.no_grad():
        raw = dream.module(
            input_ids=t, attention_mask=mask4, position_ids=torch.arange(t.shape[1])[None]
        ).logits
    want = torch.log_softmax(raw[0, 0, : len(dream.tokenizer)], -1)[t[0, 1]]
    assert abs(float(sc.logprob[0]) - float(want)) < 1e-5


def test_one_bos_after_a_chat_template_that_starts_with_bos(llada):
    prompt = llada.tokenizer.apply_chat_template(
        [{"role": "user", "content": "the cat"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.startswith(llada.tokenizer.bos_token)
    raw = llada.tokenizer(prompt)["input_ids"]
    assert raw[:2] == [llada.bos_token_id] * 2  # what the tokenizer alone gives
    ids = llada.encode(prompt)
    assert ids[0] == llada.bos_token_id and ids[1] != llada.bos_token_id and ids == raw[1:]
    ids2, offs = llada.encode_with_offsets(prompt)
    assert ids2 == ids and len(offs) == len(ids)


# ------------------------------------------------------------------------------------------------ special ids
def test_eos_sets_come_from_the_files_and_the_chat_template(llada, dream):
    tl, td = llada.tokenizer, dream.tokenizer
    assert set(llada.eos_token_ids) == {
        tl.convert_tokens_to_ids("<|endoftext|>"),
        tl.convert_tokens_to_ids("<|eot_id|>"),
    }
    assert set(dream.eos_token_ids) == {
        td.convert_tokens_to_ids("<|endoftext|>"),
        td.convert_tokens_to_ids("<|im_end|>"),
    }
    assert llada.load_warnings == [] and dream.load_warnings == []
    # LLaDA's mask token has no role in its tokenizer: the config names it
    assert tl.mask_token_id is None and tl.convert_ids_to_tokens(llada.mask_token_id) == "<|mdm_mask|>"
    assert td.convert_ids_to_tokens(dream.mask_token_id) == "<|mask|>" == td.mask_token


def test_fallback_constants_only_with_a_warning():
    tok = type(
        "T", (), {"mask_token_id": None, "eos_token_id": None, "chat_template": None, "__len__": lambda s: 10}
    )()
    cfg = SimpleNamespace()
    with pytest.warns(UserWarning) as rec:
        mask, eos, notes = special_ids_from_files(
            tok, cfg, None, family="x", default_mask=7, default_eos=(8, 9)
        )
    assert (mask, eos) == (7, (8, 9)) and len(notes) == 2 and len(rec) == 2
    # files that name everything: no warning, the constants unused
    tok2 = type(
        "T", (), {"mask_token_id": 3, "eos_token_id": 4, "chat_template": None, "__len__": lambda s: 10}
    )()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert special_ids_from_files(
            tok2, SimpleNamespace(mask_token_id=3), None, family="x", default_mask=7
        )[:2] == (
            3,
            (4,),
        )


def _broken_copy(kind: str, tmp_path, **config):
    d = tmp_path / f"broken-{kind}"
    shutil.copytree(standin_checkpoint(kind), d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(config)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_mask_id_disagreement_is_warned_and_fails_check_model(dream, tmp_path):
    word = dream.tokenizer.convert_tokens_to_ids("cat")
    d = _broken_copy("dream", tmp_path, mask_token_id=word)
    with pytest.warns(UserWarning, match="mask id differs"):
        m = load_diffusion(f"dream:{d}", trust_remote_code=True)
    assert m.mask_token_id == word
    row = check_mask(m)
    assert row.passed is False and "not a special token" in row.detail
    assert main(["check-model", f"dream:{d}", "--trust-remote-code"]) == 1


# ------------------------------------------------------------------------------------------------ check-model
@pytest.mark.parametrize("kind", ["llada", "dream"])
def test_check_model_passes_on_the_standins(kind, capsys):
    m = tiny_model(kind)
    rows = {c.name: c for c in run_checks(m)}
    assert all(c.passed is not False for c in rows.values()), {
        n: c.detail for n, c in rows.items() if not c.passed
    }
    assert rows["alignment"].value >= 1.0  # the right alignment wins clearly on the stand-in
    assert (rows["sampler"].passed is None) == (kind == "llada")  # only Dream ships its own sampler
    assert main(["--json", "check-model", f"tiny-{kind}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] and {r["name"] for r in out["checks"]} == set(rows)


@pytest.mark.parametrize("kind", ["llada", "dream"])
def test_check_model_fails_a_wrong_logit_shift(kind):
    m = tiny_model(kind)
    m.logit_shift = 1 - m.logit_shift  # read LLaDA as if it were shifted, Dream as if it were not
    row = check_alignment(m)
    assert row.passed is False and row.value < 0
    rows = {c.name: c for c in run_checks(m)}
    assert rows["alignment"].passed is False and rows["mask id"].passed and rows["batch"].passed


def test_check_model_fails_a_wrong_mask_id(llada):
    m = tiny_model("llada")
    m.mask_token_id = m.tokenizer.convert_tokens_to_ids("the")
    rows = {c.name: c for c in run_checks(m)}
    assert rows["mask id"].passed is False and "not a special token" in rows["mask id"].detail


def test_check_model_text_table_and_exit_code(capsys):
    assert main(["check-model", "tiny-dream"]) == 0
    out = capsys.readouterr().out
    for name in ("mask id", "eos ids", "alignment", "padding", "gradient", "sampler"):
        assert name in out
    assert "FAILED" not in out


# ------------------------------------------------------------------------------------------------ vocab padding
@pytest.mark.parametrize("kind", ["llada", "dream"])
def test_no_sampled_id_outside_the_tokenizer(kind):
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    m = tiny_model(kind)
    n = len(m.tokenizer)
    z = m.logits(*m.pad([m.encode(TEXTS[0])]))
    assert z.shape[-1] > n and (z[..., n:] == torch.finfo(torch.float32).min).all()
    cfg = SamplerConfig(length=16, steps=8, block_length=16, temperature=5.0, stop_at_eos=False, seed=3)
    res = RemaskingSampler(m, cfg).sample(["the cat", "a dog"] * 4, item_ids=[str(i) for i in range(8)])
    assert int(torch.as_tensor(res.tokens).max()) < n


def test_care_max_tokens_caps_the_rows_per_pass():
    from dlmeval.cli.care import _spec_with_overrides
    from dlmeval.cli.main import build_parser

    base = _spec_with_overrides(build_parser().parse_args(["care", "care-tiny"])).generation
    width = base.prefix_tokens + base.gen_tokens
    capped = _spec_with_overrides(
        build_parser().parse_args(["care", "care-tiny", "--max-tokens", str(width)])
    )
    assert base.batch_size > 1 and capped.generation.batch_size == 1
    wide = _spec_with_overrides(build_parser().parse_args(["care", "care-tiny", "--max-tokens", str(10**9)]))
    assert wide.generation.batch_size == base.batch_size
    with pytest.raises(InputError, match="max-tokens"):
        _spec_with_overrides(build_parser().parse_args(["care", "care-tiny", "--max-tokens", "0"]))


# ------------------------------------------------------------------------------------------------ mask ids (#21)
def _without(kind: str, tmp_path, key: str):
    d = tmp_path / f"no-{key}-{kind}"
    shutil.copytree(standin_checkpoint(kind), d)
    cfg = json.loads((d / "config.json").read_text())
    del cfg[key]
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_llada_config_without_mask_id_gets_the_warned_fallback_not_the_config_class_default(tmp_path):
    """LLaDA's config class fills a missing mask_token_id with 50256 (a word id); the loader reads the file."""
    from transformers import AutoConfig

    d = _without("llada", tmp_path, "mask_token_id")
    assert AutoConfig.from_pretrained(d, trust_remote_code=True).mask_token_id == 50256  # the trap
    # the warned fallback is the released 8B id, past the stand-in's 160-row table: refused at load (issue 32),
    # where it used to load and fail in the first pass that reads a mask
    with pytest.warns(UserWarning, match="documented fallback mask id 126336"):
        with pytest.raises(
            CheckpointError, match=r"the mask id 126336 .*past the embedding table \(160 rows"
        ):
            load_diffusion(f"llada:{d}", trust_remote_code=True)
    # a config mask id inside the table but outside the tokenizer loads, and check-model says so
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "mask_token_id": cfg["vocab_size"] - 1}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = load_diffusion(f"llada:{d}", trust_remote_code=True)
    assert m.mask_token_id == cfg["vocab_size"] - 1 >= len(m.tokenizer)
    row = check_mask(m)
    assert row.passed is False and "outside the tokenizer" in row.detail


def test_dream_config_without_mask_id_takes_the_tokenizers_mask_token(tmp_path):
    from transformers import AutoConfig

    d = _without("dream", tmp_path, "mask_token_id")
    assert AutoConfig.from_pretrained(d, trust_remote_code=True).mask_token_id == 151666  # the trap
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the tokenizer names it: nothing to warn about
        m = load_diffusion(f"dream:{d}", trust_remote_code=True)
    assert m.mask_token_id == m.tokenizer.mask_token_id == m.tokenizer.convert_tokens_to_ids("<|mask|>")
    assert check_mask(m).passed


def test_dream_standin_has_qkv_biases_like_the_released_dream(dream):
    names = dict(dream.module.named_parameters())
    layer = "model.layers.0."
    for p in ("q_proj", "k_proj", "v_proj"):
        b = names[f"{layer}{p}.bias"]
        assert b.abs().sum() > 0  # trained, non-zero: dropping them changes the logits
    assert f"{layer}o_proj.bias" not in names
    ids, attn = dream.pad([dream.encode(TEXTS[0])])
    ref = dream.logits(ids, attn)
    with torch.no_grad():
        saved = names[f"{layer}q_proj.bias"].clone()
        names[f"{layer}q_proj.bias"].zero_()
        try:
            assert (dream.logits(ids, attn) - ref).abs().max() > 1e-3
        finally:
            names[f"{layer}q_proj.bias"].copy_(saved)


# ------------------------------------------------------------------------------------- check-model rows (#21)
def _attend_causally(model, monkeypatch):
    """Make the stand-in's attention left-to-right (a causal checkpoint loaded as a bidirectional family)."""
    import sys

    import torch.nn.functional as F

    block = next(m for m in model.module.modules() if type(m).__name__ == "Block")
    layers = sys.modules[type(block).__module__]

    def sdpa(q, k, v, attn_mask=None, is_causal=False):
        n = q.shape[-2]
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        if attn_mask is None:
            attn_mask = causal
        elif attn_mask.dtype == torch.bool:
            attn_mask = attn_mask & causal
        else:
            attn_mask = attn_mask.masked_fill(~causal, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)

    proxy = SimpleNamespace(scaled_dot_product_attention=sdpa, silu=F.silu)
    monkeypatch.setattr(layers, "F", proxy)


@pytest.mark.parametrize("kind", ["llada", "dream"])
def test_check_model_fails_a_network_that_attends_causally(kind, monkeypatch):
    from dlmeval.models.checks import check_attention

    m = tiny_model(kind)
    good = check_attention(m)
    assert good.passed and good.value > 1e-3
    _attend_causally(m, monkeypatch)
    bad = check_attention(m)
    assert bad.passed is False and bad.value <= 1e-4
    assert "does not attend as the" in bad.detail and "bidirectional" in bad.detail


def test_check_model_fails_a_dream_config_and_tokenizer_without_a_mask(tmp_path):
    d = _without("dream", tmp_path, "mask_token_id")
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["mask_token"] = None  # a tokenizer with no mask role either
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    # the warned fallback 151666 is past the stand-in's 160-row table: one line at load (issue 32), not a check-model
    # row after an IndexError-prone load
    with pytest.warns(UserWarning, match="documented fallback mask id 151666"):
        with pytest.raises(CheckpointError, match="the mask id 151666"):
            load_diffusion(f"dream:{d}", trust_remote_code=True)
    assert main(["check-model", f"dream:{d}", "--trust-remote-code"]) == 2


def test_sampler_row_compares_at_several_steps_and_catches_an_inherited_top_k(dream, monkeypatch):
    """One step hides a top-k filter (every position is decoded at once, by argmax); more steps show it."""
    from dlmeval.sampling.checks import SAMPLER_STEPS, check_sampler

    good = check_sampler(dream)
    assert good.passed and good.value == 1.0 and len(SAMPLER_STEPS) >= 3
    for alg in ("maskgit_plus", "topk_margin", "entropy"):
        assert f"{alg}@8: 16/16" in good.detail
    # a checkpoint whose sampler applies a top-k it inherited, whatever the caller passes
    orig = dream.module.diffusion_generate
    monkeypatch.setattr(
        dream.module, "diffusion_generate", lambda *a, **k: orig(*a, **{**k, "top_k": 2, "top_p": None})
    )
    bad = check_sampler(dream)
    assert bad.passed is False
    algs = ("maskgit_plus", "topk_margin", "entropy")
    assert all(f"{a}@1: 16/16" in bad.detail for a in algs)  # one step cannot tell
    assert any(f"{a}@{s}: 16/16" not in bad.detail for a in algs for s in SAMPLER_STEPS[1:])


def test_sampler_row_reports_what_plain_keywords_inherit(tmp_path):
    d = _broken_copy("dream", tmp_path, top_k=2)  # a model config carrying a legacy generation default
    m = load_diffusion(f"dream:{d}", trust_remote_code=True)
    from dlmeval.sampling.checks import check_sampler

    row = check_sampler(m)
    assert row.passed  # dlmeval reproduces the explicit call (top_k=None)
    assert "plain keywords it samples differently" in row.detail and "top_k=2" in row.detail


def test_the_shared_fast_tokenizer_orders_ids_and_wraps_as_the_family_says(tmp_path):
    """``standins.fast_tokenizer`` is every fast stand-in tokenizer (#36): ids run specials then words (or words
    then specials), a ``bos`` is prepended, a ``(single, pair)`` template wraps, and both at once are refused."""
    from dlmeval.models.standins import fast_tokenizer, words

    n = len(words())
    tok, vocab = fast_tokenizer(tmp_path / "a", ["[UNK]", "<s>"], bos="<s>", bos_token="<s>")
    assert (vocab["[UNK]"], vocab["<s>"], vocab["the"], len(vocab)) == (0, 1, 2, n + 2)
    assert tok("the cat")["input_ids"] == [1, vocab["the"], vocab["cat"]]
    tok2, v2 = fast_tokenizer(
        tmp_path / "b",
        ["[UNK]", "[CLS]", "[SEP]"],
        template=("[CLS] $A [SEP]", "[CLS] $A [SEP] $B [SEP]"),
        extra_words=("zz",),
        specials_first=False,
        cls_token="[CLS]",
        sep_token="[SEP]",
    )
    assert (v2["the"], v2["zz"], v2["[UNK]"], v2["[SEP]"]) == (0, n, n + 1, n + 3)
    assert tok2("the zz")["input_ids"] == [n + 2, 0, n, n + 3]
    assert (tmp_path / "b" / "tokenizer.json").is_file()
    with pytest.raises(ValueError, match="bos or template"):
        fast_tokenizer(tmp_path / "c", ["[UNK]", "<s>"], bos="<s>", template=("<s> $A", "<s> $A $B"))
