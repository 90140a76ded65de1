"""Configuration of dlmeval's tiny LLaDA stand-in: LLaDA's config field names (d_model, n_heads, n_layers,
mlp_hidden_size, embedding_size, max_sequence_length, mask_token_id), model_type ``llada``. Like LLaDA's config class it fills a missing ``mask_token_id`` with
50256 (GPT-2's EOS), so a loader that trusted the config object would silently use a word as the mask."""

from transformers import PretrainedConfig


class TinyLLaDAConfig(PretrainedConfig):
    model_type = "llada"

    def __init__(
        self,
        d_model=32,
        n_heads=4,
        n_kv_heads=4,
        n_layers=2,
        mlp_hidden_size=64,
        vocab_size=192,
        embedding_size=192,
        max_sequence_length=128,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        mask_token_id=50256,  # the default of LLaDA's ModelConfig: what a config.json without the field gets
        use_cache=False,
        tie_word_embeddings=False,
        **kwargs,
    ):
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_layers = n_layers
        self.mlp_hidden_size = mlp_hidden_size
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_sequence_length = max_sequence_length
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.mask_token_id = mask_token_id
        self.use_cache = use_cache
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
