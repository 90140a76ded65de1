"""Configuration of dlmeval's tiny LLaDA-MoE stand-in: LLaDA-MoE's config field names (``dense_intermediate_size``,
``expert_intermediate_size``, ``shared_expert_intermediate_size``, ``num_experts``, ``num_experts_per_tok``,
``moe_layer_freq``, ``qk_layernorm``, ``moe_router_enable_expert_bias``), model_type ``lladamoe``."""

from transformers import PretrainedConfig


class TinyLLaDAMoEConfig(PretrainedConfig):
    model_type = "lladamoe"

    def __init__(
        self,
        vocab_size=192,
        hidden_size=32,
        dense_intermediate_size=64,
        expert_intermediate_size=16,
        shared_expert_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=None,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        attention_bias=False,
        num_experts=4,
        num_experts_per_tok=2,
        moe_layer_freq=None,
        qk_layernorm=True,
        moe_router_enable_expert_bias=False,
        mask_token_id=None,
        use_cache=False,
        tie_word_embeddings=False,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.dense_intermediate_size = dense_intermediate_size
        self.expert_intermediate_size = expert_intermediate_size
        self.shared_expert_intermediate_size = shared_expert_intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.attention_bias = attention_bias
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.moe_layer_freq = list(moe_layer_freq) if moe_layer_freq is not None else [1] * num_hidden_layers
        self.qk_layernorm = qk_layernorm
        self.moe_router_enable_expert_bias = moe_router_enable_expert_bias
        self.mask_token_id = mask_token_id
        self.use_cache = use_cache
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
