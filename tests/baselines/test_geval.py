"""G-Eval: probability-weighted form scores from a tiny causal LM judge and from an OpenAI-compatible endpoint,
checked by hand."""

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
import torch

from dlmeval.store import RunStore


@pytest.fixture(scope="module")
def judge():
    """A tiny random Llama whose word-level vocabulary has the score digits 1-5."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    from dlmeval.models.causal import HFCausalLM
    from dlmeval.models.tiny import SPECIALS, TINY_WORDS, _llama_config

    words = list(
        dict.fromkeys(SPECIALS + list(TINY_WORDS) + ["1", "2", "3", "4", "5", ":", "summary", "coherence"])
    )
    vocab = {w: i for i, w in enumerate(words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tk.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]", bos_token="<bos>", eos_token="<eos>"
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        cfg = _llama_config(len(vocab), 1, 32)
        cfg.max_position_embeddings = 2048
        m = LlamaForCausalLM(cfg).eval()
        torch.nn.init.normal_(m.lm_head.weight, std=1.0)  # a peaky head: the score probabilities differ
    return HFCausalLM(
        m,
        tok,
        name="tiny-judge",
        source="test",
        device=torch.device("cpu"),
        dtype=torch.float32,
        max_length=2048,
    )


def test_weighted_score_by_hand():
    from dlmeval.baselines.geval import weighted_score

    assert weighted_score({1: math.log(0.2), 2: math.log(0.3), 3: math.log(0.5)}) == pytest.approx(2.3)
    assert weighted_score({4: math.log(0.01)}) == pytest.approx(4.0)  # renormalised over the scores present
    assert math.isnan(weighted_score({}))


def test_published_forms():
    from dlmeval.baselines.geval import FORMS

    coh = FORMS["coherence"]
    assert coh.published and coh.scores == [1, 2, 3, 4, 5] and coh.prompt.endswith("- Coherence:")
    assert FORMS["fluency"].scores == [1, 2, 3] and "{{Document}}" not in FORMS["fluency"].prompt
    assert not FORMS["mt-accuracy"].published
    filled = coh.fill("DOC TEXT", "SUMMARY TEXT")
    assert "Source Text:\n\nDOC TEXT\n\nSummary:\n\nSUMMARY TEXT" in filled


def test_local_judge_equals_the_hand_computation(judge):
    from dlmeval.baselines.geval import FORMS, LocalJudge

    form = FORMS["coherence"]
    doc, out = "the cat sat on the mat .", "the cat sat ."
    (got,) = LocalJudge(judge).score(form, [doc], [out])
    prompt = form.fill(doc, out)
    lp = [float(np.sum(judge.continuation_logprobs([prompt], [f" {s}"])[0])) for s in range(1, 6)]
    p = np.exp(lp) / np.exp(lp).sum()
    assert got == pytest.approx(float((np.arange(1, 6) * p).sum()), abs=1e-5)
    assert abs(got - 3.0) > 1e-3  # the judge has an opinion


def test_family_in_the_suite(tmp_path, data_root, judge):
    from dlmeval.baselines.geval import FORMS, LocalJudge
    from dlmeval.errors import ModelNotFoundError
    from dlmeval.protocols.diffscore.meta_eval import (
        Suite,
        SuiteInputs,
        SuiteOptions,
        run_suite,
        scoring_frame,
    )

    kw = dict(families=("geval",), limit=2, bootstrap=0, progress=False, data_dir=str(data_root))
    opts = SuiteOptions(benchmarks=("gu-en",), geval_judge="judge", **kw)
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store, models={"judge": judge})
    frame = scoring_frame("gu-en", str(data_root), limit=2)
    got = Suite(opts, store, models={"judge": judge}).scores("gu-en", frame)["geval:mt-accuracy"]
    r = frame.iloc[0]
    want = LocalJudge(judge).score(FORMS["mt-accuracy"], [r["targets"][0]], [r["candidate"]])[0]
    assert got[0] == pytest.approx(want, abs=1e-5)
    assert any("dlmeval's form" in lab for lab in rep.results["label"])
    with pytest.raises(ModelNotFoundError, match="--geval-judge"):
        SuiteInputs(SuiteOptions(benchmarks=("gu-en",), **kw)).prepare()


def test_endpoint_judge_reads_top_logprobs():
    from dlmeval.baselines.geval import FORMS, EndpointJudge

    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            tops = [
                {"token": "4", "logprob": math.log(0.5)},
                {"token": " 4", "logprob": math.log(0.1)},
                {"token": "2", "logprob": math.log(0.2)},
                {"token": "The", "logprob": math.log(0.15)},
                {"token": "9", "logprob": math.log(0.05)},  # outside 1-5
                {"token": "²", "logprob": math.log(0.01)},  # str.isdigit, but no score: skipped, no crash
            ]
            body = json.dumps(
                {"choices": [{"logprobs": {"content": [{"token": "4", "top_logprobs": tops}]}}]}
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        j = EndpointJudge(f"http://127.0.0.1:{srv.server_port}/v1", "judge-x")
        (got,) = j.score(FORMS["relevance"], ["a document"], ["a summary"])
    finally:
        srv.shutdown()
    assert got == pytest.approx((4 * 0.6 + 2 * 0.2) / 0.8)
    req = seen[0]
    assert req["max_tokens"] == 1 and req["temperature"] == 0 and req["top_logprobs"] == 20
    assert req["model"] == "judge-x" and "a document" in req["messages"][0]["content"]


def test_published_forms_are_the_files_character_for_character():
    """The four SummEval forms equal G-Eval's prompts/summeval/*_detailed.txt as gpt4_eval.py reads them (text mode:
    CRLF read as LF). sha256 of each file so read, recorded from nlpyang/geval@6f84404 (``git show
    6f84404:prompts/summeval/con_detailed.txt`` then ``open(f).read()``)."""
    import hashlib

    from dlmeval.baselines.geval import FORMS

    want = {
        "coherence": "3036b788c0c7aa3c7147a71b1ff9897c42b8303624c731a3d731218d349d871b",
        "consistency": "ce74a0de8f19f2f0d31c77d1df76eece9b29fd14fee1f2bb82b462846eac62fa",
        "fluency": "128ad51b29f9cb7badf086cd0ebc1d4a53772b0f89c5cf051050f6c76e046e57",
        "relevance": "4d55e0539987885d4c0aad448f22e67d58b2afeca9dd3f53e16092213f8b0ae6",
    }
    got = {n: hashlib.sha256(FORMS[n].prompt.encode()).hexdigest() for n in want}
    assert got == want
