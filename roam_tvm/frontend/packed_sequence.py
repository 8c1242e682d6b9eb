"""``PackedSequence`` into ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``, traced as a masked padded recurrence.

Packing is the usual way to feed variable-length batches to an RNN: ``pack_padded_sequence``,
the RNN, ``pad_packed_sequence``. ``torch.export`` cannot trace it as PyTorch runs it: the
packed batch sizes are data (the lengths), and the RNN sizes its work by them.

While a model is traced (:func:`traceable_packed_sequences`), a packed sequence instead holds
the padded batch (batch first) and its lengths, and the RNN modules run it as a masked
recurrence over the padded steps, which is PyTorch's packed computation exactly:

- at step ``t`` a sequence with ``t < length`` takes the cell's new state; the others keep
  theirs (``where``), so the forward direction ends at each sequence's last valid step and
  the reverse direction starts there from ``h_0``;
- outputs past a sequence's length are zeros (what ``pad_packed_sequence`` fills in), also
  between layers;
- ``enforce_sorted=False`` sorts and unsorts as PyTorch does (``sorted_indices``).

The lengths may be an input of the step: the mask is computed from them in the graph, and
the step is planned for the padded length. Reading ``packed.data`` directly (the rows of the
valid steps, whose number is data) is refused with the way out.
"""

from __future__ import annotations

import contextlib
import sys

from .errors import UnsupportedError

DATA_MESSAGE = (
    "PackedSequence.data was read in the traced step: its rows are the valid steps, whose "
    "number depends on the lengths, so the step has no static shape. Way out: "
    "out, lengths = pad_packed_sequence(packed, batch_first=True), then mask by the lengths "
    "(torch.arange(T) < lengths[:, None]) before the loss or pooling.")

_MODES = {"LSTM", "GRU", "RNN_TANH", "RNN_RELU"}


class _Tracing:
    """The packed sequences of one trace: id(data) -> (data, lengths)."""

    def __init__(self):
        self.lengths: dict = {}

    def register(self, data, lengths) -> None:
        self.lengths[id(data)] = (data, lengths)  # the tensor is kept, so its id stays unique

    def of(self, data):
        entry = self.lengths.get(id(data))
        return None if entry is None else entry[1]


def _cell(mode: str, x, h, c, weights, proj: bool):
    """One step of ``mode``: ``(h', c')`` (``c'`` None but for the LSTM)."""
    import torch
    from torch.nn import functional as F

    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if len(weights) - proj >= 4 else (None, None)
    gi, gh = F.linear(x, w_ih, b_ih), F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = (gi + gh).chunk(4, 1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        return (F.linear(h_new, weights[-1]) if proj else h_new), c_new
    if mode == "GRU":
        ir, iz, in_ = gi.chunk(3, 1)
        hr, hz, hn = gh.chunk(3, 1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(in_ + r * hn)
        return (1 - z) * n + z * h, None
    act = torch.tanh if mode == "RNN_TANH" else torch.relu
    return act(gi + gh), None


def _masked_layers(module, x, mask, h0, c0):
    """The stacked, maybe bidirectional recurrence over ``x`` ``[B, T, F]``: (output, h_n, c_n)."""
    import torch
    from torch.nn import functional as F

    dirs = 2 if module.bidirectional else 1
    proj = getattr(module, "proj_size", 0) > 0
    weights = module._flat_weights
    per = len(weights) // (module.num_layers * dirs)
    steps = x.shape[1]
    hs, cs = [], []
    for layer in range(module.num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w = weights[k * per:(k + 1) * per]
            h, c = h0[k], (c0[k] if c0 is not None else None)
            out = [None] * steps
            for t in (reversed(range(steps)) if d else range(steps)):
                valid = mask[:, t, None]
                h_new, c_new = _cell(module.mode, x[:, t], h, c, w, proj)
                out[t] = torch.where(valid, h_new, torch.zeros_like(h_new))
                h = torch.where(valid, h_new, h)
                if c is not None:
                    c = torch.where(valid, c_new, c)
            outs.append(torch.stack(out, 1))
            hs.append(h)
            cs.append(c)
        x = torch.cat(outs, -1) if dirs == 2 else outs[0]
        if module.dropout and module.training and layer < module.num_layers - 1:
            x = F.dropout(x, module.dropout, True)
    return x, torch.stack(hs), (torch.stack(cs) if module.mode == "LSTM" else None)


def _packed_forward(state: _Tracing, packed_cls, module, packed, hx):
    """``module(packed, hx)`` for a traced packed sequence (module docstring)."""
    import torch

    data, batch_sizes, sorted_indices, unsorted_indices = tuple(packed)
    lengths = state.of(data)
    if module.mode not in _MODES:
        raise UnsupportedError(f"a packed sequence into {type(module).__name__} (mode {module.mode})")
    batch, steps = data.shape[0], data.shape[1]
    dirs = 2 if module.bidirectional else 1
    real = module.proj_size if getattr(module, "proj_size", 0) > 0 else module.hidden_size
    if hx is None:
        h0 = torch.zeros(module.num_layers * dirs, batch, real, dtype=data.dtype, device=data.device)
        c0 = torch.zeros(module.num_layers * dirs, batch, module.hidden_size, dtype=data.dtype,
                         device=data.device) if module.mode == "LSTM" else None
    else:
        hx = module.permute_hidden(hx, sorted_indices)
        h0, c0 = hx if module.mode == "LSTM" else (hx, None)
    mask = torch.arange(steps, device=data.device)[None, :] < lengths[:, None].to(data.device)
    out, h_n, c_n = _masked_layers(module, data, mask, h0, c0)
    state.register(out, lengths)
    hidden = (h_n, c_n) if module.mode == "LSTM" else h_n
    return packed_cls(out, batch_sizes, sorted_indices, unsorted_indices), \
        module.permute_hidden(hidden, unsorted_indices)


@contextlib.contextmanager
def traceable_packed_sequences():
    """While active, packed sequences trace as masked padded recurrences (module docstring)."""
    import torch
    from torch.nn.utils import rnn as rnn_utils

    state = _Tracing()
    vf = torch._VF
    pad_code = rnn_utils.pad_packed_sequence.__code__

    class MaskedPacked(rnn_utils.PackedSequence):
        """A traced packed sequence: ``data`` is the padded batch, batch first."""

        def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
            return tuple.__new__(cls, (data, batch_sizes, sorted_indices, unsorted_indices))

        @property
        def data(self):
            if sys._getframe(1).f_code is not pad_code:
                raise UnsupportedError(DATA_MESSAGE)
            return tuple.__getitem__(self, 0)

    def pack(input, lengths, batch_first):
        data = input if batch_first else input.transpose(0, 1)
        data = data.contiguous()
        steps = data.shape[1]
        lengths = lengths.to(torch.int64)
        # the real batch sizes, as a tensor of one entry per step (pad_packed_sequence reads its length)
        batch_sizes = (lengths[None, :] > torch.arange(steps)[:, None]).sum(1)
        state.register(data, lengths)
        return data, batch_sizes

    def pad(data, batch_sizes, batch_first, padding_value, total_length):
        lengths = state.of(data)
        if lengths is None:
            return getattr(torch._C._VariableFunctions, "_pad_packed_sequence")(
                data, batch_sizes, batch_first, padding_value, total_length)
        steps = data.shape[1]
        valid = (torch.arange(steps, device=data.device)[None, :] < lengths[:, None].to(data.device))[..., None]
        out = torch.where(valid, data, torch.full_like(data, padding_value))
        if total_length > steps:
            out = torch.nn.functional.pad(out, (0, 0, 0, total_length - steps), value=padding_value)
        return (out if batch_first else out.transpose(0, 1)), lengths

    def init(data, batch_sizes, sorted_indices, unsorted_indices):
        if state.of(data) is None:
            return original_init(data, batch_sizes, sorted_indices, unsorted_indices)
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = rnn_utils.invert_permutation(sorted_indices)
        return MaskedPacked(data, batch_sizes, sorted_indices, unsorted_indices)

    def forward_of(cls):
        own = cls.__dict__.get("forward")
        inherited = cls.forward

        def forward(self, input, hx=None):
            if isinstance(input, MaskedPacked):
                return _packed_forward(state, MaskedPacked, self, input, hx)
            return inherited(self, input, hx)
        return own, forward

    original_init = rnn_utils._packed_sequence_init
    classes = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)
    patches = {cls: forward_of(cls) for cls in classes}
    vf_names = ("_pack_padded_sequence", "_pad_packed_sequence")
    vf_before = {name: vars(vf).get(name) for name in vf_names}  # normally unset (looked up in C)
    try:
        vf._pack_padded_sequence, vf._pad_packed_sequence = pack, pad
        rnn_utils._packed_sequence_init = init
        for cls, (_, patched) in patches.items():
            cls.forward = patched
        yield
    finally:
        for cls, (own, _) in patches.items():
            if own is None:
                del cls.forward
            else:
                cls.forward = own
        rnn_utils._packed_sequence_init = original_init
        for name, before in vf_before.items():
            if before is None:
                delattr(vf, name)
            else:
                setattr(vf, name, before)
