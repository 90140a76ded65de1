"""Configuration of dlmeval's tiny Dream stand-in: Dream's (Qwen2's) config field names, model_type ``Dream``."""

from transformers import PretrainedConfig


class TinyDreamConfig(PretrainedConfig):
    model_type = "Dream"

    def __init__(
        self,
        vocab_size=192,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        mask_token_id=151666,  # DreamConfig's default, whatever the tokenizer's mask token is
        tie_word_embeddings=False,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.mask_token_id = mask_token_id
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
