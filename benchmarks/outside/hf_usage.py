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
