"""Hugging Face-ready directories: the shipped default opens with transformers' Auto classes (same logits as
dlmeval's loader), saved adapters carry a model card with dlmeval's version and settings, and `train --data` reads
parquet."""

from __future__ import annotations

import json
import re

import pytest
import torch

from dlmeval import __version__
from dlmeval.errors import DataFormatError
from dlmeval.models.default import ASSET_DIR
from dlmeval.train.finetune import FinetuneConfig, finetune, read_pairs

PAIRS = [
    {"source": "the cat sat on the mat", "target": "a cat sat"},
    {"source": "a dog ran", "target": "the dog"},
]


@pytest.mark.slow
def test_the_shipped_default_opens_with_auto_classes():
    from safetensors import safe_open
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from dlmeval.models import load_diffusion

    with safe_open(str(ASSET_DIR / "model.safetensors"), "pt") as f:
        assert f.metadata()["format"] == "pt"
    auto = AutoModelForMaskedLM.from_pretrained(str(ASSET_DIR), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(ASSET_DIR))
    ours = load_diffusion("default", device="cpu")
    # the weights digest in run signatures hashes tensors, not file bytes: the header's new entry leaves it
    assert ours.identity().weights_sha256.startswith("32dbce4e")
    ids = tok("the cat sat on the [MASK] .", return_tensors="pt")
    with torch.no_grad():
        a = auto(**ids).logits
    b = ours.logits(ids["input_ids"], ids["attention_mask"])
    assert torch.equal(a, b)
    card = (ASSET_DIR / "README.md").read_text()
    # the shipped card states the dlmeval that exported the weights (not the one running now: the version comes
    # from git since #32 and moves with every commit)
    assert "library_name: transformers" in card and re.search(r"written by dlmeval \d+\.\d+", card)


def test_an_adapter_directory_has_a_model_card(tmp_path):
    from dlmeval.models import tiny_model
    from dlmeval.models.adapters import adapter_sha256

    info = finetune(
        tiny_model("bert"),
        PAIRS,
        FinetuneConfig(steps=2, batch_size=2, rank=2, alpha=4),
        tmp_path / "a",
        progress=False,
    )
    card = (tmp_path / "a" / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: peft\n") and f"dlmeval {__version__}" in card
    settings = json.loads((tmp_path / "a" / "dlmeval_train.json").read_text())
    assert f'"pairs_sha256": "{settings["pairs_sha256"]}"' in card and '"rank": 2' in card
    (tmp_path / "a" / "README.md").write_text("edited")
    assert adapter_sha256(tmp_path / "a") == info.sha256  # the card is not part of the adapter's digest


def test_training_pairs_from_parquet(tmp_path):
    import pandas as pd

    p = tmp_path / "pairs.parquet"
    pd.DataFrame(PAIRS + [{"source": "x", "target": "y"}]).assign(extra=1).to_parquet(p)
    assert read_pairs(p) == PAIRS + [{"source": "x", "target": "y"}]
    pd.DataFrame({"source": ["a"]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DataFormatError, match="no target column"):
        read_pairs(tmp_path / "bad.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(DataFormatError, match="not a readable parquet"):
        read_pairs(tmp_path / "junk.parquet")
