"""Fold a model's own zero fills: a product with zeros is zeros, a sum with zeros is the other term.

An RNN that is not given an initial state starts from ``zeros`` (``h_0``, and an LSTM's
``c_0``). Its first step multiplies that fill by the recurrent weight, and the backward
multiplies it again: the weight's gradient sums one ``matmul(h_0^T, d_gates_0)`` per
sequence, a product of zeros that needs ``h_0`` built in the backward (a ``B x H`` fill)
and a kernel per gate, at the end of the backward, where the step's peak is. Autodiff also
starts many adjoints as ``add(zeros, g)`` (a split's gradient, where only one output has
one).

``fold_zero_fills`` follows where a zero fill goes and rewrites, exactly:

- ``matmul(z, w)``, ``matmul(w, z)``, ``multiply(z, w)``: ``zeros`` of the result's shape;
- ``add(z, x)``, ``add(x, z)``, ``subtract(x, z)`` of ``x``'s own shape and dtype: ``x``;
- ``subtract(z, x)`` of ``x``'s shape and dtype: ``negative(x)``;

where ``z`` is ``zeros``, ``full(.., 0)``, ``zeros_like``, or a view, slice, cast or
broadcast of one (itself zeros). Run on the forward before ``Gradient``, the first step's
product with ``h_0`` is gone, so no gradient term is derived from it; run on the adjoint,
the sums drop their zero terms. The values are the same, save that IEEE ``0 * inf`` is NaN
where the folded product is 0 (a weight that is already inf).
"""
from __future__ import annotations

import tvm_ffi
from tvm import relax
from tvm.relax import op as R

from .relax_shapes import scalar_value
from .relax_walk import bindings, op_name

#: ops whose output is zeros when their (first) input is
_KEEPS_ZERO = frozenset({"relax.reshape", "relax.permute_dims", "relax.squeeze", "relax.expand_dims",
                         "relax.flatten", "relax.strided_slice", "relax.broadcast_to", "relax.astype"})
#: products: zeros when either operand is
_PRODUCTS = frozenset({"relax.matmul", "relax.multiply"})


def is_zero_fill(value) -> bool:
    """``value`` is ``zeros``, ``zeros_like``, or ``full`` / ``full_like`` of 0."""
    name = op_name(value)
    if name in ("relax.zeros", "relax.zeros_like"):
        return True
    if name in ("relax.full", "relax.full_like"):
        return scalar_value(value.args[1]) == 0.0
    return False


def _same_type(a, b) -> bool:
    """``a`` and ``b`` are tensors of one known shape and dtype."""
    ta, tb = getattr(a, "ty", None), getattr(b, "ty", None)
    if not isinstance(ta, relax.TensorType) or not isinstance(tb, relax.TensorType):
        return False
    sa, sb = getattr(ta.shape, "values", None), getattr(tb.shape, "values", None)
    if sa is None or sb is None or str(ta.dtype) != str(tb.dtype):
        return False
    return tvm_ffi.structural_equal(list(sa), list(sb))


class ZeroFolds:
    """What ``fold_zero_fills`` rewrites in one function (the analysis half).

    Attributes
    ----------
    zero : set of relax.Var
        Vars that hold zeros (fills and what keeps them zero, folded products).
    to_zeros : set of relax.Var
        Bindings whose product becomes a ``zeros`` fill.
    to_alias : dict
        var -> the term it equals (a sum with zeros).
    to_negative : dict
        var -> ``x`` where the var is ``0 - x``.
    """

    def __init__(self, func: relax.Function):
        self.zero: set = set()
        self.to_zeros: set = set()
        self.to_alias: dict = {}
        self.to_negative: dict = {}
        for b in bindings(func):
            if isinstance(b, relax.VarBinding):
                self._visit(b.var, b.value)

    def _is_zero(self, expr) -> bool:
        return isinstance(expr, relax.Var) and expr in self.zero

    def _visit(self, var, value) -> None:
        name = op_name(value)
        if name is None or not isinstance(getattr(var, "ty", None), relax.TensorType):
            return
        if is_zero_fill(value):
            self.zero.add(var)
        elif name in _KEEPS_ZERO and self._is_zero(value.args[0]):
            self.zero.add(var)
        elif name in _PRODUCTS and any(self._is_zero(a) for a in value.args[:2]) \
                and getattr(var.ty.shape, "values", None) is not None:
            self.zero.add(var)
            self.to_zeros.add(var)
        elif name in ("relax.add", "relax.subtract"):
            a, b = value.args[:2]
            if self._is_zero(a) and self._is_zero(b):
                return  # rare; left as it is
            if self._is_zero(b) and _same_type(a, var):
                self.to_alias[var] = a
            elif self._is_zero(a) and _same_type(b, var):
                if name == "relax.add":
                    self.to_alias[var] = b
                else:
                    self.to_negative[var] = b

    def __bool__(self) -> bool:
        return bool(self.to_zeros or self.to_alias or self.to_negative)


@relax.expr_functor.mutator
class _ApplyZeroFolds(relax.PyExprMutator):
    def __init__(self, folds: ZeroFolds):
        super().__init__()
        self.folds = folds

    def _rebind(self, var, expr) -> None:
        bb = self.builder_
        bb.emit_normalized(relax.VarBinding(var, bb.normalize(expr)))

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        var, folds = binding.var, self.folds
        if var in folds.to_zeros:
            self._rebind(var, R.zeros(var.ty.shape, var.ty.dtype))
        elif var in folds.to_negative:
            self._rebind(var, R.negative(self.visit_expr(folds.to_negative[var])))
        elif var in folds.to_alias:
            term = self.visit_expr(folds.to_alias[var])
            # a dataflow var may stand for the sum only inside the dataflow block
            if isinstance(term, relax.DataflowVar) and not isinstance(var, relax.DataflowVar):
                super().visit_var_binding_(binding)
            else:
                self.set_var_remap(var, term)
        else:
            super().visit_var_binding_(binding)


def fold_zero_fills(func: relax.Function) -> relax.Function:
    """``func`` with its products with zero fills folded to zeros and its sums with them to the
    other term (module docstring); unused bindings removed. Unchanged when there is none.

    Parameters
    ----------
    func : relax.Function
        A forward or an adjoint, with static or symbolic shapes.

    Returns
    -------
    relax.Function
    """
    folds = ZeroFolds(func)
    if not folds:
        return func
    return relax.analysis.remove_all_unused(_ApplyZeroFolds(folds).visit_expr(func))
