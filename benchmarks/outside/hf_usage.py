"""Outside models handed over as users write them, not as benchmarks do: a bare ``LlamaForCausalLM``
(default cache and attention settings, a ``ModelOutput`` returned), a model that computes its own loss
from ``labels=``, and one with ``gradient_checkpointing_enable()``.

Factories for ``roam-tvm compare --model benchmarks/outside/hf_usage.py:<name>``, sizes as in
``hf_more.py`` (2 layers, hidden 64, vocab 256, 2 x 12 tokens). Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

from roam_tvm.zoo.families import _gen, _quiet, _tokens

BATCH, SEQ, VOCAB = 2, 12, 256


def _user_llama():
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    return tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=VOCAB, num_hidden_layers=2, hidden_size=64,
                                              intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                                              max_position_embeddings=64))


def llama_raw():
    """``LlamaForCausalLM`` as a user hands it over: no wrapper, default cache and attention settings."""
    gen = _gen()
    model = _user_llama()
    return model, (_tokens(gen, BATCH, SEQ, VOCAB),), (_tokens(gen, BATCH, SEQ, VOCAB),)


class OwnLoss(nn.Module):
    """``forward(input_ids, labels)`` -> the loss the Hugging Face model computes (shifted labels)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, labels):
        return self.hf(input_ids=input_ids, labels=labels, use_cache=False).loss


def llama_own_loss():
    """LLaMA computing its own shifted-label loss (``labels=``): no targets, the loss is the output."""
    gen = _gen()
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ, VOCAB))
    return OwnLoss(_user_llama()), ins, (), lambda out: out


def llama_ckpt():
    """A bare ``LlamaForCausalLM`` with ``gradient_checkpointing_enable()`` (activation checkpointing)."""
    gen = _gen()
    model = _user_llama()
    model.gradient_checkpointing_enable()
    return model, (_tokens(gen, BATCH, SEQ, VOCAB),), (_tokens(gen, BATCH, SEQ, VOCAB),)


def t5_own_loss():
    """A bare ``T5ForConditionalGeneration`` computing its own loss from ``labels=`` (decoder inputs shifted
    inside the model), handed over with a callable that reads ``out.loss``."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    model = tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=96, num_layers=2,
                                                      num_heads=4, dropout_rate=0.0, decoder_start_token_id=0))
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ - 4, VOCAB))
    return OwnLoss(model), ins, (), lambda out: out


def mixtral_aux_loss():
    """``AutoModelForCausalLM.from_config`` Mixtral with ``output_router_logits=True``: its own loss adds the
    router's load-balancing loss (one-hot of the top-2 experts)."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    conf = tf.MixtralConfig(vocab_size=VOCAB, num_hidden_layers=2, hidden_size=64, intermediate_size=64,
                            num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                            num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.02,
                            max_position_embeddings=64)
    model = tf.AutoModelForCausalLM.from_config(conf)
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ, VOCAB))
    return OwnLoss(model), ins, (), lambda out: out


class _ImageOwnLoss(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, pixel_values, labels):
        return self.hf(pixel_values=pixel_values, labels=labels).loss


def swin_own_loss():
    """A bare ``SwinForImageClassification`` computing its own loss from ``labels=``."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    conf = tf.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
                         num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0)
    ins = (torch.randn(BATCH, 3, 32, 32, generator=gen), torch.randint(0, 5, (BATCH,), generator=gen))
    return _ImageOwnLoss(tf.SwinForImageClassification(conf)), ins, (), lambda out: out


def qwen2_auto_bf16():
    """``AutoModelForCausalLM.from_config(..., dtype=torch.bfloat16)``: a whole-bf16 Qwen2, default settings."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    conf = tf.Qwen2Config(vocab_size=VOCAB, num_hidden_layers=2, hidden_size=64, intermediate_size=96,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = tf.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
    return model, (_tokens(gen, BATCH, SEQ, VOCAB),), (_tokens(gen, BATCH, SEQ, VOCAB),)


class _MaskedOwnLoss(nn.Module):
    """A user's wrapper: ``forward(ids, mask, labels)`` -> the HF model's own loss; the cache left at the
    config's default (on)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask, labels):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def _padded_batch(gen):
    ids = _tokens(gen, BATCH, SEQ, VOCAB)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0  # the second sequence is 3 tokens shorter: right padding
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


def llama_wrapped_mask():
    """A bare LLaMA inside the user's own wrapper (so its config's ``use_cache`` stays on), with a padding
    ``attention_mask`` and ``-100`` labels on the padding."""
    gen = _gen()
    return _MaskedOwnLoss(_user_llama()), _padded_batch(gen), (), lambda out: out


def qwen2_moe_aux_mask():
    """``AutoModelForCausalLM.from_config`` Qwen2-MoE with ``output_router_logits=True`` in the user's wrapper,
    with a padding mask: the load-balancing loss counts only unpadded tokens (scatter_add of the mask)."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    conf = tf.Qwen2MoeConfig(vocab_size=VOCAB, num_hidden_layers=2, hidden_size=64, intermediate_size=64,
                             moe_intermediate_size=32, shared_expert_intermediate_size=32, num_attention_heads=4,
                             num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, output_router_logits=True,
                             max_position_embeddings=64)
    return _MaskedOwnLoss(tf.AutoModelForCausalLM.from_config(conf)), _padded_batch(gen), (), lambda out: out


def gpt2_own_mask():
    """A bare ``GPT2LMHeadModel`` (default SDPA attention) in the user's wrapper with a padding mask and
    ``-100`` labels: torch's SDPA decomposition leaves the attention output permuted, which Conv1D's
    ``x.view(-1, d)`` refused (frontend/view_reshapes.py)."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    return _MaskedOwnLoss(model), _padded_batch(gen), (), lambda out: out


def swin_default_rates():
    """``SwinForImageClassification`` with the config's default rates (``drop_path_rate=0.1``): its
    stochastic depth is imported as the identity with a warning (frontend/drop_path.py), as dropout is."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    gen = _gen()
    conf = tf.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
                         num_labels=5)
    x = torch.randn(BATCH, 3, 32, 32, generator=gen)
    return _Logits(tf.SwinForImageClassification(conf)), (x,), (torch.randint(0, 5, (BATCH,), generator=gen),)


class _Logits(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, pixel_values):
        return self.hf(pixel_values=pixel_values).logits
