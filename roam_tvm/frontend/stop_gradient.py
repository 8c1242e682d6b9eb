"""Stop-gradient analysis: keep Relax ``Gradient`` off what has no derivative.

TVM 0.27's ``relax.transform.Gradient`` differentiates every binding that receives an
adjoint, and a binding receives one as soon as a consumer's gradient returns a partial for
it. So a value no parameter feeds (RoPE's ``arange`` positions, a causal mask, relative
position buckets) or one with no derivative (integers, booleans, ``argmax`` / ``topk``
indices, comparisons) is differentiated too, and the pass fails at the first such op
without a registered gradient (``arange``), or builds nonsense partials for integers.

The fix is done in two steps around ``Gradient``:

* :class:`ActiveVars` (analysis) finds the *active* bindings: those whose value carries
  floating-point data and reads a trainable parameter, or another active binding, through an
  op that has a derivative.
* :func:`insert_stop_gradients` (mutator) wraps every inactive binding var that an active
  binding reads in ``R.grad.no_grad``. Its gradient, registered here, is ``no_grad`` itself,
  which ``Gradient`` skips: nothing upstream of the wrapper gets an adjoint.
* :func:`remove_stop_gradients` (mutator) replaces the wrappers by what they wrap once
  ``Gradient`` has run, so the forward is what it was.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.op.grad import no_grad

_NO_GRAD = "relax.grad.no_grad"

# Ops whose output has no derivative with respect to any input, whatever its dtype
# (a float result of these is piecewise constant, or an index).
NON_DIFFERENTIABLE = frozenset({
    "relax.arange", "relax.argmax", "relax.argmin", "relax.argsort", "relax.ceil",
    "relax.floor", "relax.round", "relax.sign", "relax.trunc", "relax.floor_divide",
    "relax.floor_mod", "relax.mod", "relax.one_hot", "relax.shape_of", "relax.zeros_like",
    "relax.ones_like", "relax.full_like", "relax.isfinite", "relax.isinf", "relax.isnan",
    "relax.bucketize", "relax.nonzero", "relax.unique", "relax.eye_like",
    _NO_GRAD,
})


def _is_float(ty) -> bool:
    if isinstance(ty, relax.TensorType):
        return str(ty.dtype).startswith(("float", "bfloat"))
    if isinstance(ty, relax.TupleType):
        return any(_is_float(f) for f in ty.fields)
    return False


def _op_name(value):
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def _dataflow_bindings(func: relax.Function):
    out = []
    for block in func.body.blocks:
        out.extend(block.bindings)
    return out


class ActiveVars:
    """The binding vars of ``func`` that depend differentiably on ``params``.

    Parameters
    ----------
    func : relax.Function
        The forward function (one dataflow block).
    params : list of relax.Var
        The trainable parameters (``Gradient``'s ``require_grads``).
    """

    def __init__(self, func: relax.Function, params):
        self.active: set = set(params)
        self.bound: set = set()
        for b in _dataflow_bindings(func):
            self.bound.add(b.var)
            if self._is_active(b):
                self.active.add(b.var)

    def _is_active(self, binding) -> bool:
        if not _is_float(binding.var.ty):
            return False
        if _op_name(binding.value) in NON_DIFFERENTIABLE:
            return False
        return any(v in self.active for v in relax.analysis.free_vars(binding.value))

    def needs_stop(self, var) -> bool:
        """An inactive var bound in the function (not a parameter of it)."""
        return var in self.bound and var not in self.active


@relax.expr_functor.mutator
class _StopInserter(relax.PyExprMutator):
    """Wrap each inactive bound var read by an active binding in ``R.grad.no_grad``."""

    def __init__(self, info: ActiveVars, mod=None):
        super().__init__(mod)
        self.info = info
        self.stopped: dict = {}
        self.in_active = False

    def visit_var_binding_(self, binding):
        self.in_active = binding.var in self.info.active
        value = self.visit_expr(binding.value)
        self.in_active = False
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))

    def _use(self, var):
        if not (self.in_active and self.info.needs_stop(var)):
            return var
        if var not in self.stopped:
            self.stopped[var] = self.builder_.emit(no_grad(var), name_hint=f"{var.name}_sg")
        return self.stopped[var]

    def visit_var_(self, var):
        return self._use(var)

    def visit_dataflow_var_(self, var):
        return self._use(var)


def insert_stop_gradients(func: relax.Function, params) -> relax.Function:
    """``func`` with ``R.grad.no_grad`` around every inactive value an active binding reads.

    Parameters
    ----------
    func : relax.Function
        The forward function (one dataflow block, normalised).
    params : list of relax.Var
        The trainable parameters.

    Returns
    -------
    relax.Function
        The same computation; ``Gradient`` then only visits active bindings.
    """
    info = ActiveVars(func, params)
    new_body = _StopInserter(info).visit_expr(func.body)
    return relax.Function(func.params, new_body, func.ret_ty, func.is_pure, func.attrs)


@relax.expr_functor.mutator
class _StopRemover(relax.PyExprMutator):
    """Drop ``x = R.grad.no_grad(y)`` bindings and read ``y`` wherever ``x`` was read."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.alias: dict = {}

    def visit_var_binding_(self, binding):
        if _op_name(binding.value) == _NO_GRAD:
            self.alias[binding.var] = self.visit_expr(binding.value.args[0])
            return
        super().visit_var_binding_(binding)

    def visit_var_(self, var):
        return self.alias.get(var, var)

    def visit_dataflow_var_(self, var):
        return self.alias.get(var, var)


def remove_stop_gradients(func: relax.Function) -> relax.Function:
    """``func`` without the ``R.grad.no_grad`` wrappers of :func:`insert_stop_gradients`."""
    new_body = _StopRemover().visit_expr(func.body)
    return relax.Function(func.params, new_body, func.ret_ty, func.is_pure, func.attrs)


def _no_grad_grad(orig_var, orig_call, output_grad, ctx):
    # a stop-gradient passes nothing back; Gradient skips a no_grad partial
    return [no_grad(orig_call.args[0])]


GRADS = {_NO_GRAD: _no_grad_grad}
