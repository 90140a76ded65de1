"""DiffScore-FT's --ft-train: CNN/DailyMail by name (offline: a one-line error), a datasets directory and a parquet
file built with `datasets` itself, and the provenance in the run configuration."""

import pytest


@pytest.fixture()
def cnn_like(tmp_path):
    import datasets

    train = datasets.Dataset.from_dict(
        {"article": ["the cat sat on the mat .", "the dog ran home ."], "highlights": ["cat sat .", "dog ran ."],
         "id": ["a", "b"]}
    )  # fmt: skip
    dd = datasets.DatasetDict({"train": train, "test": train.select([0])})
    d = tmp_path / "cnn"
    dd.save_to_disk(str(d))
    pq = tmp_path / "pairs.parquet"
    datasets.Dataset.from_dict({"source": ["x y ."], "target": ["x ."]}).to_parquet(str(pq))
    return d, pq


def test_local_dataset_dir_and_parquet(cnn_like):
    from dlmeval.protocols.diffscore.ft_data import describe_training_data, read_training_pairs

    d, pq = cnn_like
    assert read_training_pairs(str(d)) == [
        {"source": "the cat sat on the mat .", "target": "cat sat ."},
        {"source": "the dog ran home .", "target": "dog ran ."},
    ]
    info = describe_training_data(str(d))
    assert info["kind"] == "disk" and info["split"] == "train" and info["rows"] == 2
    assert read_training_pairs(str(pq)) == [{"source": "x y .", "target": "x ."}]
    assert describe_training_data(str(pq))["digest"] != info["digest"]


def test_hub_id_offline_names_allow_download(monkeypatch, tmp_path):
    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.ft_data import _read

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty-cache"))
    _read.cache_clear()
    with pytest.raises(
        InputError,
        match=r"--ft-train cnn_dailymail \(abisee/cnn_dailymail, 3.0.0, train\).*--allow-download",
    ):
        _read("cnn_dailymail", False)


def test_ft_options_record_the_training_set(cnn_like):
    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.ft import FTOptions

    d, pq = cnn_like
    o = FTOptions(train_data=str(d))
    o.check()
    desc = o.describe()
    assert (
        desc["scheme"] == "given file"
        and desc["train_data"]["kind"] == "disk"
        and "allow_download" not in desc
    )
    assert FTOptions(train_data=str(pq)).describe()["train_data"]["digest"] != desc["train_data"]["digest"]
    with pytest.raises(InputError, match="no such file"):
        FTOptions(train_data="./missing.parquet").check()
