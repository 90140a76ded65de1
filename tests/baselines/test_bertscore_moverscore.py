"""BERTScore through bert-score (the suite's rows equal the package's own scores) and MoverScore as its authors
compute it (hand computations on a tiny random BERT)."""

import math

import numpy as np
import pytest
import torch

from dlmeval.store import RunStore


def _opts(encoder, **kw):
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    base = dict(
        encoder=encoder,
        bootstrap=0,
        progress=False,
        families=("embedding",),
        benchmarks=("SummEval", "BAGEL"),
        limit=3,
    )
    base.update(kw)
    return SuiteOptions(**base)


@pytest.mark.parametrize("idf", [False, True])
def test_bertscore_rows_equal_bert_score_package(tmp_path, data_root, tiny_encoder, idf):
    from bert_score import BERTScorer

    from dlmeval.protocols.diffscore.meta_eval import Suite, run_suite, scoring_frame

    # --ref-agg max: the F of the best reference, bert-score's own multi-reference rule; --text-form detok: the
    # detokenized texts
    opts = _opts(
        tiny_encoder,
        data_dir=str(data_root),
        bertscore_idf=idf,
        bertscore_layer=1,
        ref_agg="max",
        text_form="detok",
    )
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store)
    suite = Suite(opts, store)
    for bench in ("SummEval", "BAGEL"):
        frame = scoring_frame(bench, str(data_root), limit=3)
        got = suite.scores(bench, frame)["bertscore_f"]
        refs = [list(dict.fromkeys(t)) for t in frame["targets"]]
        own = BERTScorer(
            model_type=tiny_encoder,
            num_layers=1,
            lang="en",
            nthreads=0,
            idf=idf,
            idf_sents=list(dict.fromkeys(t for r in refs for t in r)) if idf else None,
        )
        _, _, f = own.score(list(frame["candidate"]), refs)
        assert got == pytest.approx(f.numpy(), abs=1e-5)
        assert len(got) == len(frame) and not np.isnan(got).any()
    # SummEval: the pooled segment-level Spearman over all outputs beside the per-document average
    from scipy import stats

    frame = scoring_frame("SummEval", str(data_root), limit=3)
    got = suite.scores("SummEval", frame)["bertscore_f"]
    res = rep.results
    pooled = res[
        (res["benchmark"] == "SummEval")
        & (res["metric"] == "bertscore_f")
        & (res["protocol"] == "spearman")
        & (res["dimension"] == "coherence")
    ]
    assert pooled["value"].item() == pytest.approx(stats.spearmanr(got, frame["coherence"])[0])
    label = next(lab for lab in rep.results["label"] if lab.startswith("BERTScore"))
    assert "L1" in label and "CPU demo" in label and (("idf" in label) == idf)


def test_bertscore_mean_over_references_and_variants(tmp_path, data_root, tiny_encoder):
    """--ref-agg mean (the default, as BARTScore's SUM/score.py): P, R and F each averaged over SummEval's
    references, every one scored by bert-score alone, on the tokenized pickle text (--text-form bartscore, the
    default); R and P are rows of their own."""
    from bert_score import BERTScorer

    from dlmeval.protocols.diffscore.meta_eval import Suite, run_suite, scoring_frame

    opts = _opts(tiny_encoder, data_dir=str(data_root), benchmarks=("SummEval",), bertscore_layer=1, limit=1)
    store = RunStore(tmp_path / "s.sqlite")
    run_suite(opts, store)
    frame = scoring_frame("SummEval", str(data_root), limit=1)
    scores = Suite(opts, store).scores("SummEval", frame)
    own = BERTScorer(model_type=tiny_encoder, num_layers=1, lang="en", nthreads=0)
    assert frame["candidate_raw"].iat[0] != frame["candidate"].iat[0]  # the pickle's text is tokenized
    for i, (cand, refs) in enumerate(zip(frame["candidate_raw"], frame["targets_raw"])):
        refs = list(dict.fromkeys(refs))
        assert len(refs) == 11
        p, r, f = own.score([cand] * len(refs), [[t] for t in refs])
        assert scores["bertscore_f"][i] == pytest.approx(float(f.mean()), abs=1e-5)
        assert scores["bertscore_r"][i] == pytest.approx(float(r.mean()), abs=1e-5)
        assert scores["bertscore_p"][i] == pytest.approx(float(p.mean()), abs=1e-5)
        assert scores["bertscore_f"][i] < float(f.max()) - 1e-4  # not the best reference


def test_bertscore_idf_changes_the_run_and_the_numbers(tmp_path, data_root, tiny_encoder):
    from dlmeval.protocols.diffscore.meta_eval import Suite, run_suite, scoring_frame

    store = RunStore(tmp_path / "s.sqlite")
    a = _opts(tiny_encoder, data_dir=str(data_root), benchmarks=("SummEval",))
    b = _opts(tiny_encoder, data_dir=str(data_root), benchmarks=("SummEval",), bertscore_idf=True)
    run_suite(a, store)
    run_suite(b, store)
    sa, sb = Suite(a, store), Suite(b, store)
    assert sa.component("embedding").run.run_id != sb.component("embedding").run.run_id
    frame = scoring_frame("SummEval", str(data_root), limit=3)
    va, vb = sa.scores("SummEval", frame)["bertscore_f"], sb.scores("SummEval", frame)["bertscore_f"]
    assert not np.allclose(va, vb)


def test_bertscore_rescaling_uses_the_baseline_file(tmp_path, tiny_encoder):
    from dlmeval.baselines.bertscore import BERTScore, baseline_file

    assert baseline_file("roberta-large") is not None  # shipped with bert-score
    base = tmp_path / "base.tsv"
    base.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n1,0.5,0.5,0.5\n2,0.4,0.4,0.4\n")
    plain = BERTScore(tiny_encoder, layer=1, device="cpu")
    scaled = BERTScore(tiny_encoder, layer=1, baseline=base, device="cpu")
    assert not plain.rescale and scaled.rescale and "rescaled" in scaled.label
    ((p, r, f),) = plain.score(["the cat sat"], [["a dog ran"]])
    ((p2, r2, f2),) = scaled.score(["the cat sat"], [["a dog ran"]])
    assert f2 == pytest.approx((f - 0.5) / 0.5, abs=1e-6) and p2 == pytest.approx((p - 0.5) / 0.5, abs=1e-6)


# ---------------------------------------------------------------------------------------------- MoverScore
def _pooled(encoder_dir, text):
    """The published step 1-2 by hand: [CLS] + tokens + [SEP], last <=5 encoded layers normalised, [min, mean, max]."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(encoder_dir)
    mod = AutoModel.from_pretrained(encoder_dir).eval()
    toks = [tok.cls_token, *tok.tokenize(text), tok.sep_token]
    ids = torch.tensor([tok.convert_tokens_to_ids(toks)])
    with torch.no_grad():
        hs = mod(input_ids=ids, output_hidden_states=True).hidden_states[1:]
    h = torch.stack(hs[-5:])[:, 0]
    h = h / h.norm(dim=-1, keepdim=True)
    return toks, torch.cat([h.min(0).values, h.mean(0), h.max(0).values], -1).double().numpy()


def test_moverscore_unigram_uniform_equals_an_assignment(tiny_encoder):
    """Uniform weights and equally many kept tokens on both sides: the EMD is the optimal assignment's mean cost
    (squared distances between the re-normalised vectors)."""
    from scipy.optimize import linear_sum_assignment

    from dlmeval.baselines.moverscore import MoverScore

    ms = MoverScore(tiny_encoder, idf=False, device="cpu")
    cand, ref = "the cat sat .", "a dog ran"
    (got,) = ms.score([cand], [[ref]])

    def kept(text):
        toks, e = _pooled(tiny_encoder, text)
        e = e[[k for k, w in enumerate(toks) if w not in {".", ","}]]
        return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-6)

    a, b = kept(ref), kept(cand)  # [CLS] + 3 words + [SEP] each (the full stop dropped)
    assert a.shape[0] == b.shape[0] == 5
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    r, c = linear_sum_assignment(cost)
    assert got == pytest.approx(1 - cost[r, c].mean(), abs=1e-6)


def test_moverscore_idf_and_ngram_by_hand(tiny_encoder):
    """IDF values as MoverScore's get_idf_dict; with n_gram >= the kept length each side is one IDF-weighted
    vector, so 1 - EMD is one squared distance."""
    from dlmeval.baselines.moverscore import MoverScore

    ms = MoverScore(tiny_encoder, n_gram=9, device="cpu")
    refs, hyps = ["the cat sat", "the dog ran"], ["a cat", "the cat"]
    ms.set_idf(refs, hyps)
    cat = ms.tokenizer.convert_tokens_to_ids("cat")
    the = ms.tokenizer.convert_tokens_to_ids("the")
    assert ms.idf_ref[the] == pytest.approx(math.log(3 / 3)) and ms.idf_ref[cat] == pytest.approx(
        math.log(3 / 2)
    )
    assert ms.idf_hyp[cat] == pytest.approx(0.0) and ms.idf_ref[12345] == pytest.approx(math.log(3))
    (got,) = ms.score(["a cat"], [["the dog ran"]])

    def one(text, d):
        toks, e = _pooled(tiny_encoder, text)
        w = np.array([d[i] for i in ms.tokenizer.convert_tokens_to_ids(toks)])
        v = ((w / (w.sum() + 1e-5))[:, None] * e).sum(0)
        return v / (np.linalg.norm(v) + 1e-6)

    a, b = one("the dog ran", ms.idf_ref), one("a cat", ms.idf_hyp)
    assert got == pytest.approx(1 - ((a - b) ** 2).sum(), abs=1e-6)


def test_moverscore_best_reference_and_bad_settings(tiny_encoder):
    from dlmeval.baselines.moverscore import MoverScore
    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    ms = MoverScore(tiny_encoder, idf=False, device="cpu")
    two = ms.score(["the cat sat"], [["a dog ran", "the cat sat"]])[0]
    same = ms.score(["the cat sat"], [["the cat sat"]])[0]
    other = ms.score(["the cat sat"], [["a dog ran"]])[0]
    assert two == pytest.approx(same)
    # ref_agg="mean": BARTScore's SUM/score.py averages word_mover_score over the references
    mean = ms.score(["the cat sat"], [["a dog ran", "the cat sat"]], ref_agg="mean")[0]
    assert mean == pytest.approx((same + other) / 2)
    with pytest.raises(InputError, match="'mean' or 'max'"):
        ms.score(["a"], [["b"]], ref_agg="best")
    # [CLS] and [SEP] are no punctuation: they stay (the authors' code keeps them), so an all-punctuation
    # candidate still has two points
    assert ms._keep(ms.tokens(". ,")) == [0, 3]
    with pytest.raises(InputError, match="moverscore-ngram"):
        SuiteOptions(moverscore_ngram=0).check()


def test_moverscore_stopwords_file_changes_the_run_and_the_numbers(tmp_path, data_root, tiny_encoder):
    """--moverscore-stopwords FILE: the words (read as BARTScore reads files/stopwords.txt) go into the run and out
    of the transport problem; a missing file is one clear error."""
    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.meta_eval import Suite, run_suite, scoring_frame

    words = tmp_path / "stop.txt"
    words.write_text("the a of in is\n")
    store = RunStore(tmp_path / "s.sqlite")
    a = _opts(tiny_encoder, data_dir=str(data_root), benchmarks=("BAGEL",), limit=4)
    b = _opts(
        tiny_encoder, data_dir=str(data_root), benchmarks=("BAGEL",), limit=4, moverscore_stopwords=str(words)
    )
    run_suite(a, store)
    run_suite(b, store)
    sa, sb = Suite(a, store), Suite(b, store)
    run_b = sb.component("embedding").run
    assert sa.component("embedding").run.run_id != run_b.run_id
    assert run_b.signature.config["moverscore"]["stop_words"] == ["a", "in", "is", "of", "the"]
    frame = scoring_frame("BAGEL", str(data_root), limit=4)
    assert not np.allclose(sa.scores("BAGEL", frame)["moverscore"], sb.scores("BAGEL", frame)["moverscore"])
    bad = _opts(
        tiny_encoder, data_dir=str(data_root), benchmarks=("BAGEL",), moverscore_stopwords=str(tmp_path / "x")
    )
    with pytest.raises(InputError, match="--moverscore-stopwords .*no such file"):
        run_suite(bad, store)


def test_moverscore_idf_documents_are_counted_as_bartscore_counts_them(tmp_path, data_root, tiny_encoder):
    """moverscore's get_idf_dict over BARTScore's lists (SUM/score.py 112-126): each document's references once per
    document, every system's output (a repeated text counted each time); BERTScore's IDF keeps distinct texts."""
    from dlmeval.protocols.diffscore.meta_eval import Suite, scoring_frame

    opts = _opts(
        tiny_encoder, data_dir=str(data_root), benchmarks=("SummEval",), limit=17
    )  # 2 whole documents
    fam = Suite(opts, RunStore(tmp_path / "s.sqlite")).family("embedding")
    refs, hyps = fam._mover_idf_texts("SummEval")
    frame = scoring_frame("SummEval", str(data_root), limit=17)
    assert len(refs) == 22 and len(hyps) == len(frame) == 32  # 2 documents x 11 references; 2 x 16 outputs
    assert hyps == list(frame["candidate_raw"])  # --text-form bartscore: the tokenized text
    distinct_refs, distinct_hyps = fam._idf_texts("SummEval")
    assert len(distinct_refs) == len(set(refs)) and len(distinct_hyps) == len(set(hyps))


def test_transport_by_pot_equals_the_former_lp_solver():
    """POT's exact EMD gives the values the former scipy linprog solver recorded (tests/fixtures/transport_linprog.json
    says how), to the last bits of a float64."""
    import json
    from pathlib import Path

    import numpy as np

    from dlmeval.baselines.embedding import transport_cost

    fx = json.loads((Path(__file__).parents[1] / "fixtures" / "transport_linprog.json").read_text())
    assert len(fx["cases"]) == 8
    for c in fx["cases"]:
        got = transport_cost(
            np.array(c["cost"]), c["wa"] and np.array(c["wa"]), c["wb"] and np.array(c["wb"])
        )
        assert got == pytest.approx(c["value"], rel=1e-12, abs=1e-14)
