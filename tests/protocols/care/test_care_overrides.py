"""Per-model sampler settings in a Care spec (``[models."<spec>"]``): read and checked at load, applied to that
model's cells, part of its run signature, and read by ``care --plan`` with each family's own schedule (#21)."""

from __future__ import annotations

import json

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import InputError
from dlmeval.models import tiny_model
from dlmeval.protocols.care import plan_cells, resolve
from dlmeval.protocols.care.cells import effective_cell, sampler_config
from dlmeval.protocols.care.prompts import PromptItem
from dlmeval.protocols.care.run import sweep_units
from dlmeval.protocols.care.spec import load_spec
from dlmeval.sampling import RemaskingSampler

BASE = """
name = "ov"
preset = "tiny"
[models]
diffusion = ["tiny-llada", "tiny-dream"]
evaluator = "tiny-causal"
{override}
[generation]
n_prompts = 4
batch_size = 4
[sweep]
strategies = ["none", "high_entropy"]
steps = [16, 32]
temperatures = [0.25]
seeds = [1]
"""
DREAM = """[models."tiny-dream"]
strategies = { none = "entropy" }
top_p = 0.95
top_k = 20
alg_temp = 0.0
temperature = 0.2
"""


def _spec(tmp_path, override: str = DREAM, name: str = "ov.toml"):
    p = tmp_path / name
    p.write_text(BASE.format(override=override))
    return load_spec(p)


def test_an_override_is_read_resolved_and_applied_to_that_model_only(tmp_path):
    spec = _spec(tmp_path)
    ov = spec.override("tiny-dream")
    assert (ov.strategy("none"), ov.top_p, ov.top_k, ov.temperature) == ("entropy", 0.95, 20, 0.2)
    none16 = next(c for c in plan_cells(spec) if c.key.startswith("webtext|none|s16|"))
    assert effective_cell(spec, none16, "tiny-llada") == none16
    cfg = sampler_config(spec, none16, model="tiny-dream")
    assert (cfg.strategy, cfg.temperature, cfg.top_p, cfg.top_k, cfg.position_temperature) == (
        "entropy",
        0.2,
        0.95,
        20,
        0.0,
    )
    plain = sampler_config(spec, none16, model="tiny-llada")
    assert (plain.strategy, plain.temperature, plain.top_p, plain.top_k) == ("none", 0.25, 1.0, None)
    # a re-masking cell keeps its strategy but takes the model's sampling settings
    he = next(c for c in plan_cells(spec) if c.strategy == "high_entropy")
    assert sampler_config(spec, he, model="tiny-dream").strategy == "high_entropy"
    assert sampler_config(spec, he, model="tiny-dream").top_k == 20


def test_a_native_sampler_name_resolves_through_the_models_family(tmp_path):
    spec = _spec(tmp_path, '[models."tiny-dream"]\nstrategies = { none = "maskgit_plus" }\n')
    assert spec.override("tiny-dream").strategy("none") == "maskgit"


@pytest.mark.parametrize(
    "table, message",
    [
        ('[models."tiny-nothing"]\ntop_k = 5\n', "not in models.diffusion"),
        (
            '[models."tiny-dream"]\nstrategies = { none = "high_entropy" }\n',
            "replace a strategy by one of its kind",
        ),
        ('[models."tiny-dream"]\nstrategies = { random = "origin" }\n', "does not sample"),
        ('[models."tiny-dream"]\nstrategies = { none = "greedy" }\n', "native sampler of dream"),
        ('[models."tiny-dream"]\ntop_k = 0\n', "top_k"),
        ('[models."tiny-dream"]\ntop_p = 1.5\n', "top_p"),
        ('[models."tiny-dream"]\nschedule = "cosine"\n', "schedule"),
        ('[models."tiny-dream"]\nsteps_please = 3\n', "unknown key"),
    ],
)
def test_a_bad_override_is_refused_at_load_naming_the_table(tmp_path, table, message):
    with pytest.raises(InputError, match=message):
        _spec(tmp_path, table)


def test_the_override_is_part_of_that_models_signature_only(tmp_path):
    with_ov, without = _spec(tmp_path), _spec(tmp_path, "", name="plain.toml")
    assert "override" not in without.config("tiny-dream") and "overrides" not in without.config()
    assert with_ov.config("tiny-dream") != without.config("tiny-dream")
    assert with_ov.config("tiny-dream")["override"]["strategies"] == {"none": "entropy"}
    assert with_ov.config("tiny-llada") == without.config("tiny-llada")
    assert with_ov.config() != without.config()


def test_the_cells_of_an_overridden_model_sample_as_its_override_says(tmp_path, monkeypatch):
    import dlmeval.sampling as sampling
    from dlmeval.protocols.care.prompts import continuation_text

    built = []

    class Spy(RemaskingSampler):
        def __init__(self, model, config=None, **kw):
            built.append(config)
            super().__init__(model, config, **kw)

    monkeypatch.setattr(sampling, "RemaskingSampler", Spy)

    spec = _spec(tmp_path)
    dream = tiny_model("dream")
    items = [PromptItem(f"webtext/{i}", dream.encode(t), t) for i, t in enumerate(["the cat", "one two"])]
    name = "webtext|none|s16|t0.25|f0.15|seed1"
    cell = next(c for c in plan_cells(spec) if c.key == name)

    def texts(model_spec):
        units = {
            u.name: u
            for u in sweep_units(
                resolve(spec), "tiny-dream", dream, {"webtext": items}, None, model_spec=model_spec
            )
        }
        return [r["text"] for r in units[name].generate(items, lambda m: None)]

    def direct(cfg):
        res = RemaskingSampler(dream, cfg).sample([p.ids for p in items], item_ids=[p.item_id for p in items])
        return [
            continuation_text(dream, p.ids, r["token_ids"], r["text"]) for p, r in zip(items, res.records())
        ]

    cfg = sampler_config(spec, cell, model="tiny-dream")
    assert (cfg.strategy, cfg.top_k) == ("entropy", 20)
    assert texts("tiny-dream") == direct(cfg)
    assert built[0] == cfg  # the unit's sampler runs the override's settings
    built.clear()
    assert texts(None) == direct(sampler_config(spec, cell))  # without the model's name: the spec's settings
    assert built[0] == sampler_config(spec, cell) and built[0].strategy == "none" and built[0].top_k is None


def test_plan_reports_each_models_nfe_from_its_own_schedule(tmp_path, capsys):
    spec_path = tmp_path / "plan.toml"
    spec_path.write_text(BASE.format(override="").replace("steps = [16, 32]", "steps = [16, 32]"))
    assert main(["--json", "care", str(spec_path), "--plan"]) == 0
    rows = json.loads(capsys.readouterr().out)["cells"]
    nfe = {(r["model"], r["cell"].split("|")[1], r["steps"]): r["nfe_per_sample"] for r in rows}
    # 16 generated tokens: LLaDA's none at 32 steps decodes in 16 passes; Dream's loop spends one per step
    assert nfe[("tiny-llada", "none", 32)] == 16 and nfe[("tiny-dream", "none", 32)] == 32
    assert nfe[("tiny-llada", "high_entropy", 32)] == nfe[("tiny-dream", "high_entropy", 32)]
    same = {(r["model"], r["cell"]): r["same_as"] for r in rows}
    assert same[("tiny-llada", "webtext|none|s32|t0.25|f0.15|seed1")] == "webtext|none|s16|t0.25|f0.15|seed1"
    assert same[("tiny-dream", "webtext|none|s32|t0.25|f0.15|seed1")] is None
