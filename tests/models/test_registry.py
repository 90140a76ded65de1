"""The model-family registry: one registration per family is all the spec parser, the loaders, `dlmeval models`
and the adapters read (issue 21)."""

from __future__ import annotations

import json

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import InputError
from dlmeval.models import load_causal_lm, load_diffusion, tiny_model
from dlmeval.models.family import FAMILIES, Family, LoadOptions, family_for_spec, family_of, register_family
from dlmeval.models.registry import check_model_spec


def test_every_builtin_family_is_registered_with_its_forms():
    assert {"default", "hf", "llada", "dream", "causal", "default-ar"} <= set(FAMILIES.names())
    assert {f.standin for f in FAMILIES.values() if f.standin} >= {
        "tiny-bert",
        "tiny-llada",
        "tiny-dream",
        "tiny-causal",
    }
    fam, path, standin = family_for_spec("dream:/x/Dream-v0-Base-7B")
    assert (fam.name, path, standin, fam.logit_shift, fam.native_schedule) == (
        "dream",
        "/x/Dream-v0-Base-7B",
        False,
        1,
        "dream",
    )
    assert family_for_spec("tiny-llada")[0].name == "llada" and family_for_spec("tiny-llada")[2]
    assert family_for_spec("default")[0].name == "default"
    assert "GSAI-ML/LLaDA-1.5" in FAMILIES.get("llada").hub_ids
    assert "Dream-org/Dream-Coder-v0-Instruct-7B" in FAMILIES.get("dream").hub_ids
    with pytest.raises(InputError, match=r"unknown model spec 'nope:x'.*llada:PATH"):
        family_for_spec("nope:x")
    with pytest.raises(InputError, match="the stand-ins are tiny-bert"):
        family_for_spec("tiny-nothing")


def test_the_adapters_take_their_facts_from_the_registration():
    dream, llada, bert = tiny_model("dream"), tiny_model("llada"), tiny_model("bert")
    assert family_of(dream) is FAMILIES.get("dream") and family_of(bert) is FAMILIES.get("hf")
    assert (dream.logit_shift, dream.native_schedule, dream.prepend_bos, dream.padding_side) == (
        1,
        "dream",
        True,
        "left",
    )
    assert (llada.logit_shift, llada.native_schedule, llada.prepend_bos, llada.padding_side) == (
        0,
        "linear",
        False,
        "left",
    )
    assert bert.padding_side == "right"


def test_a_duplicate_name_or_spec_form_is_refused():
    llada = FAMILIES.get("llada")
    with pytest.raises(ValueError, match="registered already"):
        register_family(Family(name="llada", kind="diffusion", description="x", load=llada.load, prefix="l2"))
    with pytest.raises(ValueError, match="spec form 'dream' is taken by 'dream'"):
        register_family(
            Family(name="dream2", kind="diffusion", description="x", load=llada.load, prefix="dream")
        )
    with pytest.raises(ValueError, match="attention"):
        Family(name="x", kind="diffusion", description="x", load=llada.load, attention="sideways")
    assert "dream2" not in FAMILIES


def test_a_new_family_is_one_registration(capsys):
    """A toy family (the hf loader under another prefix): loading, kind checks and `dlmeval models` follow."""
    seen = []

    def load(path, opts: LoadOptions):
        seen.append((path, opts.seed))
        return tiny_model("bert", seed=opts.seed)

    fam = register_family(
        Family(
            name="toy",
            kind="diffusion",
            prefix="toy",
            description="a toy family (test)",
            load=load,
            standin="tiny-toy",
            load_standin=lambda opts: load("", opts),
        )
    )
    try:
        m = load_diffusion("toy:/some/where", seed=3)
        assert seen == [("/some/where", 3)] and m.mask_token_id == m.tokenizer.mask_token_id
        load_diffusion("tiny-toy")
        assert seen[-1] == ("", 0)
        check_model_spec("tiny-toy")
        with pytest.raises(InputError, match="diffusion model; an autoregressive model is needed"):
            load_causal_lm("toy:/x")
        with pytest.raises(InputError, match="does not exist here"):
            check_model_spec("toy:/no/such/dir")
        assert main(["--json", "models"]) == 0
        rows = {r["spec"]: r for r in json.loads(capsys.readouterr().out)}
        assert rows["toy:PATH"]["family"] == "toy" and rows["tiny-toy"]["kind"] == "diffusion"
        assert rows["dream:PATH"]["facts"]["logit_shift"] == 1
    finally:
        FAMILIES.remove(fam.name)
    with pytest.raises(InputError, match="unknown model spec"):
        load_diffusion("toy:/some/where")
