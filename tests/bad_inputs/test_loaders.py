"""The bad-input battery for checkpoint directories (issue 32, item 6): every family x every fault, built from the
tiny stand-ins' own directories with one file removed or changed, through `dlmeval score --model FAMILY:DIR`
(in process): exit code 2, one line naming the file and the fix, no traceback, nothing built. The causal family
(no diffusion command takes it) is checked through its loader. Then the mask-id rules each family's own code
follows: A2D takes the tokenizer's <|mask|> over a disagreeing config (dllm never reads the config's), LLaDA-MoE
looks <|mask|> up when neither file names an id."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import CheckpointError

FAST = ["--candidates", "a cat", "--text", "--config", "marginal", "-K", "2", "-T", "2"]
#: the spec prefix of each family, the stand-in directory its faults are made from, and --trust-remote-code
FAMILIES = {
    "hf": ("bert-chat", False),  # the BERT-Chat stand-in is a plain ModernBERT masked LM directory
    "bert-chat": ("bert-chat", False),
    "a2d": ("a2d", False),
    "a2d-bd3lm": ("a2d-bd3lm", False),
    "diffullama": ("diffullama", False),
    "llada": ("llada", True),
    "dream": ("dream", True),
    "llada-moe": ("lladamoe", True),
}


def _standin(kind: str) -> Path:
    if kind in ("llada", "dream"):
        from dlmeval.models.standins import standin_checkpoint

        return standin_checkpoint(kind)
    from dlmeval.models.standin_families import standin_dir

    return standin_dir(kind)


def _edit_json(path: Path, **changes) -> None:
    d = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    path.write_text(json.dumps(d))


# ---- faults: each changes a copy of a stand-in's directory
def only_config(d: Path) -> None:
    for f in d.iterdir():
        if f.name != "config.json":
            f.unlink()


def no_weights(d: Path) -> None:
    (d / "model.safetensors").unlink()


def no_tokenizer(d: Path) -> None:
    for f in list(d.iterdir()):
        if f.name.startswith("tokeniz") or f.name in (
            "special_tokens_map.json",
            "vocab.json",
            "chat_template.jinja",
        ):
            f.unlink()


def no_config(d: Path) -> None:
    (d / "config.json").unlink()


def bad_json(d: Path) -> None:
    (d / "config.json").write_text('{"model_type": ')


def missing_shard(d: Path) -> None:
    (d / "model.safetensors").rename(d / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))


def missing_code(d: Path) -> None:
    for f in d.glob("modeling_*.py"):
        f.unlink()


def damaged_tokenizer(d: Path) -> None:
    for name in ("tokenizer.json", "vocab.json"):
        if (d / name).exists():
            (d / name).write_text("{ not json")


# (case name, family, fault, message fragment)
MATRIX = [
    (f"{fam}-{fault.__name__.replace('_', '-')}", fam, fault, message)
    for fam in FAMILIES
    for fault, message in (
        (only_config, "no weights"),
        (no_weights, "no weights"),
        (no_tokenizer, "no tokenizer files"),
        (no_config, "no config.json"),
        (bad_json, "config.json is not valid JSON (line 1"),
        (missing_shard, "names weight shard model-00002-of-00002.safetensors, which is not there"),
        (damaged_tokenizer, "the tokenizer files cannot be read"),
    )
] + [
    (f"{fam}-missing-code", fam, missing_code, "auto_map names modeling_")
    for fam in ("llada", "dream", "llada-moe")
]


def a2d_config_is_llama(d: Path) -> None:
    """An a2d-qwen2 state dict (q/k/v biases) under model_type a2d-llama: LLaMA has no place for the biases."""
    _edit_json(d / "config.json", model_type="a2d-llama")


def a2d_config_is_bert(d: Path) -> None:
    _edit_json(d / "config.json", model_type="modernbert")


def bert_chat_config_is_a2d(d: Path) -> None:
    _edit_json(d / "config.json", model_type="a2d-qwen2")


def bert_chat_config_is_llama(d: Path) -> None:
    _edit_json(d / "config.json", model_type="llama")


def config_vocab_too_small(d: Path) -> None:
    c = json.loads((d / "config.json").read_text())
    _edit_json(d / "config.json", vocab_size=c["vocab_size"] - 8)


def mask_past_the_table(d: Path) -> None:
    """A mask token added to the tokenizer without resizing the embeddings (DiffuLLaMA adds [MASK] and resizes)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(d))
    tok.add_special_tokens({"mask_token": "<newmask>"})
    tok.save_pretrained(str(d))


def moe_directory(d: Path) -> None:
    pass  # the LLaDA-MoE stand-in itself, given to the dense family


def dense_directory(d: Path) -> None:
    _edit_json(d / "config.json", num_experts=None)


def dream_config_is_llada(d: Path) -> None:
    _edit_json(d / "config.json", model_type="llada")


# (case name, family, stand-in kind, fault, message fragment)
CLASS_CASES = [
    ("a2d-qwen2-weights-under-a2d-llama", "a2d", "a2d", a2d_config_is_llama, "has no place for"),
    ("a2d-modernbert-config", "a2d", "a2d", a2d_config_is_bert, "is a 'modernbert' model, not A2D"),
    ("a2d-vocab-smaller-than-weights", "a2d", "a2d", config_vocab_too_small,
     "copying a param with shape torch.Size([160, 32])"),
    ("bert-chat-a2d-config", "bert-chat", "bert-chat", bert_chat_config_is_a2d, "is a 'a2d-qwen2' model"),
    ("bert-chat-llama-config", "bert-chat", "bert-chat", bert_chat_config_is_llama, "is a 'llama' model"),
    ("hf-unknown-model-type", "hf", "a2d", lambda d: None, "which transformers does not know"),
    ("diffullama-mask-past-the-table", "diffullama", "diffullama", mask_past_the_table,
     "the mask id 114 (<newmask>) is past the embedding table (114 rows"),
    ("llada-on-a-moe-directory", "llada", "lladamoe", moe_directory, "use llada-moe:"),
    ("llada-moe-on-a-dense-directory", "llada-moe", "lladamoe", dense_directory, "use llada:"),
    ("dream-on-a-llada-directory", "dream", "dream", dream_config_is_llada, "is a 'llada' model"),
]  # fmt: skip


def _broken(tmp_path: Path, kind: str, fault) -> Path:
    d = tmp_path / "ckpt"
    shutil.copytree(_standin(kind), d)
    fault(d)
    return d


def _score(capsys, tmp_path: Path, fam: str, d: Path, trust: bool) -> tuple[int, str]:
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "--no-progress", "score", "--model", f"{fam}:{d}", *FAST]
    rc = main(argv + (["--trust-remote-code"] if trust else []))
    out, err = capsys.readouterr()
    assert out == "", out
    return rc, err


def _the_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("dlmeval: error: "), err
    assert sum(ln.startswith("dlmeval: error: ") for ln in lines) == 1, err
    return lines[-1]


@pytest.mark.parametrize("name,fam,fault,message", MATRIX, ids=[c[0] for c in MATRIX])
def test_a_broken_checkpoint_is_one_line(tmp_path, capsys, monkeypatch, name, fam, fault, message):
    kind, trust = FAMILIES[fam]
    d = _broken(tmp_path, kind, fault)
    rc, err = _score(capsys, tmp_path, fam, d, trust)
    assert rc == 2
    line = _the_line(err)
    assert message in line and str(d) in line, line


@pytest.mark.parametrize("name,fam,kind,fault,message", CLASS_CASES, ids=[c[0] for c in CLASS_CASES])
def test_a_checkpoint_of_another_class_is_one_line(tmp_path, capsys, name, fam, kind, fault, message):
    d = _broken(tmp_path, kind, fault)
    rc, err = _score(capsys, tmp_path, fam, d, FAMILIES[fam][1])
    assert rc == 2
    line = _the_line(err)
    assert message in line, line


@pytest.mark.parametrize("fault", [only_config, no_weights, no_tokenizer], ids=lambda f: f.__name__)
def test_a_broken_causal_checkpoint_is_one_error(tmp_path, fault):
    from dlmeval.models import load_causal_lm

    d = _broken(tmp_path, "diffullama", fault)  # a plain LlamaForCausalLM directory
    with pytest.raises(CheckpointError) as e:
        load_causal_lm(f"causal:{d}")
    assert "\n" not in str(e.value) and str(d) in str(e.value)


def test_a2d_takes_the_tokenizers_mask_over_a_disagreeing_config(tmp_path):
    """dllm's get_tokenizer makes <|mask|> the mask token and its samplers read tokenizer.mask_token_id, never the
    config's: a config mask_token_id that disagrees is a load warning naming both, and the tokenizer's id is used."""
    from dlmeval.models.a2d import load_a2d

    d = tmp_path / "a2d"
    shutil.copytree(_standin("a2d"), d)
    ref = load_a2d(str(d), dtype="float32")
    wrong = ref.mask_token_id + 1
    _edit_json(d / "config.json", mask_token_id=wrong)
    with pytest.warns(UserWarning, match=f"config.json's mask_token_id {wrong} differs"):
        m = load_a2d(str(d), dtype="float32")
    assert m.mask_token_id == ref.mask_token_id == m.tokenizer.convert_tokens_to_ids("<|mask|>")
    notes = [w for w in m.load_warnings if "config.json's mask_token_id" in w]
    assert len(notes) == 1 and f" {wrong} " in notes[0] and f"mask id {ref.mask_token_id}" in notes[0]
    assert not any("mask_token_id" in w for w in ref.load_warnings)


def test_lladamoe_looks_up_its_mask_token(tmp_path):
    """Neither config.json nor the tokenizer's roles name a mask id: the <|mask|> token dllm's get_tokenizer sets
    is looked up in the vocabulary (before the published 7B constant, which is past a small table)."""
    from dlmeval.models.lladamoe import load_lladamoe

    d = tmp_path / "moe"
    shutil.copytree(_standin("lladamoe"), d)
    ref = load_lladamoe(str(d), dtype="float32", trust_remote_code=True)
    _edit_json(d / "config.json", mask_token_id=None)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        _edit_json(d / name, mask_token=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = load_lladamoe(str(d), dtype="float32", trust_remote_code=True)
    assert m.tokenizer.mask_token_id is None
    assert m.mask_token_id == ref.mask_token_id == m.tokenizer.convert_tokens_to_ids("<|mask|>")
    assert any("<|mask|>" in w and "vocabulary" in w for w in m.load_warnings)
    ids, attn = m.pad([m.encode("the cat sat")])
    ids[0, -1] = m.mask_token_id
    assert m.logits(ids, attn).shape[-1] >= m.mask_token_id  # the pass runs (no IndexError)


def test_a_mask_constant_past_the_table_is_one_line(tmp_path, capsys):
    """No mask id anywhere and no <|mask|> in the vocabulary: the family's 7B constant is past the tiny table, so
    the load stops in one line instead of an IndexError in the first forward pass."""
    d = tmp_path / "moe"
    shutil.copytree(_standin("lladamoe"), d)
    _edit_json(d / "config.json", mask_token_id=None)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        _edit_json(d / name, mask_token=None)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["added_tokens"] = [t for t in tj["added_tokens"] if t["content"] != "<|mask|>"]
    tj["model"]["vocab"].pop("<|mask|>", None)
    (d / "tokenizer.json").write_text(json.dumps(tj))
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["added_tokens_decoder"] = {
        k: v for k, v in tc.get("added_tokens_decoder", {}).items() if v["content"] != "<|mask|>"
    }
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    rc, err = _score(capsys, tmp_path, "llada-moe", d, True)
    assert rc == 2
    assert "the mask id 156895" in _the_line(err) and "past the embedding table" in _the_line(err)


def test_hf_directory_with_only_config_json_in_a_real_process(tmp_path):
    """The issue's own command, as a user runs it (a separate process, so nothing but the CLI's own handling stands
    between an exception and a traceback): one line, exit code 2."""
    import os
    import subprocess
    import sys

    d = _broken(tmp_path, "bert-chat", only_config)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = ["--store", str(tmp_path / "runs.sqlite"), "--no-progress", "score", "--model", f"hf:{d}", *FAST]
    r = subprocess.run(
        [sys.executable, "-m", "dlmeval", *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dlmeval: error: masked LM checkpoint"), r.stderr
    assert "no weights" in r.stderr and "no tokenizer files" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "runs.sqlite").exists()


@pytest.mark.parametrize("fam", ["a2d", "llada", "hf"])
def test_model_spec_check_names_missing_files_before_any_store(tmp_path, monkeypatch, fam):
    """`check_model_spec` (what every protocol calls before it opens a run store) already names the missing
    files, without building anything."""
    from dlmeval.models.registry import check_model_spec

    def no_build(*a, **k):
        raise AssertionError("a model was built to check a spec")

    monkeypatch.setattr("transformers.AutoModel.from_pretrained", no_build)
    monkeypatch.setattr("transformers.AutoModelForMaskedLM.from_pretrained", no_build)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", no_build)
    d = _broken(tmp_path, FAMILIES[fam][0], no_weights)
    with pytest.raises(CheckpointError, match="no weights"):
        check_model_spec(f"{fam}:{d}")
    good = _broken(tmp_path / "good", FAMILIES[fam][0], lambda d: None)
    check_model_spec(f"{fam}:{good}")  # a whole directory passes
