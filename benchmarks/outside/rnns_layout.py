"""Probes of what an imported RNN step copies and keeps: 1- and 2-layer nn.LSTM / nn.GRU / nn.RNN,
batch-first and time-major, one- and two-directional, read at the last step or at every step.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/rnns_layout.py:<name>``
returning ``(model, example_inputs, targets)``. Sizes are tiny (hidden 32, 12 steps, batch 32, 16 features: the activations outweigh the weights)
so a compare takes about a minute; random weights and data, seeded. Where PyTorch's autograd takes a view
(the batch-first ``transpose``, a time step's slice of the input projection), the imported step should not
hold a copy longer than that view would live (``tests/test_rnn_copies.py``).
"""
from __future__ import annotations

import torch
from torch import nn

FEATURES, HIDDEN, STEPS, BATCH, CLASSES = 16, 32, 12, 32, 5


class LastStep(nn.Module):
    """A recurrent layer, then a linear on its last step's output (a sequence classifier)."""

    def __init__(self, cell: str, layers: int, batch_first: bool, **kw):
        super().__init__()
        self.batch_first = batch_first
        self.rnn = getattr(nn, cell)(FEATURES, HIDDEN, num_layers=layers, batch_first=batch_first, **kw)
        width = HIDDEN * (2 if kw.get("bidirectional") else 1)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1] if self.batch_first else out[-1])


class EveryStep(nn.Module):
    """A batch-first recurrent layer, then a linear at every step (a tagger): logits ``(B, T, C)``."""

    def __init__(self, cell: str, layers: int, **kw):
        super().__init__()
        self.rnn = getattr(nn, cell)(FEATURES, HIDDEN, num_layers=layers, batch_first=True, **kw)
        self.head = nn.Linear(HIDDEN * (2 if kw.get("bidirectional") else 1), CLASSES)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out)


def _data(model: nn.Module, batch_first: bool, every_step: bool = False):
    g = torch.Generator().manual_seed(0)
    shape = (BATCH, STEPS, FEATURES) if batch_first else (STEPS, BATCH, FEATURES)
    x = torch.randn(*shape, generator=g)
    y = torch.randint(0, CLASSES, (BATCH, STEPS) if every_step else (BATCH,), generator=g)
    return model, (x,), (y,)


def _last(cell: str, layers: int = 1, batch_first: bool = True, **kw):
    torch.manual_seed(0)
    return _data(LastStep(cell, layers, batch_first, **kw), batch_first)


def _every(cell: str, layers: int = 1, **kw):
    torch.manual_seed(0)
    return _data(EveryStep(cell, layers, **kw), True, every_step=True)


def lstm1_bf():
    """1-layer nn.LSTM, batch first, last step."""
    return _last("LSTM")


def lstm1_tm():
    """1-layer nn.LSTM, time major, last step."""
    return _last("LSTM", batch_first=False)


def lstm2_bf():
    """2-layer nn.LSTM, batch first, last step."""
    return _last("LSTM", 2)


def lstm2_tm():
    """2-layer nn.LSTM, time major, last step."""
    return _last("LSTM", 2, batch_first=False)


def lstm1_bi():
    """1-layer bidirectional nn.LSTM, batch first, last step."""
    return _last("LSTM", bidirectional=True)


def lstm1_tag():
    """1-layer nn.LSTM, batch first, a linear at every step."""
    return _every("LSTM")


def gru1_bf():
    """1-layer nn.GRU, batch first, last step."""
    return _last("GRU")


def gru1_tm():
    """1-layer nn.GRU, time major, last step."""
    return _last("GRU", batch_first=False)


def gru2_bf():
    """2-layer nn.GRU, batch first, last step."""
    return _last("GRU", 2)


def gru1_bi():
    """1-layer bidirectional nn.GRU, batch first, last step."""
    return _last("GRU", bidirectional=True)


def gru1_tag():
    """1-layer nn.GRU, batch first, a linear at every step."""
    return _every("GRU")


def rnn1_bf():
    """1-layer nn.RNN (tanh), batch first, last step."""
    return _last("RNN")


def rnn2_tm():
    """2-layer nn.RNN (tanh), time major, last step."""
    return _last("RNN", 2, batch_first=False)
