"""Random draws in a training forward: said out loud, before TVM's importer sees them.

TVM 0.27's PyTorch importer turns ``dropout`` / ``native_dropout`` / ``bernoulli`` into the
identity without a word (and ``scaled_dot_product_attention``'s ``dropout_p`` into none), so a model trained with dropout (Hugging Face configs default to
``p=0.1``) gets a step without it: other numerics, and no masks kept for the backward, which
PyTorch keeps. :func:`check_random_ops` warns about that, and refuses the random draws the
importer cannot take (``torch.rand`` for stochastic depth written inline, ``rand_like``, in-place
``uniform_`` / ``normal_`` noise; drop-path *modules* are traced as the identity, drop_path.py) with the model's line and the way out, instead of TVM's
"Unsupported function types".
"""

from __future__ import annotations

import warnings

from .errors import UnsupportedError

# imported as the identity by TVM 0.27 (its convert map)
_DROPOUT = {"dropout.default", "dropout_.default", "native_dropout.default", "bernoulli.p"}
# random draws TVM 0.27 has no converter for
_UNSUPPORTED = {"rand.default", "rand_like.default", "uniform_.default", "uniform.default",
                "normal_.default", "normal.Tensor_float", "normal.float_Tensor",
                "bernoulli.default", "bernoulli_.float", "randint.default", "randint.low",
                "randint_like.default", "randperm.default", "multinomial.default",
                "exponential_.default", "rand.generator"}


def _op(node) -> str:
    target = node.target
    name = getattr(target, "__name__", str(target))
    return name.split("aten.")[-1] if "aten." in name else name


def _dropout_p(node) -> float:
    args = node.args
    p = args[1] if len(args) > 1 else node.kwargs.get("p", 0.5)
    train = args[2] if len(args) > 2 else node.kwargs.get("train", True)
    return float(p) if train is not False and isinstance(p, (int, float)) else 0.0


_ATTENTION = {"scaled_dot_product_attention.default"}  # dropout_p: its attention dropout, imported as none


def _attention_p(node) -> float:
    p = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
    return float(p) if isinstance(p, (int, float)) else 0.0


# stacked RNNs: dropout between layers; (num_layers, dropout, train) at these argument positions
_RNN = {name + ".input": 4 for name in ("lstm", "gru", "rnn_tanh", "rnn_relu")}
_RNN.update({name + ".data": 5 for name in ("lstm", "gru", "rnn_tanh", "rnn_relu")})


def _rnn_p(node) -> float:
    at = _RNN[_op(node)]
    layers, p, train = (node.args[at:at + 3] + (1, 0.0, False))[:3]
    return float(p) if isinstance(layers, int) and layers > 1 and train is True and isinstance(p, (int, float)) \
        else 0.0


def _p(node) -> float:
    name = _op(node)
    if name in _ATTENTION:
        return _attention_p(node)
    return _rnn_p(node) if name in _RNN else _dropout_p(node)


def _where(node) -> str:
    """The model's own source line that made ``node`` (torch.export's stack trace), or ''."""
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    files = [ln.strip() for ln in trace if ln.strip().startswith("File ")]
    own = [f for f in files if "/torch/" not in f and "/roam_tvm/" not in f]  # the model's, not nn.Linear's
    return f" ({(own or files)[-1]})" if files else ""


def check_random_ops(ep) -> None:
    """Warn about dropout imported as the identity; refuse random draws TVM cannot import.

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        The exported forward with its loss.

    Raises
    ------
    UnsupportedError
        The forward draws random numbers other than dropout's masks.
    """
    drops, draws = [], []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        name = _op(node)
        if name in _DROPOUT and (name == "bernoulli.p" or _dropout_p(node) > 0):
            drops.append(node)
        elif (name in _ATTENTION or name in _RNN) and _p(node) > 0:
            drops.append(node)
        elif name in _UNSUPPORTED:
            draws.append(node)
    if draws:
        first = draws[0]
        raise UnsupportedError(
            f"the forward draws random numbers ({len(draws)} op(s), e.g. aten.{_op(first)}"
            f"{_where(first)}): stochastic depth (drop_path), noise or sampling. A planned "
            "training step has no random draws here: turn them off for the import (Hugging "
            "Face: drop_path_rate=0.0; timm: drop_path_rate=0.0; your code: skip the draw when "
            "its probability is 0), or run that module in eval mode. Modules named *DropPath / "
            "StochasticDepth that skip their draw in eval mode are imported as the identity with a "
            "warning (drop_path.py); a draw written inline in a forward is not.")
    if drops:
        ps = sorted({round(_p(n), 4) for n in drops if _op(n) != "bernoulli.p"})
        warnings.warn(
            f"{len(drops)} dropout op(s) (p={ps or '?'}) are imported as the identity (TVM 0.27 "
            "has no random masks): the step is planned and runs WITHOUT dropout, and keeps no "
            "masks for the backward (PyTorch's step keeps one per dropout). For a faithful step "
            "set dropout to 0 (Hugging Face: hidden_dropout_prob / attention_probs_dropout_prob "
            "/ dropout / attention_dropout = 0.0; nn.LSTM / nn.GRU / nn.RNN: dropout=0.0).", RuntimeWarning,
            stacklevel=3)
