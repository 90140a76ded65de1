"""Each family's own samplers as dlmeval strategies, token for token against the checkpoint's sampler at
temperature 0 (the Dream stand-in's ``diffusion_generate`` follows Dream's published ``_sample``), and the
top-k / top-p filters (issue 21)."""

from __future__ import annotations

import itertools

import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models import tiny_model
from dlmeval.models.family import FAMILIES, family_of
from dlmeval.sampling import STRATEGIES, RemaskingSampler, SamplerConfig
from dlmeval.sampling.checks import no_mass_hook
from dlmeval.sampling.fields import step_fields, top_k_filter

PROMPTS = ["the a an of to", "one two three", "he she they we you i", "big small good"]
L = 12


@pytest.fixture(scope="module")
def dream():
    return tiny_model("dream")


def test_every_native_sampler_maps_to_a_registered_strategy():
    for fam in FAMILIES.values():
        for native, strategy in fam.native_samplers.items():
            assert strategy in STRATEGIES, (fam.name, native)
    dream = FAMILIES.get("dream")
    assert (
        dream.strategy_for("maskgit_plus") == "maskgit" and dream.strategy_for("topk_margin") == "topk_margin"
    )
    assert FAMILIES.get("llada").strategy_for("low_confidence") == "none"
    with pytest.raises(InputError, match="no native sampler 'greedy'"):
        dream.strategy_for("greedy")


def test_dream_algorithms_equal_diffusion_generate_token_for_token(dream):
    fam = family_of(dream)
    enc = [dream.encode(p) for p in PROMPTS]
    ids, attn = dream.pad(enc)
    hook = no_mass_hook(dream)  # the mask id and the vocabulary padding get no mass
    grid = itertools.product(
        ["maskgit_plus", "topk_margin", "entropy"], [1, 3, 6, 12], [None, 5], [None, 0.9]
    )
    for alg, steps, top_k, top_p in grid:
        with torch.no_grad():
            theirs = dream.module.diffusion_generate(
                ids,
                attention_mask=attn,
                max_new_tokens=L,
                steps=steps,
                alg=alg,
                temperature=0.0,
                top_p=top_p,
                top_k=top_k,
                alg_temp=None,
                generation_logits_hook_func=hook,
            )[:, ids.shape[1] :]
        cfg = SamplerConfig(
            length=L,
            steps=steps,
            strategy=fam.strategy_for(alg),
            temperature=0.0,
            top_p=top_p or 1.0,
            top_k=top_k,
            stop_at_eos=False,
        )
        res = RemaskingSampler(dream, cfg).sample(enc, item_ids=[str(i) for i in range(len(enc))])
        assert torch.as_tensor(res.tokens)[:, :L].tolist() == theirs.tolist(), (alg, steps, top_k, top_p)
        assert res.nfe.tolist() == [steps] * len(enc)  # Dream's loop: one pass per step


def test_topk_margin_ranks_by_the_gap_between_the_two_most_likely_tokens():
    z = torch.tensor([[3.0, 2.9, -5.0, -5.0], [3.0, 0.0, -5.0, -5.0], [1.0, 1.0, 1.0, 0.0]])
    _, f = step_fields(
        z.clone(),
        n_masked=3,
        current=torch.zeros(3, dtype=torch.long),
        banned=torch.tensor([3]),
        temperature=0.0,
        uniforms=None,
        needs={"tempered_margin", "margin"},
    )
    p = torch.softmax(z[:, :3], -1)
    two = p.topk(2, -1).values
    torch.testing.assert_close(f["margin"], two[:, 0] - two[:, 1])
    assert f["tempered_margin"].argsort(descending=True).tolist() == [1, 0, 2]


def test_top_k_filter_and_its_validation():
    z = torch.tensor([[1.0, 4.0, 3.0, 2.0]])
    kept = top_k_filter(z, 2)
    assert (kept > torch.finfo(z.dtype).min).tolist() == [[False, True, True, False]]
    _, f = step_fields(
        z.clone(),
        n_masked=1,
        current=torch.zeros(1, dtype=torch.long),
        banned=torch.tensor([], dtype=torch.long),
        temperature=0.0,
        uniforms=None,
        needs={"tempered_confidence"},
        top_k=2,
    )
    # the candidate (argmax, id 1) renormalised over the two kept tokens
    assert f["tempered_confidence"].item() == pytest.approx(
        torch.softmax(torch.tensor([4.0, 3.0]), 0)[0].item()
    )
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InputError, match="top_k"):
            SamplerConfig(length=8, steps=8, top_k=bad)


def test_top_k_is_part_of_the_sampler_signature_only_when_set():
    plain = SamplerConfig(length=8, steps=8)
    assert "top_k" not in plain.as_dict()  # configurations from before top_k keep their signatures
    assert SamplerConfig(length=8, steps=8, top_k=50).as_dict()["top_k"] == 50
    assert SamplerConfig(length=8, steps=8, top_k=50).as_dict() != plain.as_dict()


def test_top_k_changes_the_sample_at_temperature(dream):
    base = SamplerConfig(length=L, steps=6, strategy="maskgit", temperature=1.5, stop_at_eos=False, seed=2)
    a = RemaskingSampler(dream, base).sample(PROMPTS, item_ids=list("abcd"))
    b = RemaskingSampler(dream, SamplerConfig(**{**base.as_dict(), "top_k": 1})).sample(
        PROMPTS, item_ids=list("abcd")
    )
    other_seed = RemaskingSampler(dream, SamplerConfig(**{**base.as_dict(), "top_k": 1, "seed": 9})).sample(
        PROMPTS, item_ids=list("abcd")
    )
    assert a.tokens.tolist() != b.tokens.tolist()
    # top_k = 1 keeps only the argmax: no token is drawn at random any more, whatever the seed
    assert b.tokens.tolist() == other_seed.tokens.tolist()
