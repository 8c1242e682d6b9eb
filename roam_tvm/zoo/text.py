"""Text models built from Hugging Face ``transformers`` configurations (random init, eager attention, no dropout).

Each wrapper's ``forward(input_ids)`` returns a single logits tensor, as the zoo's loss conventions expect.
The Hugging Face model is held as ``self.hf`` (parameter names get an ``hf.`` prefix).
"""
from __future__ import annotations

import torch
from torch import nn


def _quiet_transformers():
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except Exception:  # pragma: no cover - logging is cosmetic
        pass


def gpt2_config(layers: int, width: int, heads: int, vocab: int, positions: int, dropout: float = 0.0):
    from transformers import GPT2Config

    _quiet_transformers()
    special = 50256 if vocab > 50256 else 0
    return GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab, n_positions=positions,
                      resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, use_cache=False,
                      bos_token_id=special, eos_token_id=special, attn_implementation="eager")


class GPT2LM(nn.Module):
    """``GPT2LMHeadModel``: logits over the vocabulary for every position (tied ``wte`` / ``lm_head``)."""

    def __init__(self, config):
        super().__init__()
        from transformers import GPT2LMHeadModel

        self.hf = GPT2LMHeadModel(config)

    def forward(self, input_ids):
        return self.hf(input_ids=input_ids, use_cache=False).logits


class GPT2Hidden(nn.Module):
    """``GPT2Model`` without LM head: returns the last hidden state (the ROAM paper's GPT2-XL setup)."""

    def __init__(self, config):
        super().__init__()
        from transformers import GPT2Model

        self.hf = GPT2Model(config)

    def forward(self, input_ids):
        return self.hf(input_ids=input_ids, use_cache=False).last_hidden_state


def bert_config(layers: int, width: int, heads: int, vocab: int, positions: int, intermediate: int,
                num_labels: int, dropout: float = 0.0):
    from transformers import RobertaConfig

    _quiet_transformers()
    return RobertaConfig(num_hidden_layers=layers, hidden_size=width, num_attention_heads=heads,
                         intermediate_size=intermediate, vocab_size=vocab,
                         max_position_embeddings=positions + 2, type_vocab_size=1,
                         hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                         classifier_dropout=dropout, num_labels=num_labels, pad_token_id=1,
                         bos_token_id=0, eos_token_id=2, use_cache=False, attn_implementation="eager")


class BertClassifier(nn.Module):
    """A BERT/RoBERTa-base-like encoder (``RobertaModel`` without pooler) and a sequence-classification head on
    the first token (dense-tanh-linear, as ``RobertaForSequenceClassification``'s head without dropout):
    logits ``[batch, num_labels]``.

    The head is ours so the first token is taken as a slice + flatten: transformers' ``features[:, 0, :]`` is a
    0-d index ``take`` whose gradient TVM 0.27 cannot legalize."""

    def __init__(self, config):
        super().__init__()
        from transformers import RobertaModel

        self.hf = RobertaModel(config, add_pooling_layer=False)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids):
        h = self.hf(input_ids=input_ids).last_hidden_state
        return self.out_proj(torch.tanh(self.dense(h[:, :1].flatten(1))))
