import pytest

from dlmeval.data.paths import data_dir


@pytest.fixture(scope="session")
def data_root():
    """The shared data directory (``../shared/data`` beside the checkout, or DLMEVAL_DATA)."""
    return data_dir()


def write_tiny_encoder(d) -> str:
    """A 2-layer BERT encoder directory over the tiny word vocabulary (stands in for MiniLM in the suite tests);
    weights drawn under ``fork_rng`` from seed 0."""
    import torch
    from transformers import BertConfig, BertModel

    from dlmeval.models.tiny import tiny_tokenizer, tiny_vocab_size

    tiny_tokenizer("bert").save_pretrained(str(d))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cfg = BertConfig(
            vocab_size=tiny_vocab_size(),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
        )
        BertModel(cfg).save_pretrained(str(d))
    return str(d)


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory):
    return write_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))
