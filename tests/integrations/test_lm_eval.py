"""lm-evaluation-harness interop (skipped when lm-eval is not installed)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.api.registry import get_model  # noqa: E402

from dlmeval.errors import InputError  # noqa: E402
from dlmeval.integrations import lm_eval as lm_eval_mod  # noqa: E402
from dlmeval.integrations.lm_eval import DlmevalLM  # noqa: E402


@pytest.fixture(scope="module")
def lm():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield DlmevalLM.create_from_arg_string(
        "model=tiny-llada,steps=8,gen_length=8,strategy=high_entropy,seed=3"
    )
    torch.set_num_threads(old)


def req(kind, args, i=0):
    return Instance(request_type=kind, doc={}, arguments=args, idx=i)


def test_registered_under_dlmeval():
    assert get_model("dlmeval") is DlmevalLM


def test_loglikelihood_is_elbo_times_tokens_and_deterministic(lm):
    reqs = [
        req("loglikelihood", ("the cat sat on the", " mat")),
        req("loglikelihood", ("the cat", " is big red")),
    ]
    a = lm.loglikelihood(reqs)
    b = lm.loglikelihood(list(reversed(reqs)))[::-1]
    assert a == b  # order-independent (masks seeded per request)
    assert all(isinstance(x, float) and x < 0 and isinstance(g, bool) for x, g in a)
    # the plugin's value is the scorer's per-token ELBO (same request id: the same masks) times the tokens scored
    rid = lm_eval_mod._request_id("ll", "the cat sat on the", " mat")
    df = lm._scorer().score([" mat"], ["the cat sat on the"], config="cond", item_ids=[rid])
    assert a[0][0] == pytest.approx(float(df["score"][0]) * int(df["n_tokens"][0]), rel=1e-5)
    assert [r["type"] for r in lm.nfe_records[-2:]] == ["loglikelihood"] * 2


def test_generate_until_records_nfe_and_cuts(lm, tmp_path):
    lm.nfe_log = str(tmp_path / "nfe.jsonl")
    before = len(lm.nfe_records)
    reqs = [
        req("generate_until", ("the cat", {"until": ["."], "max_gen_toks": 8}), 0),
        req("generate_until", ("a dog", {"until": ["\n"], "max_gen_toks": 8}), 1),
        req("generate_until", ("the cat", {"until": ["."], "max_gen_toks": 8}), 2),
    ]
    out = lm.generate_until(reqs)
    assert len(out) == 3 and all(isinstance(o, str) and "." not in o for o in out)
    recs = lm.nfe_records[before:]
    assert sorted(r["index"] for r in recs) == [0, 1, 2]
    # high_entropy at 8 steps over 8 tokens (k = 1, window from step 2): 8 decode + 6 scoring + 1 drain passes
    # at most (a row may stop at EOS)
    assert all(r["type"] == "generate_until" and 0 < r["nfe"] <= 15 and r["steps"] == 8 for r in recs)
    logged = [json.loads(line) for line in open(lm.nfe_log)]
    assert len(logged) == 3
    again = lm.generate_until(reqs)
    assert again == out  # seeded per request


def test_rolling_and_compute_matched():
    m = DlmevalLM(model="tiny-llada", nfe=6, gen_length=8, strategy="none")
    out = m.generate_until([req("generate_until", ("the", {"until": []}))])
    assert isinstance(out[0], str)
    assert m.nfe_records[-1]["nfe_target"] == 6 and m.nfe_records[-1]["nfe"] <= 6
    text = "the cat sat on the mat ."
    (ll,) = m.loglikelihood_rolling([req("loglikelihood_rolling", (text,))])
    assert ll == pytest.approx(_rolling_by_hand(m, text), abs=1e-5)


def _rolling_by_hand(m, text: str) -> float:
    """The rolling log-likelihood recomputed outside the scorer's batching: each of the scorer's masks of the text
    (the request's id seeds them) forwarded alone through the checkpoint's own module, the log-probabilities of the
    hidden tokens over the tokenizer's vocabulary summed in a plain loop, then the estimator's per-mask values and
    weights (marginal, ``elbo_norm``) times the number of tokens."""
    from dlmeval.scoring.spec import mask_values

    model, scorer = m.lm, m._scorer()
    lay = scorer.formatter.layout("marginal", text, None)
    a, b = lay.span("candidate")
    masks = scorer._masks_for(lm_eval_mod._request_id("roll", text), "candidate", b - a)
    vocab = len(model.tokenizer)
    token_lp = np.full(masks.hidden.shape, np.nan)
    for j, hidden in enumerate(masks.hidden):
        ids = list(lay.ids)
        for i in np.flatnonzero(hidden):
            ids[a + i] = model.mask_token_id
        with torch.no_grad():
            logits = model.module(input_ids=torch.tensor([ids])).logits[0, :, :vocab].double()
        logp = torch.log_softmax(logits, -1)
        for i in np.flatnonzero(hidden):
            token_lp[j, i] = float(logp[a + i, lay.ids[a + i]])
    full = None if masks.control is None else token_lp[masks.control]
    values = mask_values(np.nansum(token_lp, axis=1), masks, scorer.spec, full)
    return float(np.dot(masks.weights(), values)) * (b - a)


def test_a_task_temperature_does_not_silently_replace_the_unmask_temperature():
    r = [req("generate_until", ("the", {"until": [], "temperature": 0.7, "max_gen_toks": 6}))]
    m = DlmevalLM(model="tiny-llada", steps=6, gen_length=6, temperature=0.0)
    greedy = DlmevalLM(model="tiny-llada", steps=6, gen_length=6, temperature=0.0, task_temperature="use")
    assert m._temperature({"temperature": 0.7}) == 0.0 and greedy._temperature({"temperature": 0.7}) == 0.7
    m.generate_until(r)
    assert len(m.warnings) == 1 and "temperature=0.7" in m.warnings[0] and "wins" in m.warnings[0]
    strict = DlmevalLM(model="tiny-llada", steps=6, gen_length=6, task_temperature="refuse")
    with pytest.raises(InputError, match="temperature=0.7"):
        strict.generate_until(r)
    strict.generate_until([req("generate_until", ("the", {"until": [], "temperature": 0.0}))])  # same: fine
    with pytest.raises(InputError, match="task_temperature"):
        DlmevalLM(model="tiny-llada", task_temperature="maybe")
