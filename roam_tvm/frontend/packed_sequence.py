"""Refuse ``PackedSequence`` (``nn.utils.rnn.pack_padded_sequence`` into an RNN) up front.

``torch.export`` cannot trace a packed RNN: the packed batch sizes are data (the lengths),
and ``nn.LSTM`` / ``nn.GRU`` size their work by them, so the trace dies deep in torch with
"zeros(): argument 'size' ... got FakeTensor", which names neither the cause nor the way out.
While the model is traced, building a ``PackedSequence`` raises a clear error instead,
before any other work. The way out keeps the same math for the valid steps: run the RNN on
the padded batch and mask (or gather) by the lengths.
"""

from __future__ import annotations

import contextlib

from .errors import UnsupportedError

MESSAGE = (
    "PackedSequence (nn.utils.rnn.pack_padded_sequence / pack_sequence into an RNN) cannot "
    "be traced: its batch sizes are data, so the step has no static shapes to plan. Way out: "
    "feed the padded batch to the RNN directly (batch_first as before) and use the lengths "
    "as a mask: e.g. take each sequence's last valid step with "
    "out[torch.arange(B), lengths - 1], or multiply the outputs by a (B, T, 1) mask "
    "(arange(T) < lengths[:, None]) before pooling.")


@contextlib.contextmanager
def refuse_packed_sequences():
    """While active, constructing a ``PackedSequence`` raises :class:`UnsupportedError`."""
    from torch.nn.utils.rnn import PackedSequence

    original = PackedSequence.__dict__["__new__"]  # the raw staticmethod, restored as it was

    def refuse(cls, *args, **kwargs):
        raise UnsupportedError(MESSAGE)

    # the class is shared, so this also catches a model that imported
    # pack_padded_sequence by name before the patch
    PackedSequence.__new__ = staticmethod(refuse)
    try:
        yield
    finally:
        PackedSequence.__new__ = original
