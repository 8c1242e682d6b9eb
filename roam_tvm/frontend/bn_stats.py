"""BatchNorm running statistics as states of the step: the forward returns each batch's
mean and variance, which the step folds into the running statistics in place."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tvm import relax

from .errors import UnsupportedError
from .relax_walk import attrs_dict, bindings, op_name, resolve


@dataclass
class BNSpec:
    """A BatchNorm layer whose running statistics are states of the step."""

    name: str            # module path, e.g. "layer1.0.bn1"
    momentum: float
    track_count: bool = True  # whether ``num_batches_tracked`` exists


def _forward_returns(func: relax.Function, binds: list, n_carry: int) -> list:
    """The forward's return values: ``[loss]``, or ``[loss, *new carried states]``."""
    ret = func.body.body
    if not n_carry:
        return [ret]
    tup = resolve(ret, {b.var: b.value for b in binds})
    if not isinstance(tup, relax.Tuple) or len(tup.fields) != 1 + n_carry:
        raise UnsupportedError(f"the forward must return (loss, {n_carry} updated states)")
    return list(tup.fields)


def _emit_batch_stats(bb: relax.BlockBuilder, bn_call: relax.Call) -> tuple:
    """Emit the batch mean and biased variance of a batch_norm's input.

    Returns
    -------
    (mean, var, count, dtype)
        The two emitted vars, how many elements each statistic averages, and the dtype.
    """
    x = bn_call.args[0]
    ndim = x.ty.ndim
    axis = int(bn_call.attrs.axis) % ndim
    red = [i for i in range(ndim) if i != axis]
    shape = [int(s) for s in x.ty.shape.values]
    count = int(np.prod([shape[i] for i in red]))
    mean = bb.emit(relax.op.mean(x, axis=red))
    var = bb.emit(relax.op.variance(x, axis=red))
    return mean, var, count, str(x.ty.dtype)


def add_bn_stat_outputs(func: relax.Function, bn_specs: list,
                        n_carry: int = 0) -> tuple[relax.Function, list]:
    """Make the forward return ``(loss, *carried, mean_0, var_0, ...)`` for each training batch_norm.

    The batch mean and the biased variance of each BatchNorm input are computed right
    after the batch_norm binding; the step uses them to update running stats in place.

    Parameters
    ----------
    func : relax.Function
        The forward, returning the loss (or ``(loss, *carried)`` with ``n_carry`` states).
    bn_specs : list of BNSpec
        The BatchNorm modules, in the order their ops appear in ``func``.
    n_carry : int
        How many updated states the forward returns after the loss.

    Returns
    -------
    (relax.Function, list)
        The new forward (its return value a Tuple expression, as ``Gradient``'s
        ``target_index`` needs) and ``(spec, count, dtype)`` for each BatchNorm.
    """
    binds = bindings(func)
    bns = [b for b in binds if op_name(b.value) == "relax.nn.batch_norm"
           and bool(b.value.attrs.training)] if bn_specs or not n_carry else []
    if not bns and not n_carry:
        return func, []
    if len(bns) != len(bn_specs):
        raise UnsupportedError(
            f"found {len(bns)} training batch_norm ops but {len(bn_specs)} BatchNorm modules "
            "with running stats; cannot match running statistics to ops")
    rets = _forward_returns(func, binds, n_carry)
    bb = relax.BlockBuilder()
    info, stats = [], []
    with bb.function("fwd", list(func.params), attrs=attrs_dict(func), pure=True):
        with bb.dataflow():
            for b in binds:
                bb.emit_normalized(b)
                if b in bns or any(b.same_as(x) for x in bns):
                    mean, var, count, dtype = _emit_batch_stats(bb, b.value)
                    stats += [mean, var]
                    info.append((bn_specs[len(info)], count, dtype))
            outs = [bb.emit_output(e) for e in rets + stats]
        # Gradient's target_index needs a Tuple *expression* as the return value
        bb.emit_func_output(relax.Tuple(outs))
    return bb.get()["fwd"], info
