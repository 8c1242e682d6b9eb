"""Packed sequences into nn.LSTM / nn.GRU / nn.RNN, traced as a masked padded recurrence
(frontend/packed_sequence.py): one step's loss, updated parameters and optimizer states match
PyTorch's packed step (test_numerics.compare_step), for sorted and unsorted lengths, stacked
and bidirectional RNNs, a projection, a given initial state, the final states and the padded
outputs; reading ``.data`` directly is refused with the way out."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import test_numerics  # noqa: E402
from roam_tvm.frontend import Adam, from_torch  # noqa: E402
from roam_tvm.frontend.errors import UnsupportedError  # noqa: E402

from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402


class _Packed(torch.nn.Module):
    """Pack, run the RNN, unpack; classify from the masked mean of the outputs and the final state."""

    def __init__(self, cell, uses_h0=False, lengths_buffer=None, **kw):
        super().__init__()
        self.rnn = cell(6, 8, batch_first=True, **kw)
        dirs = 2 if kw.get("bidirectional") else 1
        out = kw.get("proj_size") or 8
        self.head = torch.nn.Linear(out * dirs * 2, 3)
        self.h0 = torch.nn.Parameter(torch.randn(kw.get("num_layers", 1) * dirs, 1, out) * 0.1) if uses_h0 else None
        if lengths_buffer is not None:
            self.register_buffer("lengths", torch.tensor(lengths_buffer), persistent=False)

    def forward(self, x, lengths=None):
        lengths = self.lengths if lengths is None else lengths
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        hx = None
        if self.h0 is not None:
            h0 = self.h0.expand(-1, x.shape[0], -1).contiguous()
            hx = (h0, torch.zeros(h0.shape[0], x.shape[0], self.rnn.hidden_size)) \
                if isinstance(self.rnn, torch.nn.LSTM) else h0
        out, hidden = self.rnn(packed, hx)
        h_n = hidden[0] if isinstance(hidden, tuple) else hidden
        padded, lens = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1] + 1)
        mean = padded.sum(1) / lens[:, None].to(padded.dtype)
        last = torch.cat([h_n[-1], h_n[-2]], -1) if self.rnn.bidirectional else h_n[-1]
        return self.head(torch.cat([mean, last.repeat(1, 1 if self.rnn.bidirectional else 1)], -1)
                         if self.rnn.bidirectional else torch.cat([mean, last], -1))


CASES = {
    "lstm": (torch.nn.LSTM, {}),
    "gru_2layer_bi": (torch.nn.GRU, dict(num_layers=2, bidirectional=True)),
    "rnn_tanh": (torch.nn.RNN, {}),
    "lstm_bi_proj_h0": (torch.nn.LSTM, dict(bidirectional=True, proj_size=5, uses_h0=True)),
    "gru_h0": (torch.nn.GRU, dict(uses_h0=True)),
}


SLOW = {"rnn_tanh", "gru_h0", "gru_2layer_bi"}  # covered in part by the others; with --runslow


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c
                                  for c in sorted(CASES)])
def test_packed_step_matches_torch(case):
    cell, kw = CASES[case]
    torch.manual_seed(0)
    model = _Packed(cell, **kw)
    x = torch.randn(4, 5, 6)
    lengths = torch.tensor([3, 5, 1, 4])  # unsorted: enforce_sorted=False sorts and unsorts
    opt = Adam(lr=1e-2)
    inputs, targets = [x, lengths], [torch.tensor([0, 2, 1, 1])]
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)


def test_lengths_as_a_buffer():
    """The lengths a module buffer (kinds_new_nn's rnn_packed), not an input."""
    torch.manual_seed(0)
    model = _Packed(torch.nn.GRU, lengths_buffer=[5, 2, 4])
    inputs, targets, opt = [torch.randn(3, 5, 6)], [torch.tensor([0, 1, 2])], Adam(lr=1e-2)
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)


class _ReadsData(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = torch.nn.LSTM(6, 8, batch_first=True), torch.nn.Linear(8, 3)

    def forward(self, x, lengths):
        out, _ = self.rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        return self.head(out.data).mean(0, keepdim=True).expand(x.shape[0], -1)


def test_reading_packed_data_is_refused_with_the_way_out():
    with pytest.raises(UnsupportedError, match="pad_packed_sequence"):
        from_torch(_ReadsData(), [torch.randn(2, 5, 6), torch.tensor([5, 3])], [torch.tensor([0, 1])],
                   quiet=True)


class _TimeMajor(torch.nn.Module):
    """Time-major input (``batch_first=False``), a 2-layer GRU, no ``total_length``."""

    def __init__(self):
        super().__init__()
        self.rnn, self.fc = torch.nn.GRU(6, 8, num_layers=2), torch.nn.Linear(8, 3)

    def forward(self, x, lengths):
        out, h = self.rnn(pack_padded_sequence(x, lengths.cpu(), enforce_sorted=False))
        padded, lens = pad_packed_sequence(out)
        return self.fc(padded.sum(0) / lens[:, None].float() + h[-1])


class _Listed(torch.nn.Module):
    """``pack_sequence`` of a list of sequences (sorted by length), LSTM final states only."""

    def __init__(self):
        super().__init__()
        self.rnn, self.fc = torch.nn.LSTM(6, 8, batch_first=True), torch.nn.Linear(8, 3)

    def forward(self, a, b, c):
        _, (h, cell) = self.rnn(torch.nn.utils.rnn.pack_sequence([a, b, c]))
        return self.fc(h[-1] + cell[-1])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["time_major", "pack_sequence"])
def test_other_packing_forms_match_torch(case):
    torch.manual_seed(0)
    if case == "time_major":
        model, inputs = _TimeMajor(), [torch.randn(5, 4, 6), torch.tensor([3, 5, 1, 4])]
        targets = [torch.tensor([0, 2, 1, 1])]
    else:
        model, inputs = _Listed(), [torch.randn(5, 6), torch.randn(3, 6), torch.randn(2, 6)]
        targets = [torch.tensor([1, 0, 2])]
    opt = Adam(lr=1e-2)
    ts = from_torch(model, inputs, targets, loss="cross_entropy", optimizer=opt, quiet=True)
    test_numerics.compare_step(model, inputs, targets, "cross_entropy", opt, ts=ts)
