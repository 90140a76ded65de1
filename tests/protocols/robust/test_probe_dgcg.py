"""The D-GCG / GCG probe evaluates the attack on the optimised token ids themselves (both roles; the AR model
generates and scores from ids, nothing is re-encoded), and its report section is shown for a real run."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dlmeval.errors import InputError
from dlmeval.protocols import robust as rb
from dlmeval.store import RunStore


@pytest.fixture(scope="module")
def models():
    from dlmeval.models import tiny_model

    return {"tiny-bert": tiny_model("bert", seed=0), "tiny-causal": tiny_model("causal", seed=0)}


def _spec(**over):
    raw = {
        "name": "atk",
        "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
        "conditions": {"keys": ["char.keyboard@0.20"]},
        "tasks": {"triviaqa": {"n": 3, "modes": ["generation"], "gen_tokens": 4}},
        "dgcg": {"task": "triviaqa", "n": 3, "suffix_lengths": [2], "steps": 2, "top_k": 4, "search_width": 4,
                 "eval_samples": 1},
        "calibration": {"plots": False},
        "stats": {"bootstrap_resamples": 100},
    }  # fmt: skip
    raw.update(over)
    return rb.parse_spec(raw)


def _ar(spec, model):
    from dlmeval.protocols.robust.evaluate import ModelEntry
    from dlmeval.protocols.robust.responders import ARResponder

    return ARResponder(spec, ModelEntry("ar", "tiny-causal", "tiny-causal"), model)


def _non_round_trip(model, base: list[int]) -> list[int]:
    """The first (in enumeration order) base + 3 tokens whose decoded text re-encodes to other ids."""
    for extra in itertools.product(range(5, len(model.tokenizer)), repeat=3):
        ids = base + list(extra)
        if model.encode(model.decode(ids)) != ids:
            return ids
    raise AssertionError("every sequence round-trips")


def test_ar_generates_and_scores_from_token_ids(models):
    from dlmeval.tasks import TRIVIAQA

    c = models["tiny-causal"]
    spec = _spec()
    resp = _ar(spec, c)
    ids = _non_round_trip(c, c.encode("the cat sat"))
    text = c.decode(ids)
    by_ids = resp.generate(TRIVIAQA, [ids], ["q"], 5)
    by_text = resp.generate(TRIVIAQA, [text], ["q"], 5)
    assert by_ids.prompt_ids == [ids]  # exactly the ids given
    assert by_text.prompt_ids == [c.encode(text)] and by_text.prompt_ids != [
        ids
    ]  # the re-encoded text differs
    # the confidence of the ids path, by hand: the generated tokens after exactly these ids, rescored
    g = c.generate_scored([ids], max_new_tokens=4, stop=TRIVIAQA.stop, seed=5, item_ids=["q"])[0]
    assert by_ids.outputs[0] == g.text
    tp = by_ids.probs[0]
    if tp.n_tokens:
        (chosen, mx), = c.tail_logprobs([ids + g.token_ids[: tp.n_tokens]], [len(ids)])  # fmt: skip
        np.testing.assert_allclose(tp.chosen, chosen, atol=1e-5)
        np.testing.assert_allclose(tp.max, mx, atol=1e-5)
        assert c.decode(g.token_ids[: tp.n_tokens]).startswith(by_ids.outputs[0].rstrip())
    else:  # an empty answer is scored by the EOS after the prompt
        (chosen, _), = c.tail_logprobs([ids + [c.eos_token_ids[0]]], [len(ids)])  # fmt: skip
        np.testing.assert_allclose(tp.chosen, chosen, atol=1e-5)
    with pytest.raises(InputError, match="one kind of prompt"):
        resp.generate(TRIVIAQA, [ids, text], ["a", "b"], 5)


def test_ar_ids_path_cuts_at_the_stop_string_like_the_text_path(models):
    """When the ids are what the text encodes to, generating from ids or from the text judges the same answer,
    and the ids path scores the shortest prefix of its own tokens covering the cut answer."""
    from dlmeval.protocols.robust.responders import judged_tokens
    from dlmeval.tasks import TRIVIAQA

    c = models["tiny-causal"]
    spec = _spec(tasks={"triviaqa": {"n": 3, "gen_tokens": 8}})
    resp = _ar(spec, c)
    prompts = ["the king of the", "a small river", "the old house is"]
    plain = resp.generate(TRIVIAQA, prompts, ["a", "b", "c"], 1)
    words = [o.split() for o in plain.outputs]
    row = next(i for i, w in enumerate(words) if len(w) >= 2)

    class Stopping(type(TRIVIAQA)):
        name = "triviaqa"

    t = Stopping()
    t.stop = (" " + words[row][1],)
    ids = [c.encode(p) for p in prompts]
    by_text = resp.generate(t, prompts, ["a", "b", "c"], 1)
    by_ids = resp.generate(t, ids, ["a", "b", "c"], 1)
    assert by_ids.outputs == by_text.outputs and by_ids.prompt_ids == ids
    g = c.generate_scored([ids[row]], max_new_tokens=8, stop=t.stop, seed=1, item_ids=["abc"[row]])[0]
    full = c.decode(g.token_ids)
    k = judged_tokens(c.decode, g.token_ids, full, by_ids.outputs[row])
    assert by_ids.probs[row].n_tokens == k < len(g.token_ids)
    np.testing.assert_allclose(by_ids.probs[row].chosen, g.chosen[:k])


@pytest.fixture(scope="module")
def attacked(tmp_path_factory, models):
    db = tmp_path_factory.mktemp("atk") / "a.sqlite"
    spec = _spec()
    with RunStore(db) as store:
        res = rb.run_robust(spec, store, progress=False, models=models)
        recs = {lab: store.get_run(rid).results() for lab, rid in res.model_runs.items()}
    return {"spec": spec, "res": res, "recs": recs, "db": db}


def test_dgcg_attack_is_evaluated_on_the_optimised_ids(attacked, models):
    from dlmeval.protocols.robust.evaluate import ModelEntry, generation_seed
    from dlmeval.protocols.robust.responders import DLMResponder
    from dlmeval.robustness.dgcg import attack_item

    spec = attacked["spec"]
    task = spec.task_or_default("triviaqa").task()
    items = task.items(limit=3)
    for label, resp in (
        ("tiny-causal", _ar(spec, models["tiny-causal"])),
        ("tiny-bert", DLMResponder(spec, ModelEntry("dlm", "tiny-bert", "tiny-bert", spec.dlm), models["tiny-bert"])),
    ):  # fmt: skip
        ev = "ids/" if label == "tiny-causal" else ""
        att = {
            k: v
            for k, v in attacked["recs"][label].items()
            if k.startswith("dgcg/") and f"]/{ev}triviaqa/" in k
        }
        assert len(att) == 3 and all(r["ids_match"] is True for r in att.values())
        for it in items:
            r = next(v for v in att.values() if v["item_id"] == it.item_id)
            msg = task.user_message(it)
            a = attack_item(
                resp.model, msg.text, task.attack_target(it, chat=resp.chat), it.item_id, wrap=resp.wrap
            )
            optimised = [*a.before, *r["suffix_ids"], *a.after]
            ans = resp.generate(
                task, [optimised], [it.item_id], generation_seed(spec, task.name, "clean", None)
            )
            assert ans.prompt_ids[0] == optimised  # the evaluated prompt is the optimised ids, exactly
            assert ans.outputs[0] == r["output"]
            assert ans.probs[0].confidences() == pytest.approx(r["confidence"], nan_ok=True)
    t = attacked["res"].tables["dgcg"]
    assert (t["ids_match_rate"] == 1.0).all()


def test_dgcg_report_section_is_shown_for_a_real_run(attacked):
    from dlmeval.report.registry import Context, renderers
    from dlmeval.report.sections_robustness import trajectories

    with RunStore(attacked["db"], must_exist=True) as store:
        run = store.get_run(attacked["res"].spec_run)
        df = run.get_table("dgcg")
        assert isinstance(df["loss_trajectory"].iloc[0], str)  # the protocol's text form
        r = next(r for r in renderers(run.signature.kind) if r.key == "robust/dgcg")
        assert not r.missing_columns(df)
        sec = r.fn(Context(run, "dgcg", df))
    assert len([b for b in sec.blocks if hasattr(b, "figure")]) == 1
    long = trajectories(df)
    # one trajectory per (model, suffix length) although the AR model has a row per transfer source
    assert set(long["model"]) == set(df["model"]) and len(long) == df["model"].nunique() * 2
    for model, g in long.groupby("model"):
        want = [float(x) for x in df.loc[df["model"] == model, "loss_trajectory"].iloc[0].split()]
        assert g.sort_values("step")["loss"].tolist() == want
