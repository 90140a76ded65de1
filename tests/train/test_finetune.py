"""DiffScore-FT training (``dlmeval train``): the training rows are the scoring rows, adapters load with
``--adapter`` and change scores, training is deterministic under a seed, bad inputs are refused."""

from __future__ import annotations

import json

import pytest
import torch

from dlmeval.cli.main import main
from dlmeval.errors import DataFormatError, InputError, ModelNotFoundError
from dlmeval.models import load_diffusion, tiny_model
from dlmeval.models.adapters import adapter_sha256, load_adapter
from dlmeval.scoring import DiffScorer
from dlmeval.train.diffusion import TrainConfig, Trainer, conditional_examples
from dlmeval.train.finetune import FinetuneConfig, finetune, read_pairs

PAIRS = [
    {"source": "the cat sat on the big red house .", "target": "a cat sat ."},
    {"source": "a dog runs to the river and eats food .", "target": "the dog eats food ."},
    {"source": "paris is the capital of france .", "target": "paris is big ."},
    {"source": "the old king wrote a book in the year one .", "target": "the king wrote a book ."},
]
TINY_FT = dict(steps=3, batch_size=2, lr=5e-2, rank=2, alpha=4)


def _rows_seen(model, run):
    """The clean token rows (targets at attended positions) of every ``score_positions`` call made by ``run``."""
    seen: list[tuple[int, ...]] = []
    orig = model.score_positions

    def spy(input_ids, attention_mask, positions, targets=None, **kw):
        for t, a in zip(targets.tolist(), attention_mask.tolist()):
            seen.append(tuple(x for x, keep in zip(t, a) if keep))
        return orig(input_ids, attention_mask, positions, targets, **kw)

    model.score_positions = spy
    try:
        run()
    finally:
        del model.score_positions
    return seen


@pytest.mark.parametrize("chat", [False, True])
def test_training_rows_are_the_scoring_rows_on_the_llada_standin(tmp_path, chat):
    m = tiny_model("llada")
    pairs = PAIRS[:2]
    scorer = DiffScorer(m, n_masks=2, n_rates=2, chat=chat)
    scored = _rows_seen(
        m, lambda: scorer.score([p["target"] for p in pairs], [p["source"] for p in pairs], config="cond")
    )
    rows = conditional_examples(m, pairs, chat=chat)
    cfg = TrainConfig(steps=1, batch_size=2, warmup=1, eval_every=9, checkpoint_every=9, lora=True, lora_r=2)
    tr = Trainer(m, rows, [], cfg, tmp_path, log=lambda s: None)
    trained = _rows_seen(m, tr.train_step)
    assert set(trained) == set(scored) and len(set(scored)) == 2
    # only the target (the scorer's candidate span) is eligible for masking
    for ex, p in zip(rows, pairs):
        lay = scorer.formatter.layout("cond", p["target"], p["source"])
        a, b = lay.candidate
        assert tuple(ex.ids) == lay.ids and ex.eligible == [a <= i < b for i in range(len(ex.ids))]
    if not chat:  # the layout of the issue, written out: BOS, source, separator, target, no trailing EOS
        toks = m.tokenizer.convert_ids_to_tokens(rows[0].ids)
        assert toks == ["<|startoftext|>", *"the cat sat on the big red house .".split(), "<|endoftext|>"] + [
            "a",
            "cat",
            "sat",
            ".",
        ]


def test_max_length_cuts_the_source_as_the_scorer_does():
    m = tiny_model("bert")
    ex = conditional_examples(m, [{"source": "one two three four five six seven", "target": "a dog"}], 7)
    assert m.tokenizer.convert_ids_to_tokens(ex[0].ids) == [
        "[CLS]",
        "one",
        "two",
        "[SEP]",
        "a",
        "dog",
        "[SEP]",
    ]
    assert sum(ex[0].eligible) == 2
    with pytest.raises(InputError, match="empty target"):
        conditional_examples(m, [{"source": "x", "target": "   "}])


def test_a_trained_adapter_loads_with_adapter_and_changes_scores(tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    out = tmp_path / "adapter"
    rc = main(
        ["--no-progress", "train", "--model", "tiny-llada", "--data", str(data), "--out", str(out)]
        + ["--steps", "3", "--batch-size", "2", "--lr", "0.05", "--rank", "2", "--alpha", "4"]
    )
    assert (
        rc == 0 and (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    )
    settings = json.loads((out / "dlmeval_train.json").read_text())
    assert settings["config"]["rank"] == 2 and settings["layout"]["chat"] is True
    assert len(settings["history"]) == 3
    capsys.readouterr()
    store = tmp_path / "runs.sqlite"
    got = {}
    for tag, extra in (("base", []), ("ft", ["--adapter", str(out)])):
        argv = ["--json", "--no-progress", "--store", str(store), "score", "--model", "tiny-llada", *extra]
        argv += [
            "--text",
            "--candidates",
            "a cat sat .",
            "--sources",
            PAIRS[0]["source"],
            "-K",
            "4",
            "-T",
            "2",
        ]
        assert main(argv) == 0
        got[tag] = json.loads(capsys.readouterr().out)
    assert got["base"]["items"][0]["score"] != pytest.approx(got["ft"]["items"][0]["score"], abs=1e-3)
    # adapter runs never reuse base-model records
    assert got["base"]["run_id"] != got["ft"]["run_id"]
    assert got["base"]["signature"] != got["ft"]["signature"]


def test_the_adapter_is_in_the_identity_and_loading_it_is_peft_on_the_base(tmp_path):
    m = tiny_model("llada")
    info = finetune(m, PAIRS, FinetuneConfig(**TINY_FT), tmp_path / "a", progress=False)
    base = load_diffusion("tiny-llada")
    ft = load_diffusion("tiny-llada", adapter=str(tmp_path / "a"))
    ident = ft.identity().as_dict()
    assert ident["adapter"] == {"path": str((tmp_path / "a").resolve()), "sha256": info.sha256}
    assert info.sha256 == adapter_sha256(tmp_path / "a")
    assert "adapter" not in base.identity().as_dict()
    assert ident["weights_sha256"] != base.identity().weights_sha256
    # the loaded model computes what the trained one computes
    ids, attn = ft.pad([ft.encode("the cat sat .")])
    assert torch.allclose(ft.logits(ids, attn), m.logits(ids, attn), atol=1e-5)
    assert not torch.allclose(ft.logits(ids, attn), base.logits(ids, attn), atol=1e-4)
    assert not any(p.requires_grad for p in ft.parameters())


def test_training_is_deterministic_under_a_seed(tmp_path):
    shas = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        m = tiny_model("llada")
        cfg = FinetuneConfig(**TINY_FT, seed=seed)  # dropout 0.05 is on: it is seeded too
        shas.append(finetune(m, PAIRS, cfg, tmp_path / name, progress=False).sha256)
    assert shas[0] == shas[1] and shas[0] != shas[2]
    assert not (tmp_path / "a" / "checkpoint").exists()  # the resume checkpoint is spent


def test_a_lora_run_resumed_after_a_kill_ends_where_an_uninterrupted_one_ends(tmp_path):
    def trainer(d):
        m = tiny_model("bert")
        rows = conditional_examples(m, PAIRS)
        cfg = TrainConfig(steps=4, batch_size=2, lr=5e-2, warmup=1, eval_every=9, checkpoint_every=2)
        cfg = TrainConfig(**{**cfg.__dict__, "lora": True, "lora_r": 2, "lora_dropout": 0.1})
        return m, Trainer(m, rows, [], cfg, d, log=lambda s: None)

    full, tf = trainer(tmp_path / "a")
    tf.fit(progress=False)
    _, tk = trainer(tmp_path / "b")
    tk.fit(progress=False, stop_at=2)  # killed after the step-2 checkpoint
    saved = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    assert saved and all("lora_" in k for k in saved)  # only the adapters are checkpointed
    resumed, tr = trainer(tmp_path / "b")
    tr.fit(progress=False)
    assert tr.step == 4
    for (k, a), (_, b) in zip(full.module.state_dict().items(), resumed.module.state_dict().items()):
        assert torch.equal(a, b), k


def test_read_pairs_formats_and_errors(tmp_path):
    j = tmp_path / "p.jsonl"
    j.write_text('{"source": "s1", "target": "t1", "id": 3}\n\n{"source": "s2", "target": "t2"}\n')
    assert read_pairs(j) == [{"source": "s1", "target": "t1"}, {"source": "s2", "target": "t2"}]
    c = tmp_path / "p.csv"
    c.write_text('source,target\n"a, b",c\n')
    assert read_pairs(c) == [{"source": "a, b", "target": "c"}]
    t = tmp_path / "p.tsv"
    t.write_text("target\tsource\nx\ty\n")
    assert read_pairs(t) == [{"source": "y", "target": "x"}]
    bad = tmp_path / "bad.csv"
    bad.write_text("document,summary\na,b\n")
    with pytest.raises(DataFormatError, match="source, target column"):
        read_pairs(bad)
    e = tmp_path / "e.jsonl"
    e.write_text('{"source": "s", "target": ""}\n')
    with pytest.raises(DataFormatError, match="line 1: empty target"):
        read_pairs(e)
    m = tmp_path / "m.jsonl"
    m.write_text('{"source": "s"}\n')
    with pytest.raises(DataFormatError, match="line 1: needs text fields"):
        read_pairs(m)
    with pytest.raises(InputError, match=r"\.jsonl, \.csv, \.tsv or \.parquet"):
        (tmp_path / "p.txt").write_text("x\n")
        read_pairs(tmp_path / "p.txt")


def test_bad_adapters_and_settings_are_refused(tmp_path):
    with pytest.raises(ModelNotFoundError, match="not a directory"):
        load_diffusion("tiny-bert", adapter=str(tmp_path / "none"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="adapter_config.json, adapter_model.safetensors missing"):
        load_diffusion("tiny-bert", adapter=str(tmp_path / "empty"))
    finetune(tiny_model("bert"), PAIRS, FinetuneConfig(**TINY_FT), tmp_path / "bert", progress=False)
    with pytest.raises(InputError, match="was trained on tiny-bert .* but is being loaded onto tiny-llada"):
        load_adapter(tiny_model("llada"), tmp_path / "bert")
    with pytest.raises(InputError, match=r"does not fit this model \(it was trained on tiny-bert"):
        load_adapter(tiny_model("llada"), tmp_path / "bert", any_base=True)
    with pytest.raises(InputError, match="dropout"):
        FinetuneConfig(dropout=1.0).check()
    with pytest.raises(InputError, match="LoRA target modules"):
        finetune(
            tiny_model("bert"), PAIRS, FinetuneConfig(**TINY_FT, target_modules=("nope",)), tmp_path / "x"
        )


def test_train_help_lists_the_paper_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--rank",
        "--alpha",
        "--dropout",
        "--target-modules",
        "--steps",
        "--batch-size",
        "--grad-accum",
    ):
        assert flag in text
    assert "default 16" in text and "default 32" in text and "default 0.05" in text


def test_meta_eval_loads_the_adapter_onto_its_model(tmp_path):
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, SuiteOptions

    info = finetune(tiny_model("llada"), PAIRS, FinetuneConfig(**TINY_FT), tmp_path / "a", progress=False)
    opts = SuiteOptions(
        dlm="tiny-llada", dlm_adapter=str(tmp_path / "a"), benchmarks=("BAGEL",), progress=False
    )
    m = SuiteInputs(opts).dlm()
    assert m.adapter.sha256 == info.sha256
    assert m.identity().as_dict()["adapter"]["sha256"] == info.sha256
    assert (
        "adapter"
        not in SuiteInputs(SuiteOptions(dlm="tiny-llada", progress=False)).dlm().identity().as_dict()
    )


def test_meta_eval_scores_an_adapter_in_its_training_layout(tmp_path):
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, SuiteOptions

    finetune(tiny_model("llada"), PAIRS, FinetuneConfig(**TINY_FT), tmp_path / "a", progress=False)
    ft = load_diffusion("tiny-llada", adapter=str(tmp_path / "a"))
    layout = ft.adapter.settings["layout"]
    assert layout["chat"] is True  # the stand-in has a chat template: the paper's layout
    suite = SuiteInputs(SuiteOptions(dlm="tiny-llada", progress=False))
    scorer = suite.scorer("SUM", ft, "ft:test", layout={"chat": layout["chat"], "prompt": layout["prompt"]})
    rows = conditional_examples(ft, PAIRS, chat=True)
    for ex, p in zip(rows, PAIRS):
        assert tuple(ex.ids) == scorer.formatter.layout("cond", p["target"], p["source"]).ids
