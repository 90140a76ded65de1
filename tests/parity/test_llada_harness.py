"""LLaDA's lm-eval harness reproduced: ``likelihood=llada`` against numbers recorded from ``eval_llada.py`` itself.

tests/fixtures/llada_harness_tiny.json says how they were recorded (LLaDA's harness run outside the repository on
the tiny-llada stand-in; its code is not part of dlmeval).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlmeval.errors import InputError
from dlmeval.models import load_diffusion
from dlmeval.scoring.llada_ll import llada_encode_pair, llada_greedy, llada_log_likelihood
from dlmeval.seeding import torch_generator

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "llada_harness_tiny.json").read_text())


@pytest.fixture(scope="module")
def llada():
    m = load_diffusion("tiny-llada", device="cpu")
    assert m.identity().weights_sha256 == FIXTURE["weights_sha256"], (
        "the tiny-llada stand-in changed; re-record tests/fixtures/llada_harness_tiny.json as its 'how' says"
    )
    return m


@pytest.mark.parametrize("i", range(len(FIXTURE["records"])))
def test_llada_harness_values_are_reproduced(llada, i):
    r = FIXTURE["records"][i]
    prefix, target = llada_encode_pair(llada, r["context"], r["continuation"])
    assert (prefix, target) == (r["prefix_ids"], r["target_ids"])  # lm-eval's split, trailing space moved
    ids, span = prefix + target, (len(prefix), len(prefix) + len(target))
    # the fixture's shim masked the padded rows: the tokenizer's rule, one keyword away from LLaDA's (the default)
    got = llada_log_likelihood(
        llada, ids, span, mc_num=r["mc_num"], batch_size=r["batch_size"], cfg=r["cfg"],
        generator=torch_generator(r["seed"]), vocab="tokenizer",
    )  # fmt: skip
    assert got == pytest.approx(r["loglikelihood"], abs=5e-6)
    assert llada_greedy(llada, ids, span, cfg=r["cfg"], vocab="tokenizer") is r["greedy"]


def test_guidance_moves_the_value(llada):
    """The same request and draws with cfg 0 and 0.5: guidance changes the estimate (computed, not read from the
    fixture), as it changed the harness's."""
    r = next(r for r in FIXTURE["records"] if r["cfg"] == 0 and r["batch_size"] == 8 and r["seed"] == 0)
    ids = r["prefix_ids"] + r["target_ids"]
    span = (len(r["prefix_ids"]), len(ids))
    got = {
        cfg: llada_log_likelihood(
            llada,
            ids,
            span,
            mc_num=r["mc_num"],
            batch_size=8,
            cfg=cfg,
            generator=torch_generator(0),
            vocab="tokenizer",
        )  # fmt: skip
        for cfg in (0.0, 0.5)
    }
    assert got[0.0] == pytest.approx(r["loglikelihood"], abs=5e-6) and abs(got[0.5] - got[0.0]) > 1e-4


def test_lm_eval_likelihood_option(llada):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from dlmeval.integrations.lm_eval import DlmevalLM, _request_id
    from dlmeval.seeding import derive_seed

    reqs = [
        Instance("loglikelihood", {}, ("the cat ", "sat on the"), 0),
        Instance("loglikelihood", {}, ("the a an of", " to"), 1),
    ]
    lm = DlmevalLM(lm=llada, likelihood="llada", cfg=0.5, mc_num=16, batch_size=8, seed=2)
    assert lm.mc_batch == 8 and lm.check_greedy  # LLaDA's harness reads --batch_size as its mini-batch
    got = lm.loglikelihood(reqs)
    ids = sum(llada_encode_pair(llada, "the cat ", "sat on the"), [])
    gen = torch_generator(derive_seed(2, "lm-eval-llada", _request_id("ll", "the cat ", "sat on the")))
    want = llada_log_likelihood(llada, ids, (3, 6), mc_num=16, batch_size=8, cfg=0.5, generator=gen)
    assert got[0] == (want, False) and got[1][1] is True
    # 16 / 8 = 2 forward passes (each runs the guided and unguided rows together) + one greedy step per token
    assert [r["nfe"] for r in lm.nfe_records] == [2 + 3, 2 + 1]
    dllm = DlmevalLM(lm=llada, likelihood="dllm", mc_num=16, batch_size=8, seed=2)
    assert not dllm.check_greedy and dllm.loglikelihood(reqs[1:])[0][1] is False
    with pytest.raises(InputError, match="only LLaDA's harness guides"):
        DlmevalLM(lm=llada, likelihood="dllm", cfg=0.5)
    with pytest.raises(InputError, match="multiple of mc_batch"):
        DlmevalLM(lm=llada, likelihood="llada", mc_num=20, batch_size=8)
    with pytest.raises(InputError, match="likelihood="):
        DlmevalLM(lm=llada, likelihood="smdm")


def test_the_family_vocabulary_rule_is_the_harness_default(llada):
    """``likelihood=llada`` is LLaDA's harness as published: every output row in its cross-entropy (the family's
    rule, the default); ``vocab=tokenizer`` (the fixture's shim: the padded rows masked) is one model argument away.
    The value is what the estimator gives with that rule, and the stand-in's untrained padded rows pull it down."""
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from dlmeval.integrations.lm_eval import DlmevalLM, _request_id
    from dlmeval.seeding import derive_seed

    reqs = [Instance("loglikelihood", {}, ("the cat ", "sat on the"), 0)]
    got = {
        v: DlmevalLM(lm=llada, likelihood="llada", mc_num=16, batch_size=8, seed=2, vocab=v).loglikelihood(
            reqs
        )[0]
        for v in ("tokenizer", "family", None)
    }
    ids = sum(llada_encode_pair(llada, "the cat ", "sat on the"), [])
    gen = torch_generator(derive_seed(2, "lm-eval-llada", _request_id("ll", "the cat ", "sat on the")))
    want = llada_log_likelihood(llada, ids, (3, 6), mc_num=16, batch_size=8, generator=gen, vocab="all")
    assert got["family"][0] == want and got["tokenizer"][0] - want > 0.01
    assert got[None] == got["family"]  # the default
    # the two values docs/lm-eval.md quotes for this request
    assert (got["family"][0], got["tokenizer"][0]) == (
        pytest.approx(-18.6284, abs=1e-4),
        pytest.approx(-18.5662, abs=1e-4),
    )
    infos = {
        (lk, est): DlmevalLM(
            lm=llada, likelihood=lk, ll_estimator=est, mc_num=16, batch_size=8
        ).get_model_info()
        for lk, est in (
            ("llada", "diffscore"),
            ("dllm", "diffscore"),
            ("dlmeval", "llada"),
            ("dlmeval", "diffscore"),
        )
    }
    assert {
        k: (v["dlmeval_likelihood"]["vocab"], v["dlmeval_likelihood"]["vocab_rows"]) for k, v in infos.items()
    } == {
        ("llada", "diffscore"): ("family", "all"),
        ("dllm", "diffscore"): ("family", "all"),
        ("dlmeval", "llada"): ("family", "all"),
        ("dlmeval", "diffscore"): (
            "tokenizer",
            "tokenizer",
        ),  # DiffScore's estimator: the paper's vocabulary V
    }
    with pytest.raises(InputError, match="vocab='rows'"):
        DlmevalLM(lm=llada, likelihood="llada", vocab="rows")
    with pytest.raises(InputError, match="reaches LLaDA's estimator only"):
        DlmevalLM(lm=llada, vocab="family")  # the DiffScore estimator keeps the tokenizer's rows
