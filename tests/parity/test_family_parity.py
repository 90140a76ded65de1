"""Parity as tests (#34): dlmeval's generated tokens and log-likelihoods on the LLaDA, Dream and A2D stand-ins equal
values recorded from each family's own code (tests/parity/family_outputs.json says what ran, at which commit, and
why every draw is deterministic; LLaDA's log-likelihood parity is tests/parity/test_llada_harness.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dlmeval.models import load_diffusion
from dlmeval.sampling.config import SamplerConfig
from dlmeval.sampling.sampler import RemaskingSampler

REC = json.loads((Path(__file__).parent / "family_outputs.json").read_text())
STRATEGY = {"low_confidence": "none", "entropy": "entropy", "maskgit_plus": "maskgit"}


@pytest.fixture(scope="module")
def models():
    out = {}
    for name, sha in REC["weights_sha256"].items():
        m = load_diffusion(name, device="cpu")
        assert m.identity().weights_sha256 == sha, (
            f"{name} changed; re-record tests/parity/family_outputs.json"
        )
        out[name] = m
    return out


def _cases(family, key="generate"):
    return [(family, i) for i in range(len(REC[family][key]))]


@pytest.mark.parametrize(("family", "i"), _cases("llada") + _cases("a2d") + _cases("dream"))
def test_generated_tokens_equal_the_familys_own_sampler(models, family, i):
    c = REC[family]["generate"][i]
    model = models[{"llada": "tiny-llada", "a2d": "tiny-a2d", "dream": "tiny-dream"}[family]]
    cfg = SamplerConfig(
        length=c["gen_length"],
        steps=c["steps"],
        block_length=c.get("block_length"),
        strategy=STRATEGY[c.get("alg", "low_confidence")],
        temperature=0.0,
        stop_at_eos=False,
    )
    got = RemaskingSampler(model, cfg).sample([c["prompt_ids"]]).tokens[0]
    assert [int(t) for t in got] == c["tokens"]


@pytest.mark.parametrize("i", range(len(REC["a2d_bd3lm"]["generate"])))
def test_bd3lm_tokens_and_layout_equal_dllms_bd3lm_sampler(models, i):
    """dllm's BD3LMSampler (KV-cache prefix pass, blocks of 4): dlmeval's block sampler lays the prompt out as dllm
    does (left-padded with the pad id to whole blocks) and generates the same tokens, also for prompts that hold
    the pad id inside them (dllm treats it as padding; #34 item 11)."""
    from dlmeval.sampling.block import BlockDiffusionSampler
    from dlmeval.sampling.block_causal import block_layout

    m = models["tiny-a2d-bd3lm"]
    c = REC["a2d_bd3lm"]["generate"][i]
    cfg = SamplerConfig(
        length=c["gen_length"], steps=c["steps"], strategy="none", temperature=0.0, stop_at_eos=False
    )
    got = BlockDiffusionSampler(m, cfg).sample([c["prompt_ids"]]).tokens[0]
    assert [int(t) for t in got] == c["tokens"]
    rows = [c["prompt_ids"] + [m.mask_token_id] * c["gen_length"]]
    ids, _ = block_layout(m, [c["prompt_ids"]], rows, c["block_length"], c["gen_length"])
    n = len(c["sequence"]) - c["gen_length"]
    assert ids[0, :n].tolist() == c["sequence"][:n]


def test_the_recorded_cases_cover_blocks_and_both_dream_orders():
    assert any(c["block_length"] < c["gen_length"] for c in REC["llada"]["generate"])
    assert any(c["block_length"] < c["gen_length"] for c in REC["a2d"]["generate"])
    assert {c["alg"] for c in REC["dream"]["generate"]} == {"entropy", "maskgit_plus"}
    pad = 0  # the stand-in's pad id (<|endoftext|>)
    assert sum(pad in c["prompt_ids"] for c in REC["a2d_bd3lm"]["generate"]) == 2


@pytest.mark.parametrize("i", range(len(REC["a2d"]["loglikelihood"])))
def test_a2d_log_likelihood_equals_dllms_mdlm_harness(models, i):
    """dllm's MDLM harness estimator after torch.manual_seed(seed), replayed by dlmeval's LLaDA-style estimator
    (the same draws in the same order)."""
    from dlmeval.scoring.llada_ll import llada_log_likelihood
    from dlmeval.seeding import torch_generator

    r = REC["a2d"]["loglikelihood"][i]
    ids = r["prefix_ids"] + r["target_ids"]
    got = llada_log_likelihood(
        models["tiny-a2d"],
        ids,
        (len(r["prefix_ids"]), len(ids)),
        mc_num=r["mc_num"],
        batch_size=r["batch_size"],
        generator=torch_generator(r["seed"]),
        vocab="tokenizer",  # the recording's shim masked the padded rows (the family's own rule is the default)
    )
    assert got == pytest.approx(r["loglikelihood"], abs=5e-6)


@pytest.mark.parametrize("i", range(len(REC["dream"]["loglikelihood_ar_ftb"])))
def test_dream_log_likelihood_equals_dreams_ar_ftb_path(models, i):
    """Dream's harness, nll_type ar_ftb (a fixed mask pattern): target position j is scored with the target
    positions >= j masked; dlmeval's scoring pass (Dream's shift: position j read from output j - 1) gives the
    same sum."""
    m = models["tiny-dream"]
    r = REC["dream"]["loglikelihood_ar_ftb"][i]
    p, t = r["prefix_ids"], r["target_ids"]
    n = len(t)
    x, a = m.pad([p + t[:j] + [m.mask_token_id] * (n - j) for j in range(n)])
    targets, _ = m.pad([p + t] * n)
    where = torch.zeros_like(x, dtype=torch.bool)
    off = m.offset(a)
    for j in range(n):
        where[j, int(off[j]) + len(p) + j] = True
    got = float(m.score_positions(x, a, where, targets).logprob.sum())
    assert got == pytest.approx(r["loglikelihood"], abs=1e-5)
