"""AlignScore (nli_sp) over a tiny random RoBERTa + alignment head, checked by hand."""

import pytest
import torch

from dlmeval.store import RunStore


class Payload:
    """An arbitrary object in a checkpoint: the restricted load must refuse it."""


@pytest.fixture(scope="module")
def align(tmp_path_factory):
    """(checkpoint file, base directory, the encoder and head the checkpoint holds)."""
    from transformers import RobertaConfig, RobertaModel

    from dlmeval.models.tiny import tiny_tokenizer, tiny_vocab_size

    d = tmp_path_factory.mktemp("tiny-align")
    base = d / "base"
    tok = tiny_tokenizer("bert")
    tok.save_pretrained(str(base))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cfg = RobertaConfig(
            vocab_size=tiny_vocab_size(),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=130,
            pad_token_id=0,
        )
        cfg.save_pretrained(str(base))
        enc = RobertaModel(cfg).eval()
        head = torch.nn.Linear(16, 3)
        torch.nn.init.normal_(head.weight, std=2.0)
    sd = {f"base_model.{k}": v for k, v in enc.state_dict().items()}
    sd.update({"tri_layer.weight": head.weight.data, "tri_layer.bias": head.bias.data})
    sd["bin_layer.weight"] = torch.zeros(2, 16)  # the other heads ride along, unused
    ckpt = d / "tiny.ckpt"
    torch.save({"state_dict": sd, "epoch": 3}, str(ckpt))
    return str(ckpt), str(base), enc, head, tok


def _p_aligned(align, premise, hypo):
    _, _, enc, head, tok = align
    x = tok(premise, hypo, return_tensors="pt")
    with torch.no_grad():
        pooled = enc(input_ids=x["input_ids"], attention_mask=x["attention_mask"]).pooler_output
    return float(torch.softmax(head(pooled), -1)[0, 0])


def test_chunks_follow_alignscore():
    from dlmeval.baselines.alignscore import chunk_context

    sents = [" ".join(["word"] * 80) + "." for _ in range(10)]
    ctx = " ".join(sents)  # 800 words: 800 // 350 + 1 = 3 chunks of max(10 // 3, 1) = 3 sentences
    chunks = chunk_context(ctx, sents)
    assert [c.count(".") for c in chunks] == [3, 3, 3, 1]
    assert chunk_context("a b.", ["a b."]) == ["a b."]


def test_score_is_mean_over_claim_sentences_of_max_over_chunks(align):
    from dlmeval.baselines.alignscore import AlignScorer

    ckpt, base, *_ = align
    sc = AlignScorer(ckpt, base, device="cpu", batch_size=3)
    ctx = "the cat sat on the mat. the dog ran to the house."
    claim = "the cat sat. a dog ran."
    (got,) = sc.score([ctx], [claim])
    # a short context is one chunk; the claim has two sentences
    want = (_p_aligned(align, ctx, "the cat sat.") + _p_aligned(align, ctx, "a dog ran.")) / 2
    assert got == pytest.approx(want, abs=1e-6)
    assert 0 < got < 1


def test_checkpoint_with_objects_is_refused(tmp_path, align):
    from dlmeval.baselines.alignscore import read_state_dict
    from dlmeval.errors import InputError

    bad = tmp_path / "bad.ckpt"
    torch.save({"state_dict": {}, "hparams": Payload()}, str(bad))
    with pytest.raises(InputError, match="weights_only"):
        read_state_dict(bad)
    assert "tri_layer.weight" in read_state_dict(align[0])


def test_family_in_the_suite(tmp_path, data_root, align):
    from dlmeval.errors import ModelNotFoundError
    from dlmeval.protocols.diffscore.meta_eval import (
        Suite,
        SuiteInputs,
        SuiteOptions,
        run_suite,
        scoring_frame,
    )

    ckpt, base, *_ = align
    kw = dict(families=("alignscore",), limit=2, bootstrap=0, progress=False, data_dir=str(data_root))
    opts = SuiteOptions(benchmarks=("QAGS_XSUM", "BAGEL"), alignscore_model=ckpt, alignscore_base=base, **kw)
    store = RunStore(tmp_path / "s.sqlite")
    run_suite(opts, store)
    frame = scoring_frame("BAGEL", str(data_root), limit=2)
    got = Suite(opts, store).scores("BAGEL", frame)["alignscore"]
    from dlmeval.baselines.alignscore import AlignScorer

    sc = AlignScorer(ckpt, base, device="cpu")
    r = frame.iloc[0]
    assert got[0] == pytest.approx(
        max(sc.score(list(r["targets"]), [r["candidate"]] * len(r["targets"]))), abs=1e-6
    )
    with pytest.raises(ModelNotFoundError, match="--alignscore-model"):
        SuiteInputs(SuiteOptions(benchmarks=("BAGEL",), **kw)).prepare()
