"""Outside models built on stacked recurrent layers: 2-layer nn.RNN (tanh, relu), nn.GRU and nn.LSTM.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/rnns.py:<name>``:
it returns ``(model, example_inputs, targets)``: a classifier reading the last step, 4 sequences of
8 features. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn


class RNNClassifier(nn.Module):
    """A ``torch.nn`` recurrent layer (``cell``) then a linear on its last step's output."""

    def __init__(self, cell: str = "RNN", features: int = 8, hidden: int = 16, layers: int = 2, classes: int = 5,
                 **kw):
        super().__init__()
        self.rnn = getattr(nn, cell)(features, hidden, num_layers=layers, batch_first=True, **kw)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def _classifier(seed: int = 0, batch: int = 4, steps: int = 12, **kw):
    torch.manual_seed(seed)  # the weights
    model = RNNClassifier(**kw)
    g = torch.Generator().manual_seed(seed)  # the data
    return model, (torch.randn(batch, steps, 8, generator=g),), (torch.randint(0, 5, (batch,), generator=g),)


def rnn_tanh2():
    """2-layer nn.RNN (tanh), hidden 16, 12 steps."""
    return _classifier(cell="RNN", nonlinearity="tanh")


def rnn_relu2():
    """2-layer nn.RNN (relu), hidden 16, 12 steps."""
    return _classifier(cell="RNN", nonlinearity="relu")


def gru_tiny2():
    """2-layer nn.GRU, hidden 16, 12 steps."""
    return _classifier(cell="GRU", hidden=16, steps=12)


def lstm2():
    """2-layer nn.LSTM, hidden 16, 12 steps."""
    return _classifier(cell="LSTM", hidden=16, steps=12)


def gru2_big():
    """2-layer nn.GRU, hidden 64, 16 steps."""
    return _classifier(cell="GRU", hidden=64, steps=16)
