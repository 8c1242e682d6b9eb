"""Cross-entropy's picked log-probability as ``x[target] - logsumexp(x)``, before autodiff.

``F.cross_entropy`` exports as ``log_softmax`` followed by ``gather`` at the targets. Relax
``Gradient`` then keeps the log-probabilities for ``log_softmax``'s backward, and that
backward, ``g - exp(y) * sum(g)``, reads the gathered gradient ``g`` (a class-sized tensor)
through a reduction, so three class-sized tensors are live together: ``y``, ``g`` and the
result. PyTorch keeps the same three (``_log_softmax``, ``nll_loss_backward``,
``_log_softmax_backward_data``). For a language model's vocabulary they are the largest
tensors of the step.

Where the log-probabilities are read only by that gather, and the gather takes one class
per row, the same value is computed as ``gather(x, t) - (m + log(sum(exp(x - m))))`` with
``m = max(x)`` held constant (its gradient cancels). Its gradient,
``where(iota == t, g, 0) - exp(x - m) * g / sum``, is elementwise given the saved
``exp(x - m)`` and row sums, so it fuses into one kernel: two class-sized tensors live
where there were three. Same function; rounding differs in the last bits.
"""
from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.dpl import is_op, rewrite_call, wildcard
from tvm.relax.op.grad import no_grad


def _uses(func: relax.Function) -> dict:
    """How many times each bound value (by identity) is read through its variable."""
    bound = {}
    counts: dict = {}

    @relax.expr_functor.visitor
    class _Count(relax.expr_functor.PyExprVisitor):
        def visit_var_binding_(self, binding):
            bound[binding.var] = binding.value
            self.visit_expr(binding.value)

        def visit_var_(self, var):
            counts[var] = counts.get(var, 0) + 1

        def visit_dataflow_var_(self, var):
            counts[var] = counts.get(var, 0) + 1

    _Count().visit_expr(func)
    return {value: counts.get(var, 0) for var, value in bound.items()}


def _static(expr):
    values = getattr(getattr(expr.ty, "shape", None), "values", None)
    try:
        return [int(v) for v in values] if values is not None else None
    except TypeError:
        return None


def _one_per_row(logits, index, axis: int) -> bool:
    shape, idx = _static(logits), _static(index)
    if shape is None or idx is None or len(shape) != len(idx):
        return False
    return idx[axis] == 1 and all(a == b for d, (a, b) in enumerate(zip(shape, idx)) if d != axis)


def fuse_cross_entropy(func: relax.Function) -> relax.Function:
    """``func`` with each single-use ``gather_elements(log_softmax(x), t)`` rewritten as
    ``gather_elements(x, t) - logsumexp(x)`` (see the module docstring)."""
    x, index = wildcard(), wildcard()
    lsm = is_op("relax.nn.log_softmax")(x)
    pattern = is_op("relax.gather_elements")(lsm, index)
    uses = _uses(func)

    def rewrite(expr, matches):
        call = matches[lsm]
        logits = matches[x]
        ndim = len(_static(logits) or [])
        if not ndim or str(logits.ty.dtype) not in ("float32", "float64"):
            return expr  # fp16/bf16 logits keep log_softmax (its kernel accumulates in fp32)
        axis = int(call.attrs.axis) % ndim
        if int(expr.attrs.axis) % ndim != axis or uses.get(call, 2) != 1:
            return expr
        if not _one_per_row(logits, matches[index], axis):
            return expr
        peak = R.max(no_grad(logits), axis=[axis], keepdims=True)  # a constant shift
        sum_exp = R.sum(R.exp(R.subtract(logits, peak)), axis=[axis], keepdims=True)
        lse = R.add(R.log(sum_exp), peak)
        return R.subtract(R.gather_elements(logits, matches[index], axis=axis), lse)

    return rewrite_call(pattern, rewrite, func)
