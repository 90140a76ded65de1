"""dlmeval.data.hub: rows and provenance from hub ids (offline, from the datasets cache), save_to_disk
directories and parquet / JSONL / CSV files."""

from __future__ import annotations

import json

import pytest

from dlmeval.data.hub import describe, is_hub_id, load_rows
from dlmeval.errors import DataFormatError, InputError
from tests.hub_data import cache_hub_dataset, save_dataset

ROWS = {
    "train": [{"question": "q0", "answer": "a #### 1"}, {"question": "q1", "answer": "b #### 2"}],
    "test": [{"question": "t0", "answer": "c #### 3"}, {"question": "t1", "answer": "d #### 4"},
             {"question": "t2", "answer": "e #### 5"}],
}  # fmt: skip


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    import datasets.config

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    cache_hub_dataset(cache, "toy/gsm8k", "main", ROWS)
    return cache


def test_hub_id_read_offline_from_the_cache(hub_cache):
    r = load_rows("toy/gsm8k", name="main", split="test", columns=["question"], limit=2)
    assert r.rows == [{"question": "t0"}, {"question": "t1"}]
    p = r.provenance
    assert (p["kind"], p["id"], p["name"], p["split"], p["fields"], p["rows"]) == (
        "hub", "toy/gsm8k", "main", "test", ["question"], 2,
    )  # fmt: skip
    assert p["fingerprint"] and len(p["digest"]) == 16
    assert describe(p) == "hub:toy/gsm8k[main] test, 2 rows"
    # default_split picks among several; the only way without it is an error listing the splits
    assert load_rows("hf:toy/gsm8k", name="main", default_split="train").provenance["split"] == "train"
    with pytest.raises(InputError, match="splits test, train|splits train, test"):
        load_rows("toy/gsm8k", name="main")
    with pytest.raises(InputError, match="validation"):
        load_rows("toy/gsm8k", name="main", split="validation")


def test_hub_id_not_cached_names_allow_download(hub_cache):
    with pytest.raises(InputError, match="--allow-download") as e:
        load_rows("nobody/absent", split="test", what="downstream.gsm8k.source")
    assert "downstream.gsm8k.source" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="--allow-download"):
        load_rows("toy/gsm8k", name="other-config", split="test")


def test_local_sources_and_their_digests(tmp_path):
    d = save_dataset(tmp_path / "dd", ROWS)
    r = load_rows(d, default_split="test")
    assert [x["question"] for x in r] == ["t0", "t1", "t2"] and r.provenance["kind"] == "disk"
    assert r.provenance["split"] == "test" and r.provenance["file_digest"]
    jl = tmp_path / "t.jsonl"
    jl.write_text("".join(json.dumps(x) + "\n" for x in ROWS["test"]))
    rj = load_rows(jl)
    assert rj.rows == ROWS["test"] and rj.provenance["kind"] == "json"
    # the same rows from another kind of file: the same row digest, another file digest
    import datasets

    datasets.Dataset.from_list(ROWS["test"]).to_parquet(str(tmp_path / "t.parquet"))
    datasets.Dataset.from_list(ROWS["test"]).to_csv(str(tmp_path / "t.csv"), index=False)
    rp, rc = load_rows(tmp_path / "t.parquet"), load_rows(tmp_path / "t.csv")
    assert rp.rows == rc.rows == ROWS["test"]
    assert rp.provenance["digest"] == rj.provenance["digest"] == r.provenance["digest"]
    assert rp.provenance["file_digest"] != rj.provenance["file_digest"]
    # one row changed: another digest
    changed = [dict(x) for x in ROWS["test"]]
    changed[2]["answer"] = "e #### 6"
    jl.write_text("".join(json.dumps(x) + "\n" for x in changed))
    assert load_rows(jl).provenance["digest"] != rj.provenance["digest"]


def test_bad_sources_are_refused(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_rows(tmp_path / "missing.jsonl")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(InputError, match="unknown file type"):
        load_rows(tmp_path / "x.txt")
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="save_to_disk"):
        load_rows(tmp_path / "plain")
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"a": 1}\n')
    with pytest.raises(InputError, match="no splits"):
        load_rows(jl, split="test")
    with pytest.raises(DataFormatError, match="no field 'b'.*fields: a"):
        load_rows(jl, columns=["b"])
    with pytest.raises(InputError, match="positive"):
        load_rows(jl, limit=0)
    assert is_hub_id("openai/gsm8k") and not is_hub_id(str(jl)) and not is_hub_id("a b")
