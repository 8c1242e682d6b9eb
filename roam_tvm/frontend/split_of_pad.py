"""A split of a zero pad is split on the pad's core: pieces in the padding are zero fills.

The gradient of a read of one step (``out[:, -1]``, ``out[:, 0]``: the last step of an RNN's
output, a classifier token) is a zero pad of the step's gradient to the whole sequence
(:mod:`.grad_select`). When the sequence was stacked from per-step values (an unrolled RNN's
output), its gradient is then transposed and split back into the steps (and, for a
bidirectional RNN, first into the two directions). Each split is a kernel that copies the
whole padded tensor into pieces, so the padded tensor and all its pieces are live at once,
twice over for two directions: a transient of several sequence-sized tensors in the
backward where only one step's gradient is not zero.

``split_pads`` rewrites ``split(pad(x))`` and ``split(permute_dims(pad(x)))`` (zero
constant pad, static shapes) into its pieces directly: a piece that lies in the padding is
``zeros`` (filled where it is used), a piece that covers part of ``x`` is a pad of that
slice of ``x`` (transposed first where the split read a transpose). Tuple items of a
rewritten split are followed, so a split of a piece is rewritten too. The values are the
same: pieces of a zero pad are zeros or the core's elements at the same positions.
"""
from __future__ import annotations

from typing import Optional

import tvm
from tvm import relax
from tvm.relax import op as R

from .relax_shapes import scalar_value, static_shape
from .relax_walk import op_name


def _zero_pad(call) -> bool:
    if op_name(call) != "relax.nn.pad" or str(call.attrs.pad_mode) != "constant":
        return False
    value = call.attrs.pad_value if hasattr(call.attrs, "pad_value") else None
    if value is None and len(call.args) > 1:
        value = scalar_value(call.args[1])
    try:
        return float(value) == 0.0
    except (TypeError, ValueError):
        return False


def _split_bounds(call, extent: int) -> Optional[list[tuple[int, int]]]:
    """[start, end) of each piece of ``split`` along its axis of ``extent`` elements."""
    ios = call.attrs.indices_or_sections
    if isinstance(ios, (int, tvm.tirx.IntImm)):
        n = int(ios)
        if n <= 0 or extent % n:
            return None
        step = extent // n
        return [(i * step, (i + 1) * step) for i in range(n)]
    cuts = [0] + [int(i) for i in ios] + [extent]
    if any(b < a for a, b in zip(cuts, cuts[1:])):
        return None
    return list(zip(cuts, cuts[1:]))


@relax.expr_functor.mutator
class _SplitPads(relax.PyExprMutator):
    def _padded(self, expr):
        """(core, widths) of the zero pad ``expr`` is bound to (through a transpose,
        tuple items of rewritten splits), with ``core`` transposed as ``expr``; else None."""
        while isinstance(expr, relax.Var):
            bound = self.lookup_binding(expr)
            if bound is None:
                return None
            if isinstance(bound, relax.TupleGetItem):
                tup = bound.tuple_value
                tup = self.lookup_binding(tup) if isinstance(tup, relax.Var) else tup
                if not isinstance(tup, relax.Tuple):
                    return None
                expr = tup.fields[bound.index]
                continue
            if _zero_pad(bound):
                return bound.args[0], [int(w) for w in bound.attrs.pad_width]
            if op_name(bound) == "relax.permute_dims":
                inner = self._padded(bound.args[0])
                if inner is None:
                    return None
                core, widths = inner
                nd = len(widths) // 2
                axes = (list(range(nd - 1, -1, -1)) if bound.attrs.axes is None
                        else [int(a) for a in bound.attrs.axes])
                core = self.builder_.emit(R.permute_dims(core, axes))
                return core, [w for a in axes for w in widths[2 * a:2 * a + 2]]
            return None
        return None

    def visit_call_(self, call):  # noqa: N802 (TVM's visitor names)
        call = super().visit_call_(call)
        if op_name(call) != "relax.split" or not isinstance(call.args[0], relax.Var):
            return call
        try:
            shape = static_shape(call.args[0])
        except (TypeError, ValueError):
            return call
        found = self._padded(call.args[0])
        if found is None:
            return call
        core, widths = found
        try:
            core_shape = static_shape(core)
        except (TypeError, ValueError):
            return call
        ax = int(call.attrs.axis) % len(shape)
        bounds = _split_bounds(call, shape[ax])
        if bounds is None:
            return call
        lo, n = widths[2 * ax], core_shape[ax]
        dtype = str(call.args[0].ty.dtype)
        pieces = []
        for s, e in bounds:
            pshape = list(shape)
            pshape[ax] = e - s
            a, b = max(s, lo), min(e, lo + n)
            if a >= b:  # wholly in the padding
                pieces.append(self.builder_.emit(R.zeros(pshape, dtype)))
                continue
            sub = core if (a, b) == (lo, lo + n) else self.builder_.emit(
                R.strided_slice(core, axes=[ax], begin=[a - lo], end=[b - lo]))
            pw = list(widths)
            pw[2 * ax], pw[2 * ax + 1] = a - s, e - b
            pieces.append(sub if not any(pw) else self.builder_.emit(
                R.nn.pad(sub, pw, pad_mode="constant", pad_value=0.0)))
        return relax.Tuple(pieces)


def split_pads(func: relax.Function) -> relax.Function:
    """``func`` with splits of zero pads rewritten into their pieces (see the module docstring);
    the pads and transposes no piece reads any more are left for dead-code elimination."""
    return relax.analysis.remove_all_unused(_SplitPads().visit_expr(func))
