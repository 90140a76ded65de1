"""The masked-LM loader that ``hf:`` and ``bert-chat:`` share (#36): the family's checks run in order, before the
weights load, and a missing path is refused in the family's words."""

from __future__ import annotations

import pytest

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.hf_mlm import load_masked_lm
from dlmeval.models.standin_families import standin_dir


def _load(path, calls, **over):
    kw = dict(
        label="BERT-Chat",
        what="BERT-Chat model",
        device="cpu",
        dtype="float32",
        allow_download=False,
        check_local=lambda p: calls.append(("local", p)),
        check_config=lambda cfg: calls.append(("config", cfg.model_type)),
        check_tokenizer=lambda tok: calls.append(("tokenizer", tok.mask_token)),
    )
    return load_masked_lm(str(path), **{**kw, **over})


def test_the_family_checks_run_in_order_then_the_weights_load():
    path = standin_dir("bert-chat")
    calls: list = []
    module, tok, cfg, dev, dt = _load(path, calls)
    assert calls == [("local", str(path)), ("config", "modernbert"), ("tokenizer", "[MASK]")]
    assert not module.training and dev.type == "cpu" and str(dt) == "torch.float32"
    assert tok.mask_token_id is not None and cfg.vocab_size == module.get_input_embeddings().weight.shape[0]


def test_a_family_check_stops_the_load_before_the_weights(monkeypatch):
    from dlmeval.models import validate

    def no_weights(*a, **k):
        raise AssertionError("weights loaded after a failed check")

    monkeypatch.setattr(validate, "from_pretrained_checked", no_weights)

    def refuse(tok):
        raise InputError("no mask")

    with pytest.raises(InputError, match="no mask"):
        _load(standin_dir("bert-chat"), [], check_tokenizer=refuse)


def test_a_path_not_on_disk_is_refused_in_the_family_words(tmp_path):
    with pytest.raises(
        ModelNotFoundError, match=r"^BERT-Chat model '.*nothing' is not on disk; .*--allow-download"
    ):
        _load(tmp_path / "nothing", [])
