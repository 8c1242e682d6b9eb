"""In-place calls on Relax: which ``call_tir`` ops may overwrite an input, and the rewritten call.

``inplace_candidates`` asks :mod:`roam_tvm.remat.inplace_tir` about each
``R.call_tir`` op of an extracted graph and gives the planner its allowed
(input tensor, output tensor) pairs; the planner decides which are used (the
input must die there). ``InplaceCalls`` turns a call the plan writes in place
into ``R.call_tir_inplace`` of a kernel derived from the original (the
output parameter removed, its accesses redirected to the input), added to the
module once per (kernel, pairs).
"""
from __future__ import annotations

import tvm
from tvm import relax, tirx

from ..passes.extract import RelaxGraph
from .inplace_tir import inplace_kernel, inplace_pairs

__all__ = ["inplace_candidates", "InplaceCalls"]


def _call_tir(rg: RelaxGraph, o: int) -> relax.Call | None:
    """The ``R.call_tir`` of op ``o`` when it is one binding calling a PrimFunc with a tuple of args."""
    bindings = rg.op_bindings[o]
    if len(bindings) != 1:
        return None
    bi, i = bindings[0]
    b = rg.func.body.blocks[bi].bindings[i]
    call = getattr(b, "value", None)
    if (not isinstance(call, relax.Call) or not isinstance(call.op, tvm.ir.Op) or call.op.name != "relax.call_tir"
            or len(call.args) != 2 or not isinstance(call.args[0], tvm.ir.GlobalVar)
            or not isinstance(call.args[1], relax.Tuple)):
        return None
    return call


def _arg_tensor(rg: RelaxGraph, arg) -> int | None:
    ids = rg.var_tensors.get(arg) if isinstance(arg, relax.Var) else None
    return ids[0] if ids and len(ids) == 1 and isinstance(arg.ty, relax.TensorType) else None


def inplace_candidates(mod: tvm.IRModule, rg: RelaxGraph, parallel: bool = False) -> dict[int, list[tuple[int, int]]]:
    """Op id -> (input tensor, output tensor) pairs its kernel is proven safe for (see module notes).

    An argument passed twice is never overwritten (the kernel would see the
    write through its other parameter). ``parallel``: the kernels will be scheduled
    for a GPU (``inplace_tir.inplace_safe``'s stricter rule).
    """
    cache: dict[str, list[tuple[int, int]]] = {}
    out: dict[int, list[tuple[int, int]]] = {}
    g = rg.graph
    for op in g.ops:
        if op.kind != "compute":
            continue
        call = _call_tir(rg, op.id)
        if call is None:
            continue
        gv, args = call.args[0], list(call.args[1].fields)
        func = mod[gv] if gv in mod.functions else None
        if not isinstance(func, tirx.PrimFunc) or len(func.params) != len(args) + len(op.outputs):
            continue
        if gv.name_hint not in cache:
            cache[gv.name_hint] = inplace_pairs(func, len(args), parallel)
        tensors = [_arg_tensor(rg, a) for a in args]
        pairs = []
        for m, k in cache[gv.name_hint]:
            x = tensors[k]
            if x is not None and tensors.count(x) == 1:
                pairs.append((x, op.outputs[m]))
        if pairs:
            out[op.id] = pairs
    return out


class InplaceCalls:
    """Rewrites planned ``call_tir`` bindings into ``call_tir_inplace`` and collects their kernels."""

    def __init__(self, mod: tvm.IRModule):
        self.mod = mod
        self.kernels: dict[str, tirx.PrimFunc] = {}
        self._gvs: dict[tuple, tvm.ir.GlobalVar] = {}
        self._names = {gv.name_hint for gv in mod.functions}
        self._bb = relax.BlockBuilder()  # gives each kernel's GlobalVar its function type

    def rewrite(self, call: relax.Call, pairs: list[tuple[int, int]]) -> relax.Call:
        """``call`` (a ``call_tir``) with output ``m`` written into argument ``k`` for each ``(m, k)``."""
        gv, args = call.args[0], list(call.args[1].fields)
        pairs = sorted((int(m), int(k)) for m, k in pairs)
        key = (gv.name_hint, tuple(pairs))
        if key not in self._gvs:
            name = f"{gv.name_hint}_inplace" + "".join(f"_o{m}i{k}" for m, k in pairs)
            while name in self._names:
                name += "_"
            self._names.add(name)
            self.kernels[name] = inplace_kernel(self.mod[gv], pairs, len(args), gv.name_hint)
            self._gvs[key] = self._bb.add_func(self.kernels[name], name)
        out_ty = call.ty_args[0]
        outs = list(out_ty.fields) if isinstance(out_ty, relax.TupleType) else [out_ty]
        where = dict(pairs)
        idx = [where.get(m, -1) for m in range(len(outs))]
        return relax.op.call_tir_inplace(self._gvs[key], args, idx, outs if len(outs) > 1 else outs[0])

    def add_to(self, mod: tvm.IRModule) -> None:
        """Add the kernels made so far to ``mod`` (in place)."""
        for key, gv in self._gvs.items():
            mod[gv] = self.kernels[gv.name_hint]
