"""Sum gradients as they arrive: chains of adds accumulate in place.

Relax ``Gradient`` sums the contributions to one adjoint in a chain, in the order they are
computed: ``s1 = g1 + g2; s2 = s1 + g3; s3 = s2 + g4``. A weight used at every time step of
an RNN gets one contribution per step, spread over the whole backward. TVM's ``FuseOps``
then fuses the whole chain of elementwise adds into the kernel of the first contribution
(``fused_matmul_add_add_add``), so that kernel runs only once the last contribution exists,
and every contribution, with the inputs of the first one, stays alive until then. PyTorch's
autograd adds each contribution into the gradient buffer as it arrives.

``AccumulateInPlace`` rewrites every link after the first of such a chain into an in-place
add (``R.call_tir_inplace``, which ``FuseOps`` leaves alone): ``s1 = g1 + g2`` allocates the
sum, ``s1 += g3`` and ``s1 += g4`` follow, each able to run as soon as its contribution is
computed. The association order of the sum is unchanged, so the values are the same.

A link is rewritten only when it is safe to write into its accumulator: the accumulator is
the result of the previous add of the chain (so a fresh tensor, not a parameter or a view),
read by nothing else, and accumulator, contribution and sum have one static shape and dtype
(no broadcasting), and it depends on the function's inputs (what is computed from constants
alone becomes a constant in FoldConstant, and a constant is never written).
"""
from __future__ import annotations

from typing import Dict, Optional, Set, Tuple

import tvm
from tvm import relax

from .optim import make_kernel
from .relax_shapes import static_shape

_ADD = "relax.add"
_OPAQUE = 8  # TVM's OpPatternKind::kOpaque


def _is_add(value) -> bool:
    return (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == _ADD and len(value.args) == 2)


def _tensor_key(expr) -> Optional[Tuple[Tuple[int, ...], str]]:
    """(static shape, dtype) of a tensor expression, or None when either is unknown."""
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    try:
        shape = tuple(static_shape(expr))
    except (TypeError, ValueError):  # a symbolic dim
        return None
    return shape, str(ty.dtype)


def _use_counts(func: relax.Function) -> Dict[relax.Var, int]:
    """In how many bindings (and the function's result) each variable is read."""
    counts: Dict[relax.Var, int] = {}

    def count_in(expr) -> None:
        seen = set()  # post_order_visit visits a shared node once, so count per binding

        def visit(node):
            if isinstance(node, relax.Var) and node not in seen:
                seen.add(node)
                counts[node] = counts.get(node, 0) + 1

        relax.analysis.post_order_visit(expr, visit)

    for block in func.body.blocks:
        for b in block.bindings:
            count_in(b.value)
    count_in(func.body.body)
    return counts


def _input_dependent(func: relax.Function) -> Set[relax.Var]:
    """Variables whose value depends on a parameter of ``func``.

    The others are computed from constants alone, and FoldConstant turns them into constants
    later in the pipeline: an in-place add must never write into one of those.
    """
    dependent: Set[relax.Var] = set(func.params)
    for block in func.body.blocks:
        for b in block.bindings:
            found = []
            relax.analysis.post_order_visit(
                b.value, lambda node: found.append(node) if node in dependent else None)
            if found:
                dependent.add(b.var)
    return dependent


def find_accumulations(func: relax.Function) -> Dict[relax.Call, int]:
    """The adds of ``func`` to rewrite in place: the add call -> index of its accumulator arg."""
    counts = _use_counts(func)
    dependent = _input_dependent(func)
    adds = {}
    for block in func.body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            continue
        for b in block.bindings:
            if isinstance(b, relax.VarBinding) and _is_add(b.value):
                adds[b.var] = b.value
    chosen: Dict[relax.Call, int] = {}
    for var, call in adds.items():
        key = _tensor_key(var)
        if key is None or any(_tensor_key(a) != key for a in call.args):
            continue
        for i, acc in enumerate(call.args):
            if acc in adds and counts.get(acc, 0) == 1 and acc in dependent:
                chosen[call] = i
                break
    return chosen


@relax.expr_functor.mutator
class _AccumulateMutator(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, chosen: Dict[relax.Call, int]):
        super().__init__(mod)
        self.chosen = chosen
        self.kernels: Dict[Tuple[int, str], tvm.ir.GlobalVar] = {}

    def _kernel(self, ndim: int, dtype: str) -> tvm.ir.GlobalVar:
        if (ndim, dtype) not in self.kernels:
            name = f"accumulate_{dtype}_{ndim}d"
            func = make_kernel(name, ndim, dtype, ["acc", "g"], [],
                               lambda dt, idx: [f"acc[{idx}] = acc[{idx}] + g[{idx}]"])
            # opaque to FuseOps: fused into its neighbours, the chain would run as one kernel again
            func = func.with_attr("op_pattern", _OPAQUE)
            self.kernels[(ndim, dtype)] = self.builder_.add_func(func, name)
        return self.kernels[(ndim, dtype)]

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        acc_index = self.chosen.get(call)
        if acc_index is None:
            return super().visit_call_(call)
        args = [self.visit_expr(a) for a in call.args]
        acc, g = args[acc_index], args[1 - acc_index]
        shape, dtype = _tensor_key(call)
        return relax.op.call_tir_inplace(self._kernel(len(shape), dtype), [acc, g], [0], call.ty)


@tvm.transform.module_pass(opt_level=0, name="AccumulateInPlace")
class AccumulateInPlace:
    """Rewrite every link after the first of a chain of same-shape adds into an in-place add.

    See the module docstring: gradients summed over many uses (an RNN's weights over its time
    steps) are accumulated as each contribution arrives instead of in one fused kernel at the
    end that keeps every contribution alive.
    """

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        plans = {gv: find_accumulations(f) for gv, f in mod.functions.items()
                 if isinstance(f, relax.Function)}
        if not any(plans.values()):
            return mod
        out = mod
        for gv, chosen in plans.items():
            if not chosen:
                continue
            mutator = _AccumulateMutator(out, chosen)
            func = mutator.visit_expr(out[gv])
            out = mutator.builder_.get()
            out[gv] = func
        return out
