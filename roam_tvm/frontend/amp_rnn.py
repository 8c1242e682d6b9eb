"""Recurrent layers in low precision under AMP, as CUDA autocast runs them.

``from_torch(..., precision="bf16-amp" | "fp16-amp")`` traces the step under ``torch.autocast("cpu")`` (see
:mod:`.amp`). CPU autocast keeps ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` and their cells in float32, but the
step is planned for a GPU, where CUDA autocast runs ``GRUCell``, ``LSTMCell`` and ``RNNCell`` in the low
precision (its "lower precision" op list) and cuDNN RNNs with their weights cast to 16 bits
(``AutocastRNN.cpp``). So while the step is traced under AMP, :func:`rnns_in` casts every floating input of
the recurrent kernels (input, states, weights) to the AMP dtype: the recurrence, and what it keeps for the
backward, is 16-bit; the fp32 master weights get fp32 gradients through the casts, as for a matmul.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

#: torch._VF kernels nn.LSTM / nn.GRU / nn.RNN and their cells call
RNN_KERNELS = ("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell")


def _cast(value, dtype):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


@contextlib.contextmanager
def rnns_in(dtype) -> Iterator[None]:
    """While active, ``torch._VF``'s recurrent kernels run on ``dtype`` copies of their floating inputs."""
    import torch

    vf = torch._VF
    saved = {name: vars(vf).get(name) for name in RNN_KERNELS}
    originals = {name: getattr(vf, name) for name in RNN_KERNELS}

    def cast_first(name):
        kernel = originals[name]

        def run(*args, **kwargs):
            with torch.autocast("cpu", enabled=False):
                return kernel(*_cast(args, dtype), **{k: _cast(v, dtype) for k, v in kwargs.items()})
        return run

    try:
        for name in RNN_KERNELS:
            setattr(vf, name, cast_first(name))
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                delattr(vf, name)
            else:
                setattr(vf, name, old)
