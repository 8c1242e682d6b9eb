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

A contribution that is a zero ``pad`` of a smaller tensor (the gradient of a slice: an RNN's
input projections are computed for all time steps at once and sliced per step) is added into
its slice of the accumulator only (``acc[b:b+k] += g``): the padded full-size copy, as large as
the accumulator and made once per time step, is never built. Adding the zeros elsewhere would
leave those elements unchanged, so the values are the same.

A contribution that is a matrix product is added into the accumulator by the product's own
kernel (:mod:`.matmul_accumulate`), so no product-sized temporary exists at all; the first
link of such a chain may then write into the fresh result of the call before it.

A link is rewritten only when it is safe to write into its accumulator: the accumulator is
the result of the previous add of the chain (so a fresh tensor, not a parameter or a view),
read by nothing else, and accumulator, contribution and sum have one static shape and dtype
(no broadcasting; an add of a constant 0 is not fresh: see ``_adds_zero``), and it
depends on the function's inputs (what is computed from constants
alone becomes a constant in FoldConstant, and a constant is never written).
"""
from __future__ import annotations

from typing import Dict, Optional, Set, Tuple

import numpy as np
import tvm
from tvm import relax

from .matmul_accumulate import matmul_accumulate_kernel, matmul_operands
from .optim import make_kernel
from .relax_shapes import static_shape

_ADD = "relax.add"
_PAD = "relax.nn.pad"
_OPAQUE = 8  # TVM's OpPatternKind::kOpaque


def _is_add(value) -> bool:
    return (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == _ADD and len(value.args) == 2)


def _zero_pad_offsets(value) -> Optional[Tuple[relax.Expr, Tuple[int, ...]]]:
    """``(data, per-axis leading offsets)`` when ``value`` is a zero ``pad``, else None."""
    if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
            and value.op.name == _PAD and len(value.args) == 1):
        return None
    attrs = value.attrs
    if str(attrs.pad_mode) != "constant" or float(attrs.pad_value) != 0.0:
        return None
    widths = [int(w) for w in attrs.pad_width]
    if any(w < 0 for w in widths):
        return None
    return value.args[0], tuple(widths[0::2])


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


#: An add to rewrite: index of its accumulator argument; for a padded contribution the
#: unpadded data and its offsets in the accumulator; for a matrix-product contribution
#: ``(layout, x, y)`` (None where the contribution is added as it is).
Accumulation = Tuple[int, Optional[Tuple[relax.Expr, Tuple[int, ...]]],
                     Optional[Tuple[str, relax.Expr, relax.Expr]]]


def _adds_zero(value) -> bool:
    """``x + 0`` (``sum()`` of a list of tensors starts with ``0 + t``): TVM's build turns its
    kernel, an identity once simplified, into a ``reshape`` view of ``x``, so the result is
    ``x`` itself, not a fresh tensor, and writing into it in place would change ``x``."""
    return _is_add(value) and any(
        isinstance(a, tvm.ir.Constant) and not np.any(a.value.numpy()) for a in value.args)


def _fresh(value) -> bool:
    """A call whose result is a new tensor: ``call_tir`` (not in place) or a matmul."""
    if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
        return False
    return value.op.name in ("relax.call_tir", "relax.matmul", _ADD) and not _adds_zero(value)


def find_accumulations(func: relax.Function,
                       mod: Optional[tvm.IRModule] = None) -> Dict[relax.Call, Accumulation]:
    """The adds of ``func`` to rewrite in place: the add call -> what to accumulate where.

    ``mod`` (the module holding ``func``) lets products computed by tagged kernels be
    recognised; without it only ``relax.matmul`` products are.
    """
    counts = _use_counts(func)
    dependent = _input_dependent(func)
    mod = mod if mod is not None else tvm.IRModule()
    adds, pads, products, fresh, at = {}, {}, {}, set(), {}
    for block in func.body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            continue
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding):
                continue
            at[b.var] = len(at)
            if _is_add(b.value) and not _adds_zero(b.value):
                adds[b.var] = b.value
            elif _zero_pad_offsets(b.value) is not None:
                pads[b.var] = _zero_pad_offsets(b.value)
            elif matmul_operands(b.value, mod) is not None:
                products[b.var] = matmul_operands(b.value, mod)
            if _fresh(b.value):
                fresh.add(b.var)
    chosen: Dict[relax.Call, Accumulation] = {}
    for var, call in adds.items():
        key = _tensor_key(var)
        if key is None or any(_tensor_key(a) != key for a in call.args):
            continue
        for i, acc in enumerate(call.args):
            g = call.args[1 - i]
            single = counts.get(g, 0) == 1 and g is not acc
            product = products.get(g) if single else None
            if product is not None and acc in product[1:]:
                product = None  # the product reads the accumulator it would write
            # a fresh accumulator bound after the product would make the product wait for it
            writable = acc in adds or (product is not None and acc in fresh and _before(at, acc, g))
            if writable and counts.get(acc, 0) == 1 and acc in dependent:
                piece = pads.get(g) if single else None
                if piece is not None and _tensor_key(piece[0]) is None:
                    piece = None
                chosen[call] = (i, piece, product)
                break
        else:
            i = _early_product(call, adds, products, fresh, counts, dependent, at)
            if i is not None:
                chosen[call] = (i, None, None)
    return chosen


def _before(at: Dict[relax.Var, int], a, b) -> bool:
    """``a`` is bound before ``b`` in the dataflow blocks (a parameter counts as first)."""
    return at.get(a, -1) < at.get(b, -1)


def _early_product(call: relax.Call, adds, products, fresh, counts, dependent, at) -> Optional[int]:
    """The argument index of the accumulator for a first link ``s = p + g`` whose product ``p``
    is bound before ``g``: ``g`` is then added into ``p``'s fresh result in place.

    Fused, ``p + g`` is the product's epilogue, so the product runs only once ``g`` exists, its
    operands alive until then: a tied embedding's product with the vocabulary-sized logits
    gradient, added to the embedding lookup's gradient at the very end of the backward, would
    keep that gradient alive through the whole backward. In place, the product runs as soon as
    its operands exist (PyTorch's autograd also adds a later contribution into the first).
    """
    for i, p in enumerate(call.args):
        g = call.args[1 - i]
        if (p in products and p in fresh and p not in adds and g not in adds and g is not p
                and counts.get(p, 0) == 1 and counts.get(g, 0) == 1 and p in dependent
                and _before(at, p, g) and p in at and g in at):
            return i
    return None


def slice_accumulate_kernel(acc_shape: Tuple[int, ...], g_shape: Tuple[int, ...],
                            offsets: Tuple[int, ...], dtype: str) -> Tuple[str, tvm.tirx.PrimFunc]:
    """``acc[o0 + v0, o1 + v1, ...] += g[v0, v1, ...]`` in place, static shapes."""
    from tvm.script import tirx as T
    from tvm.script.parser import parse

    ndim = len(acc_shape)
    name = (f"slice_accumulate_{dtype}_{'x'.join(map(str, g_shape))}_into_"
            f"{'x'.join(map(str, acc_shape))}_at_{'_'.join(map(str, offsets))}")
    idx = ", ".join(f"v{i}" for i in range(ndim))
    shifted = ", ".join(f"v{i} + {o}" if o else f"v{i}" for i, o in enumerate(offsets))
    loops = ", ".join(f"i{i}" for i in range(ndim))
    src = "\n".join([
        "@T.prim_func(private=True, s_tir=True)",
        f"def {name}(acc: T.Buffer({tuple(acc_shape)}, \"{dtype}\"), "
        f"g: T.Buffer({tuple(g_shape)}, \"{dtype}\")):",
        '    T.func_attr({"tirx.noalias": True})',
        f"    for {loops} in T.grid({', '.join(map(str, g_shape))}):",
        f"        with T.sblock(\"{name}\"):",
        f"            {idx} = T.axis.remap(\"{'S' * ndim}\", [{loops}])",
        f"            acc[{shifted}] = acc[{shifted}] + g[{idx}]",
    ]) + "\n"
    return name, parse(src, extra_vars={"T": T})


@relax.expr_functor.mutator
class _AccumulateMutator(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, chosen: Dict[relax.Call, Accumulation]):
        super().__init__(mod)
        self.chosen = chosen
        self.kernels: Dict[tuple, tvm.ir.GlobalVar] = {}

    def _kernel(self, ndim: int, dtype: str) -> tvm.ir.GlobalVar:
        if (ndim, dtype) not in self.kernels:
            name = f"accumulate_{dtype}_{ndim}d"
            func = make_kernel(name, ndim, dtype, ["acc", "g"], [],
                               lambda dt, idx: [f"acc[{idx}] = acc[{idx}] + g[{idx}]"])
            # opaque to FuseOps: fused into its neighbours, the chain would run as one kernel again
            func = func.with_attr("op_pattern", _OPAQUE)
            self.kernels[(ndim, dtype)] = self.builder_.add_func(func, name)
        return self.kernels[(ndim, dtype)]

    def _slice_kernel(self, acc_shape, g_shape, offsets, dtype) -> tvm.ir.GlobalVar:
        key = ("slice", acc_shape, g_shape, offsets, dtype)
        if key not in self.kernels:
            name, func = slice_accumulate_kernel(acc_shape, g_shape, offsets, dtype)
            self.kernels[key] = self.builder_.add_func(func.with_attr("op_pattern", _OPAQUE), name)
        return self.kernels[key]

    def _product_kernel(self, layout, x, y, acc_key) -> tvm.ir.GlobalVar:
        key = ("product", layout, _tensor_key(x), _tensor_key(y), acc_key)
        if key not in self.kernels:
            name, func = matmul_accumulate_kernel(layout, _tensor_key(x), _tensor_key(y), acc_key)
            self.kernels[key] = self.builder_.add_func(func.with_attr("op_pattern", _OPAQUE), name)
        return self.kernels[key]

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        plan = self.chosen.get(call)
        if plan is None:
            return super().visit_call_(call)
        acc_index, piece, product = plan
        acc = self.visit_expr(call.args[acc_index])
        shape, dtype = _tensor_key(call)
        if product is not None:  # the product's own call is left unused for DCE
            layout, x, y = product
            kernel = self._product_kernel(layout, x, y, (shape, dtype))
            args = [self.visit_expr(x), self.visit_expr(y), acc]
            return relax.op.call_tir_inplace(kernel, args, [2], call.ty)
        if piece is None:
            g = self.visit_expr(call.args[1 - acc_index])
            kernel = self._kernel(len(shape), dtype)
        else:  # the pad is left unused: dead-code elimination drops it
            data, offsets = piece
            g = self.visit_expr(data)
            kernel = self._slice_kernel(shape, _tensor_key(data)[0], offsets, dtype)
        return relax.op.call_tir_inplace(kernel, [acc, g], [0], call.ty)


@tvm.transform.module_pass(opt_level=0, name="AccumulateInPlace")
class AccumulateInPlace:
    """Rewrite every link after the first of a chain of same-shape adds into an in-place add.

    See the module docstring: gradients summed over many uses (an RNN's weights over its time
    steps) are accumulated as each contribution arrives instead of in one fused kernel at the
    end that keeps every contribution alive.
    """

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        plans = {gv: find_accumulations(f, mod) for gv, f in mod.functions.items()
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
