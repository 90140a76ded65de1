"""The robustness package beyond the end-to-end run: the paper's recipe field by field, record keys that change
with the data and every attack setting, D-GCG transfer for every DLM whatever the pair order, judged span =
scored span, a toy task added from a test, the generic spec reader and the CLI model overrides."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import pytest

from dlmeval.errors import InputError
from dlmeval.protocols import robust as rb
from dlmeval.store import RunStore

ITEMS = [
    ("Question: which city is the capital of france?", ["paris", "london", "river", "house"], 0),
    ("Question: what does a cat eat?", ["car", "food", "book", "king"], 1),
    ("Question: who wrote the book?", ["the river", "the night", "a woman", "the water"], 2),
]


def write_arc(path, items=ITEMS):
    path.write_text("\n".join(json.dumps({"query": q, "choices": c, "gold": g}) for q, c, g in items) + "\n")
    return path


@pytest.fixture(scope="module")
def models():
    from dlmeval.models import tiny_model

    return {"tiny-bert": tiny_model("bert", seed=0), "tiny-causal": tiny_model("causal", seed=0)}


def lik_spec(arc, **over):
    raw = {
        "name": "k",
        "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
        "conditions": {"keys": ["char.keyboard@0.20"]},
        "tasks": {"arc_challenge": {"n": 3, "modes": ["likelihood"], "path": str(arc)}},
        "likelihood": {"n_masks": 1, "n_rates": 1},
        "stats": {"bootstrap_resamples": 100},
        "calibration": {"plots": False},
    }
    raw.update(over)
    return rb.parse_spec(raw)


def run(spec, db, models, **kw):
    with RunStore(db) as store:
        return rb.run_robust(spec, store, progress=False, models=models, **kw)


# ------------------------------------------------------------------------------------------------ the recipe
# The paper's Table 6 and App. E ("DLM Sampler Configurations"), written out: per pair the DLM's decoding and the
# generation budget of every task (max new tokens 128, GSM8K 512, for DLMs and AR models alike), greedy AR.
PAPER_TABLE_6 = {
    "LLaDA-8B vs LLaMA-3-8B": {
        "dlm": "llada:GSAI-ML/LLaDA-8B-Instruct",
        "ar": "causal:meta-llama/Meta-Llama-3-8B-Instruct",
        "steps": 128,  # Diffusion steps T: 128 (LLaDA)
        "block_length": 32,  # LLaDA block length 32
        "strategy": "none",  # low-confidence remasking: unmask the most confident, never re-mask
        "temperature": 0.0,  # Temperature (default) 0 (greedy)
        "top_p": 1.0,
        "eos": "rank_last",  # LLaDA EOS suppression: on (App. B.4 trick: EOS ranked last)
    },
    "Dream-7B vs Qwen2.5-7B": {
        "dlm": "dream:Dream-org/Dream-v0-Instruct-7B",
        "ar": "causal:Qwen/Qwen2.5-7B-Instruct",
        "steps": 512,  # Diffusion steps T: 512 (Dream)
        "block_length": None,  # no blocks
        "strategy": "entropy",  # Dream remasking alg.: entropy
        "temperature": 0.2,  # Dream temperature 0.2
        "top_p": 0.95,  # Dream top-p 0.95
        "eos": "keep",
    },
}
MAX_NEW_TOKENS = {"triviaqa": 128, "gsm8k": 512, "arc_challenge": 128}


def test_robust_paper_recipe_is_table_6_field_by_field():
    from dlmeval.protocols.robust.tables import recipe_table

    spec = rb.load_spec("robust-paper")
    assert [p.name for p in spec.pairs] == list(PAPER_TABLE_6)
    for p in spec.pairs:
        want = PAPER_TABLE_6[p.name]
        assert (p.dlm, p.ar) == (want["dlm"], want["ar"])
        s = spec.sampler_for(p)
        assert s.position_temperature == 0.0  # Dream alg_temp = 0
        for k in ("steps", "block_length", "strategy", "temperature", "top_p"):
            assert getattr(s, k) == want[k], (p.name, k)
        assert s.eos_mode == want["eos"]
    assert spec.ar.temperature == 0.0 and spec.ar.top_p == 1.0
    rec = recipe_table(spec)
    assert len(rec) == 2 * 3 * 2
    for _, r in rec.iterrows():
        want = PAPER_TABLE_6[r["pair"]]
        assert r["max_new_tokens"] == MAX_NEW_TOKENS[r["task"]]
        if r["role"] == "dlm":
            assert r["steps"] == want["steps"] and r["strategy"] == want["strategy"]
            assert r["block_length"] == (want["block_length"] or MAX_NEW_TOKENS[r["task"]])
            assert (r["temperature"], r["top_p"], r["eos"]) == (
                want["temperature"],
                want["top_p"],
                want["eos"],
            )
        else:
            assert r["temperature"] == 0.0 and r["strategy"] == "greedy"
    # the rest of the paper's settings: 32 conditions x 3 seeds, n = 200, 10 ELBO samples, 15 bins, 10k resamples
    assert spec.conditions == rb.PAPER_CONDITIONS and len(set(spec.conditions)) == 32
    assert spec.perturbation_seeds == (0, 1, 2) and {t.n for t in spec.tasks} == {200}
    assert (spec.likelihood.n_masks, spec.calibration.n_bins, spec.stats.bootstrap_resamples) == (
        10,
        15,
        10_000,
    )
    assert spec.task("triviaqa").task().match == "substring"  # App. J
    # IPM (Tables 7 and 10): keyboard at r = 0.15, T_d = 16, l_min = 3, 3 iterations, every tested variant
    ipm = spec.ipm
    assert "char.keyboard@0.15" in ipm.conditions and ipm.n == 200
    o = ipm.kwargs()
    assert (o["steps"], o["min_chars"], o["max_iter"], o["max_distance"]) == (16, 3, 3, 2)
    kinds = {v.split(":")[0] for v in o["variants"]}
    assert kinds == {"topk", "uniform", "threshold", "iterative", "editdist", "hybrid"}
    # D-GCG (App. C): K in {4, 8}, 50 steps, top-k 64, n = 50, TriviaQA; probes: n = 100, 17 layers
    d = spec.dgcg.kwargs()
    assert (d["suffix_lengths"], d["steps"], d["top_k"], spec.dgcg.n, spec.dgcg.task) == (
        [4, 8],
        50,
        64,
        50,
        "triviaqa",
    )
    assert spec.probes.n == 100 and spec.probes.kwargs()["n_layers"] == 17
    # mechanistic routing (Sec. 6.5, Fig. 8): 100 samples, eight log-spaced snapshots down to 0.01 T
    tr = spec.probe("trajectory")
    assert tr.enabled and tr.n == 100 and (tr.kwargs()["snapshots"], tr.kwargs()["low"]) == (8, 0.01)
    assert spec.probe("attention").enabled
    # App. H / Table 12: the question-only ablation, same pairs and recipes, three conditions at r = 0.20
    q = rb.load_spec("robust-question")
    assert q.scope == "question" and q.pairs == spec.pairs and q.dlm == spec.dlm
    assert set(q.conditions) == {"char.transposition@0.20", "char.homoglyph@0.20", "word.deletion@0.20"}


def test_paper_conditions_are_a_frozen_list():
    from dlmeval.robustness import conditions

    want = {(t, r) for t in ("transposition", "deletion", "insertion", "keyboard", "homoglyph")
            for r in (0.05, 0.1, 0.2, 0.3)}  # fmt: skip
    want |= {(t, r) for t in ("deletion", "shuffle", "synonym", "repetition") for r in (0.1, 0.2, 0.3)}
    from dlmeval.robustness import Perturbation

    got = {
        (Perturbation.from_key(k).type_key.split(".")[1], Perturbation.from_key(k).rate)
        for k in rb.PAPER_CONDITIONS
    }
    assert got == want
    # the preset is the list itself, not the registry: today they agree; the preset will not follow it
    assert set(rb.PAPER_CONDITIONS) == {p.key for p in conditions(None, None)}
    assert (
        rb.parse_spec({"tasks": {"arc": {}}, "conditions": {"preset": "paper"}}).conditions
        == rb.PAPER_CONDITIONS
    )


def test_cli_model_overrides_must_say_which_sampler(tmp_path):
    spec = rb.load_spec("robust-paper")
    with pytest.raises(InputError, match="--pair"):
        rb.with_models(spec, dlm="dream:/m")
    with pytest.raises(InputError, match="--dlm-sampler"):
        rb.with_models(spec, dlm="dream:/m", pair="Dream-7B vs Qwen2.5-7B")
    kept = rb.with_models(spec, dlm="dream:/m", pair="Dream-7B vs Qwen2.5-7B", sampler="pair")
    assert kept.sampler_for(kept.pairs[0]).top_p == 0.95 and kept.pairs[0].dlm == "dream:/m"
    own = rb.with_models(
        spec, dlm="llada:/m", pair="Dream-7B vs Qwen2.5-7B", sampler={"steps": 128, "block_length": 32}
    )
    s = own.sampler_for(own.pairs[0])
    assert (s.steps, s.block_length, s.strategy) == (128, 32, "none")  # [dlm] defaults under the given table
    ar_only = rb.with_models(spec, ar="causal:/m", pair="LLaDA-8B vs LLaMA-3-8B")  # the DLM keeps its sampler
    assert ar_only.sampler_for(ar_only.pairs[0]).eos == "rank_last"
    with pytest.raises(InputError, match="block_length"):
        rb.with_models(spec, dlm="llada:/m", pair="Dream-7B vs Qwen2.5-7B", sampler={"block_length": 48})


# ------------------------------------------------------------------------------------------------ record keys
def test_changing_the_data_file_makes_new_records(tmp_path, models):
    arc = write_arc(tmp_path / "arc.jsonl")
    db = tmp_path / "s.sqlite"
    first = run(lik_spec(arc), db, models)
    again = run(lik_spec(arc), db, models)
    assert again.model_runs == first.model_runs  # same data: the same runs, nothing recomputed
    edited = [(q, c, g) for q, c, g in ITEMS]
    edited[1] = ("Question: what does a dog eat?", ITEMS[1][1], 1)  # same ids (positional), other content
    write_arc(arc, edited)
    changed = run(lik_spec(arc), db, models)
    assert set(changed.model_runs.values()).isdisjoint(first.model_runs.values())
    with RunStore(db) as store:
        recs = store.get_run(changed.model_runs["tiny-causal"]).results()
    assert "dog" in recs["arc_challenge/likelihood/clean/s-/arc_challenge/1"]["prompt"]
    # a larger n over the same file keeps the runs (the identity covers the whole file, not the first n)
    arc2 = write_arc(tmp_path / "arc2.jsonl", ITEMS + ITEMS[:1])
    a = rb.parse_spec({**_raw(arc2, 2)})
    b = rb.parse_spec({**_raw(arc2, 4)})
    from dlmeval.protocols.robust.evaluate import Data

    ea, _ = rb.model_entries(a)
    ida, idb = Data().identity(a), Data().identity(b)
    assert a.model_config(ea[0], ida) == b.model_config(ea[0], idb)
    assert ida["arc_challenge"]["n_items"] == 4


def _raw(arc, n):
    return {"tasks": {"arc_challenge": {"n": n, "modes": ["likelihood"], "path": str(arc)}}}


def test_every_gcg_setting_changes_the_record_key():
    from dlmeval.robustness.dgcg import GCGConfig

    base = GCGConfig()
    # eval_batch_size too: which candidates share a forward pass moves a loss's last bits
    changes = {"suffix_length": 4, "steps": 3, "top_k": 8, "search_width": 5, "ascii_only": False,
               "retokenize_filter": False, "eval_samples": 2, "eval_batch_size": 3}  # fmt: skip
    assert set(changes) == {f.name for f in dataclasses.fields(GCGConfig)}
    keys = {base.key}
    for k, v in changes.items():
        keys.add(dataclasses.replace(base, **{k: v}).key)
    assert len(keys) == 1 + len(changes)


def test_sampler_settings_are_keyed_with_what_the_sampler_applies(tmp_path):
    arc = write_arc(tmp_path / "arc.jsonl")
    a = lik_spec(arc)
    b = lik_spec(arc, dlm={"top_p": 0.9})
    c = lik_spec(arc, dlm={"eos": "rank_last"})
    cfg = [s.model_config(rb.model_entries(s)[0][0]) for s in (a, b, c)]
    assert cfg[0] != cfg[1] and cfg[0] != cfg[2]
    from dlmeval.protocols.robust.keys import applied_sampler_fields

    assert cfg[0]["applied"] == applied_sampler_fields()
    with pytest.raises(InputError, match="rank_last"):
        lik_spec(arc, dlm={"eos": "rank_last", "suppress_eos": True})


# ------------------------------------------------------------------------------------------------ D-GCG transfer
def _dgcg_spec(pairs):
    return rb.parse_spec(
        {
            "name": "tr",
            "pairs": pairs,
            "conditions": {"keys": ["char.keyboard@0.20"]},
            "tasks": {"triviaqa": {"n": 2, "modes": ["generation"], "gen_tokens": 2}},
            "dgcg": {"task": "triviaqa", "n": 2, "suffix_lengths": [1], "steps": 1, "top_k": 2, "search_width": 2,
                     "eval_samples": 1},
            "calibration": {"plots": False},
            "stats": {"bootstrap_resamples": 100},
        }
    )  # fmt: skip


def test_dgcg_transfer_for_every_dlm_whatever_the_pair_order(tmp_path, models):
    # two DLM entries (the same tiny model under two samplers) share one AR partner
    p1 = {"dlm": "tiny-bert", "ar": "tiny-causal", "label": "p1"}
    p2 = {"dlm": "tiny-bert", "ar": "tiny-causal", "label": "p2", "sampler": {"temperature": 0.5}}
    fwd = run(_dgcg_spec([p1, p2]), tmp_path / "a.sqlite", models).tables["dgcg"]
    rev = run(_dgcg_spec([p2, p1]), tmp_path / "b.sqlite", models).tables["dgcg"]
    for t in (fwd, rev):
        ar = t[t["role"] == "ar"]
        assert len(ar) == 2  # one transfer row per DLM
        assert set(ar["transfer_from"]) == set(t.loc[t["role"] == "dlm", "model"])
    # the labels follow the order ("tiny-bert" is whichever DLM comes first); compare by sampler
    names = [
        {"tiny-bert": "t0", "tiny-bert@p2": "t0.5"},  # pairs p1, p2
        {"tiny-bert": "t0.5", "tiny-bert@p1": "t0"},  # pairs p2, p1
    ]
    got = []
    for t, lab in zip((fwd, rev), names):
        ar = t[t["role"] == "ar"]
        got.append(sorted(zip(ar["transfer_from"].map(lab), ar["transfer_accuracy"])))
    assert got[0] == got[1] and [s for s, _ in got[0]] == ["t0", "t0.5"]


# ------------------------------------------------------------------------------------------------ spans
def test_judged_span_is_the_scored_span():
    from dlmeval.protocols.robust.responders import judged_tokens

    toks = ["Paris", " is", " it", "\nQuestion", ":", " next"]

    def decode(ids):
        return "".join(toks[i] for i in ids)

    ids = list(range(len(toks)))
    text = decode(ids)
    from dlmeval.protocols.common import cut_at

    cut = cut_at(text, ("\nQuestion:",))
    assert cut == "Paris is it"
    assert judged_tokens(decode, ids, text, cut) == 3  # the three tokens that make the judged text
    assert judged_tokens(decode, ids, text, text) == len(ids)
    assert judged_tokens(decode, ids, text, "") == 0


def test_dlm_confidence_is_scored_on_the_cut_answer(tmp_path, models):
    """A task whose stop string the tiny DLM produces: the confidence covers exactly the tokens of the cut text."""
    from dlmeval.protocols.robust.evaluate import ModelEntry
    from dlmeval.protocols.robust.responders import DLMResponder
    from dlmeval.tasks import TRIVIAQA

    model = models["tiny-bert"]
    spec = rb.parse_spec({"tasks": {"triviaqa": {"n": 1, "gen_tokens": 6}}, "dlm": {"temperature": 1.0}})
    resp = DLMResponder(spec, ModelEntry("dlm", "tiny-bert", "tiny-bert", spec.dlm), model)
    prompts = ["the city of paris is", "a cat and a dog", "the king of the river"]
    plain = resp.generate(TRIVIAQA, prompts, ["a", "b", "c"], 3)
    # pick a stop string from the middle of a generated answer, so that the cut happens
    words = [o.split() for o in plain.outputs]
    row = next(i for i, w in enumerate(words) if len(w) >= 2)
    stop = " " + words[row][1]

    class Stopping(type(TRIVIAQA)):
        name = "triviaqa"

    t = Stopping()
    t.stop = (stop,)
    cut = resp.generate(t, prompts, ["a", "b", "c"], 3)
    assert cut.outputs[row] == plain.outputs[row][: plain.outputs[row].find(stop)]
    assert cut.extra[row]["cut_at_stop"]
    n = cut.probs[row].n_tokens
    assert 0 < n < plain.probs[row].n_tokens
    assert cut.probs[row].max.size == n and cut.probs[row].chosen.size == n


# ------------------------------------------------------------------------------------------------ a toy task
def test_a_toy_task_needs_only_its_class_and_registration(tmp_path, models):
    from dlmeval.tasks import TASKS, Prompt, Task, fill, register_task

    @dataclass(frozen=True)
    class Item:
        item_id: str
        word: str

    class Echo(Task):
        name = "echo_toy"
        template = "Repeat the word: {question}\nAnswer:"
        chance = 0.0
        max_new_tokens = 3

        def load(self, data_dir=None, *, path=None):
            return [Item(f"echo_toy/{i}", w) for i, w in enumerate(["paris", "house", "river"])]

        def prompt(self, item) -> Prompt:
            return fill(self.template, question=item.word)

        def extract(self, output, item=None):
            return output.strip()

        def gold(self, item):
            return item.word

        def is_correct(self, item, output):
            return item.word in output

        def attack_target(self, item, *, chat):
            return self._spaced(item.word, chat)

    register_task(Echo())
    try:
        spec = rb.parse_spec(
            {
                "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
                "conditions": {"keys": ["char.keyboard@0.20"]},
                "tasks": {"echo_toy": {"n": 3}},
                "dgcg": {"task": "echo_toy", "n": 1, "suffix_lengths": [1], "steps": 1, "top_k": 2,
                         "search_width": 2, "eval_samples": 1},
                "calibration": {"plots": False},
                "stats": {"bootstrap_resamples": 100},
            }
        )  # fmt: skip
        res = run(spec, tmp_path / "t.sqlite", models)
        acc = res.tables["accuracy"]
        assert set(acc["task"]) == {"echo_toy"} and len(acc) == 2 * 2
        assert set(res.tables["dgcg"]["task"]) == {"echo_toy"}
        with pytest.raises(InputError, match="multiple-choice"):
            rb.parse_spec({"tasks": {"echo_toy": {"modes": ["likelihood"]}}})
    finally:
        TASKS.pop("echo_toy", None)


# ------------------------------------------------------------------------------------------------ spec reader
def test_generic_reader_validates_from_field_metadata():
    from dlmeval.protocols.spec_io import read_dataclass

    s = read_dataclass(rb.SamplerSpec, {"block_length": 0, "temperature": 0.2}, "dlm")
    assert s.block_length is None and s.temperature == 0.2 and s.strategy == rb.SamplerSpec().strategy
    with pytest.raises(InputError, match=r"dlm\.top_p"):
        read_dataclass(rb.SamplerSpec, {"top_p": 1.5}, "dlm")
    with pytest.raises(InputError, match=r"unknown key\(s\) dlm\.colour"):
        read_dataclass(rb.SamplerSpec, {"colour": 1}, "dlm")
    with pytest.raises(InputError, match="eos"):
        read_dataclass(rb.SamplerSpec, {"eos": "never"}, "dlm")
    base = rb.SamplerSpec(temperature=0.3)
    assert read_dataclass(rb.SamplerSpec, {"steps": 4}, "p", base=base).temperature == 0.3
    with pytest.raises(InputError, match="match"):
        rb.parse_spec({"tasks": {"triviaqa": {"match": "fuzzy"}}})
    assert rb.parse_spec({"tasks": {"triviaqa": {"match": "word"}}}).task("triviaqa").task().match == "word"


# ------------------------------------------------------------------------------------------------ mechanism
def test_trajectory_and_attention_outputs_by_hand(tmp_path, models):
    import numpy as np
    import torch

    from dlmeval.protocols.robust.evaluate import generation_seed, perturbation
    from dlmeval.robustness.probes import eager_attention, record_trajectory, snapshot_steps, token_labels
    from dlmeval.sampling import RemaskingSampler
    from dlmeval.tasks import TRIVIAQA

    cond = "char.keyboard@0.30"
    spec = rb.parse_spec(
        {
            "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
            "conditions": {"keys": ["char.keyboard@0.20"]},
            "tasks": {"triviaqa": {"n": 2, "gen_tokens": 8}},
            "trajectory": {"task": "triviaqa", "n": 2, "conditions": [cond], "snapshots": 4},
            "attention": {"task": "triviaqa", "n": 2, "conditions": [cond]},
            "calibration": {"plots": False},
            "stats": {"bootstrap_resamples": 100},
        }
    )
    res = run(spec, tmp_path / "m.sqlite", models)
    tr, at = res.tables["trajectory"].iloc[0], res.tables["attention"].iloc[0]
    assert (tr["model"], at["model"]) == ("tiny-bert", "tiny-causal") and tr["n"] == at["n"] == 2
    items = TRIVIAQA.items(limit=2)
    pert = perturbation(cond)
    # trajectory, by hand: both prompts sampled with the run's sampler and seed, compared at 4 log-spaced steps
    from dlmeval.protocols.robust.evaluate import ModelEntry
    from dlmeval.protocols.robust.responders import DLMResponder

    resp = DLMResponder(spec, ModelEntry("dlm", "tiny-bert", "tiny-bert", spec.dlm), models["tiny-bert"])
    cfg = resp.sampler_config("triviaqa", generation_seed(spec, "triviaqa", cond, 0))
    div, drop = [], []
    for it in items:
        s = RemaskingSampler(models["tiny-bert"], cfg)
        _, tc = record_trajectory(s, TRIVIAQA.user_message(it).text, it.item_id)
        _, tn = record_trajectory(s, TRIVIAQA.user_message(it, pert, seed=0).text, it.item_id)
        steps = snapshot_steps(8, 4, 0.01)
        div.append(float(np.mean(tc.ids[steps] != tn.ids[steps])))
        drop.append(float(np.nanmean(tc.confidence[steps] - tn.confidence[steps])))
    assert tr["id_divergence"] == pytest.approx(np.mean(div))
    assert tr["confidence_drop"] == pytest.approx(np.mean(drop), abs=1e-12)
    assert tr["snapshot_steps"] == " ".join(str(x) for x in snapshot_steps(8, 4, 0.01))
    # attention, by hand: eager attention weights of the causal model on the corrupted tokens, over the share
    # of corrupted keys each query sees
    ar = models["tiny-causal"]
    ratios = []
    for it in items:
        m = TRIVIAQA.user_message(it, pert, seed=0)
        tl = token_labels(ar, m.text, m.perturbation.edits)
        ids, attn = ar.pad([tl.ids])
        with eager_attention(ar), torch.no_grad():
            out = ar.forward(ids, attn, output_attentions=True)
        c = torch.as_tensor(tl.labels == 1)
        n = len(tl.ids)
        vis = torch.ones(n, n, dtype=torch.bool).tril()
        elig = (vis & c).sum(1) > 0
        per_layer = []
        for layer in out.attentions:
            a = layer[0, :, -n:, -n:].double()
            mass = (a * c.double()).sum(-1)[:, elig].mean()
            base = ((vis & c).sum(1).double() / vis.sum(1).double())[elig].mean()
            per_layer.append(float(mass / base))
        ratios.append(per_layer)
    want = np.mean(np.array(ratios), axis=0)
    assert [float(x) for x in at["ratio_by_layer"].split()] == pytest.approx(want.round(3).tolist(), abs=1e-3)
    assert at["mean_ratio"] == pytest.approx(float(want.mean()), rel=1e-6)


# ------------------------------------------------------------------------------------------------ figures
def test_figures_are_drawn_from_the_tables(tmp_path):
    from dlmeval.protocols.robust.figures import draw_figures

    conds = ["char.keyboard@0.10", "char.keyboard@0.20", "word.deletion@0.10"]
    spec = rb.parse_spec(
        {
            "tasks": {"arc_challenge": {"n": 20, "modes": ["likelihood"]}},
            "conditions": {"keys": conds},
            "pairs": [{"dlm": "d", "ar": "a"}],
            "stats": {"bootstrap_resamples": 200},
        }
    )
    recs = []
    for model, role, ks in (("d", "dlm", [18, 17, 15, 16]), ("a", "ar", [17, 16, 10, 14])):
        for cond, k in zip(["clean", *conds], ks):
            for i in range(20):
                recs.append({"task": "arc_challenge", "mode": "likelihood", "model": model, "role": role,
                             "condition": cond, "item_id": f"arc_challenge/{i}", "seed": None if cond == "clean" else 0,
                             "correct": i < k, "confidence": {"choice/softmax": 0.6 + 0.01 * (i % 5)}})  # fmt: skip
    t = rb.all_tables(recs, spec, {"d vs a": ("d", "a")})
    files = {p.name for p in draw_figures(t, tmp_path)}
    assert {"rdi_advantage.png", "accuracy_vs_rate_arc_challenge.png", "rdi_heatmap_arc_challenge.png",
            "clean_accuracy_ece.png", "ece_auroc_vs_rate_arc_challenge.png", "pair_summary_1.png"} <= files  # fmt: skip
    assert not {"dgcg_arc_challenge.png", "mechanism.png", "ipm_variants.png"} & files  # no such tables
    assert all((tmp_path / f).stat().st_size > 1000 for f in files)
    m = t["calibration_ablation_mean"]
    assert m.empty  # likelihood only: the ablation covers generations
