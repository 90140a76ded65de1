"""BARTScore proper (seq2seq likelihood) on a tiny random BART, and GPTScore-style prompted AR scoring."""

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError, ModelNotFoundError

SRC = [
    "the cat sat on the red book and the dog ran to the river .",
    "a man saw the queen in paris",
    "she wrote a book",
    "two dogs ate the food at night , and the child was happy .",
]
HYP = ["the cat sat", "the queen was in paris with a man .", "she wrote it", "dogs ate food"]


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory):
    from dlmeval.baselines.seq2seq import tiny_bart

    return tiny_bart(tmp_path_factory.mktemp("tiny-bart"), seed=3)


@pytest.fixture(scope="module")
def bart(bart_dir):
    from dlmeval.baselines.seq2seq import load_seq2seq

    return load_seq2seq(bart_dir, device="cpu", batch_size=2)


def _hand_bartscore(model_dir, src: str, tgt: str) -> float:
    """Independent: one row, transformers' own shift_tokens_right, a full log_softmax, mean over target tokens."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.models.bart.modeling_bart import shift_tokens_right

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    m = AutoModelForSeq2SeqLM.from_pretrained(str(model_dir)).eval()
    x = torch.tensor([tok(src)["input_ids"]])
    y = torch.tensor([tok(tgt)["input_ids"]])
    dec = shift_tokens_right(y, m.config.pad_token_id, m.config.decoder_start_token_id)
    with torch.no_grad():
        logits = m(input_ids=x, decoder_input_ids=dec).logits
        lp = torch.log_softmax(logits.double(), -1)[0, torch.arange(y.shape[1]), y[0]]
        # and transformers' own loss with labels (mean token cross-entropy) must say the same
        loss = m(input_ids=x, labels=y).loss
    assert float(-loss) == pytest.approx(float(lp.mean()), abs=1e-5)
    return float(lp.mean())


def test_bartscore_loglik_equals_hand_computation(bart, bart_dir):
    got = bart.mean_logprobs(SRC, HYP)
    for s, h, g in zip(SRC, HYP, got):
        assert g == pytest.approx(_hand_bartscore(bart_dir, s, h), abs=1e-5)
    # every target token is scored, the tokenizer's <bos> and <eos> included (BARTScore's labels=tgt_tokens)
    lps = bart.token_logprobs(SRC, HYP)
    assert [len(x) for x in lps] == [len(bart.tokenizer(h)["input_ids"]) for h in HYP]
    assert all(np.all(x < 0) for x in lps)


def test_bartscore_batch_size_and_order_invariant(bart_dir):
    from dlmeval.baselines.seq2seq import load_seq2seq

    one = load_seq2seq(bart_dir, batch_size=1).mean_logprobs(SRC, HYP)
    many = load_seq2seq(bart_dir, batch_size=4)
    assert np.allclose(many.mean_logprobs(SRC, HYP), one, atol=1e-5)
    assert many.nfe == 1  # one padded batch
    rev = many.mean_logprobs(SRC[::-1], HYP[::-1])[::-1]
    assert np.allclose(rev, one, atol=1e-5)
    # deterministic: the same checkpoint gives the same numbers bit for bit
    assert load_seq2seq(bart_dir, batch_size=1).mean_logprobs(SRC, HYP) == one


def test_bartscore_directions(bart):
    from dlmeval.baselines.seq2seq import bartscore

    refs = [["the cat sat on a book", "a cat sat"], ["the queen saw a man"], ["she wrote"], ["dogs ate"]]
    got = bartscore(
        bart, HYP, sources=SRC, references=refs, directions=("s2h", "h2s", "sbi", "r2h", "h2r", "f", "mar")
    )
    assert got["s2h"] == pytest.approx(bart.mean_logprobs(SRC, HYP))
    assert got["h2s"] == pytest.approx(bart.mean_logprobs(HYP, SRC))
    assert got["sbi"] == pytest.approx([(a + b) / 2 for a, b in zip(got["s2h"], got["h2s"])])
    assert got["mar"] == pytest.approx(bart.mean_logprobs([""] * 4, HYP))
    # two references for candidate 0: r2h / h2r take the best, F the best per-reference mean (BARTScore avg_f)
    r2h = bart.mean_logprobs(refs[0], [HYP[0]] * 2)
    h2r = bart.mean_logprobs([HYP[0]] * 2, refs[0])
    assert got["r2h"][0] == pytest.approx(max(r2h))
    assert got["h2r"][0] == pytest.approx(max(h2r))
    assert got["f"][0] == pytest.approx(max((a + b) / 2 for a, b in zip(r2h, h2r)))
    single = bart.mean_logprobs([refs[2][0]], [HYP[2]])[0], bart.mean_logprobs([HYP[2]], [refs[2][0]])[0]
    assert got["f"][2] == pytest.approx(sum(single) / 2)
    # ref_agg="mean": BARTScore's SUM/score.py at its pickles' commit averages ref_hypo and hypo_ref over the refs
    mean = bartscore(bart, HYP, references=refs, directions=("r2h", "h2r", "f"), ref_agg="mean")
    assert mean["r2h"][0] == pytest.approx(sum(r2h) / 2) and mean["h2r"][0] == pytest.approx(sum(h2r) / 2)
    assert mean["f"][0] == pytest.approx((sum(r2h) + sum(h2r)) / 4)
    assert mean["f"][2] == pytest.approx(got["f"][2])  # one reference: the same either way
    with pytest.raises(InputError, match="'mean' or 'max'"):
        bartscore(bart, HYP, references=refs, directions=("f",), ref_agg="median")


def test_bartscore_bad_input(bart, tmp_path):
    from dlmeval.baselines.seq2seq import bartscore, load_seq2seq

    with pytest.raises(InputError, match="need one source"):
        bartscore(bart, HYP, directions=("s2h",))
    with pytest.raises(InputError, match="unknown BARTScore direction"):
        bartscore(bart, HYP, sources=SRC, directions=("x2y",))
    with pytest.raises(InputError, match="target 1 is empty"):
        bart.mean_logprobs(["a", "b"], ["a cat", "  "])
    with pytest.raises(ModelNotFoundError, match="--bartscore-model DIR"):
        load_seq2seq("facebook/bart-large-cnn", hint="pass --bartscore-model DIR")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_seq2seq(tmp_path / "nothing-here")


def test_bartscore_truncates_like_bartscore(bart_dir):
    from dlmeval.baselines.seq2seq import load_seq2seq

    sc = load_seq2seq(bart_dir, max_length=6)
    long = "the cat sat on the red book and the dog ran"
    lp = sc.token_logprobs([long], [long])[0]
    assert lp.size == 6 and sc.truncated == 2
    assert sc.tokenizer(long, truncation=True, max_length=6)["input_ids"][-1] == sc.tokenizer.eos_token_id


# ---------------------------------------------------------------------------------------------- GPTScore
@pytest.fixture(scope="module")
def tiny_ar():
    from dlmeval.models.tiny import tiny_model

    return tiny_model("causal", seed=1)


def _hand_gptscore(m, prompt: str, hyp: str) -> float:
    """Independent: the whole string through the module, log_softmax, the hypothesis's tokens read off."""
    tok = m.tokenizer
    ctx = tok(prompt)["input_ids"]
    full = tok(prompt + " " + hyp)["input_ids"]
    assert full[: len(ctx)] == ctx  # word-level: the prompt's tokens are a prefix
    with torch.no_grad():
        logits = m.module(input_ids=torch.tensor([full])).logits[0].double()
    lp = torch.log_softmax(logits, -1)
    vals = [float(lp[j - 1, full[j]]) for j in range(len(ctx), len(full))]
    return sum(vals) / len(vals)


def test_gptscore_equals_hand_computation(tiny_ar):
    from dlmeval.baselines.gptscore import GPTScorer, gptscore

    sc = GPTScorer.for_aspect(tiny_ar, "SUM", "COH", batch_size=3)
    got = gptscore(sc, HYP, sources=SRC)["s2h"]
    for s, h, g in zip(SRC, HYP, got):
        prompt = "Generate a coherent summary for the following text: " + s + "\n\nTl;dr"
        assert g == pytest.approx(_hand_gptscore(tiny_ar, prompt, h), abs=1e-5)
    # D2T: GPTScore's own repository wording, the reference in the prompt (ref_hypo), and the reverse (hypo_ref)
    d2t = GPTScorer.for_aspect(tiny_ar, "D2T", "NAT")
    refs = [["the cat sat on a book", "a cat sat"], ["the queen saw a man"], ["she wrote"], ["dogs ate"]]
    out = gptscore(d2t, HYP, references=refs, directions=("r2h", "h2r", "f"))
    inst = "Convert the following text into another expression that is as natural as a native speaker:\n"
    r2h = [_hand_gptscore(tiny_ar, inst + r + " In other words ,", HYP[0]) for r in refs[0]]
    h2r = [_hand_gptscore(tiny_ar, inst + HYP[0] + " In other words ,", r) for r in refs[0]]
    assert out["r2h"][0] == pytest.approx(max(r2h), abs=1e-5)
    assert out["h2r"][0] == pytest.approx(max(h2r), abs=1e-5)
    assert out["f"][0] == pytest.approx(max((a + b) / 2 for a, b in zip(r2h, h2r)), abs=1e-5)


def test_gptscore_batch_invariant_and_bad_input(tiny_ar):
    from dlmeval.baselines.gptscore import GPTScorer, aspect_for, gptscore, template_for

    one = GPTScorer.for_aspect(tiny_ar, "WMT", aspect_for("WMT", "DARR"), batch_size=1)
    four = GPTScorer.for_aspect(tiny_ar, "WMT", "ACC", batch_size=4)
    assert np.allclose(one.mean_logprobs(SRC, HYP), four.mean_logprobs(SRC, HYP), atol=1e-5)
    assert aspect_for("SUM", "litepyramid_recall") == "COV"
    with pytest.raises(InputError, match="no GPTScore SUM template for aspect 'NAT'"):
        template_for("SUM", "NAT")
    with pytest.raises(InputError, match="no GPTScore aspect"):
        aspect_for("D2T", "coherence")
    with pytest.raises(InputError, match="must contain"):
        GPTScorer(tiny_ar, template="no slot")
    with pytest.raises(InputError, match="hypothesis 0 is empty"):
        one.mean_logprobs(["a"], [""])
    with pytest.raises(InputError, match="unknown GPTScore direction"):
        gptscore(one, HYP, sources=SRC, directions=("mar",))
