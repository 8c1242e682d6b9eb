"""LiftKernelScratch: kernel scratch becomes planned tensors.

A fused kernel's intermediates that lowering keeps whole become, on CPU targets,
workspace that the kernel requests at run time, outside every memory plan. This
pass runs after FuseTIR and before memory planning (RoamOrder, RoamLayout or
StaticPlanBlockMemory) and, per PrimFunc called through ``R.call_tir``:

1. removes the intermediates that are waste (``scratch_tir.shrink_intermediates``:
   inlined or compacted to one element, bit-identical results);
2. if the kernel still requests workspace for ``target``, turns the root-level
   buffers that lowering allocates whole into extra outputs of the call. They
   are then ordinary tensors that die right after the call, placed by the memory
   planner like any other.

Only CPU targets are rewritten. On GPU targets the schedule (dlight) decides what
stays in global memory, and it runs after this point; a GPU module is returned
unchanged (its scratch is still counted by ``report.scratch``).
"""
from __future__ import annotations

import tvm
from tvm import relax, tirx
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..report.scratch import kernel_scratch
from .scratch_tir import lift_intermediates, root_intermediates, shrink_intermediates, whole_root_allocations

__all__ = ["LiftKernelScratch", "rewrite_kernels"]

_CALL_TIR = tvm.ir.Op.get("relax.call_tir")


def _call_sites(mod: tvm.IRModule) -> tuple[dict, set]:
    """PrimFunc GlobalVar name -> (inputs, outputs) of its ``call_tir`` sites, and the
    names that are used any other way (those are left alone)."""
    shapes: dict[str, set] = {}
    other: set[str] = set()

    def visit(node):
        if not isinstance(node, relax.Call):
            return
        if node.op.same_as(_CALL_TIR) and len(node.args) == 2:
            out = node.ty_args[0]
            n_out = len(out.fields) if isinstance(out, relax.TupleType) else 1
            shapes.setdefault(node.args[0].name_hint, set()).add((len(node.args[1].fields), n_out))
            return
        for arg in node.args:
            if isinstance(arg, tvm.ir.GlobalVar):
                other.add(arg.name_hint)
        if isinstance(node.op, tvm.ir.GlobalVar):
            other.add(node.op.name_hint)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return shapes, other


def rewrite_kernels(mod: tvm.IRModule, target) -> tuple[dict, dict]:
    """Shrink every PrimFunc called by ``call_tir``; lift what still requests workspace.

    Returns (name -> new PrimFunc, name -> lifted buffers) for the kernels that changed.
    """
    shapes, other = _call_sites(mod)
    new_funcs: dict[str, tirx.PrimFunc] = {}
    lifted: dict[str, list] = {}
    for gv, func in mod.functions.items():
        name = gv.name_hint
        if not isinstance(func, tirx.PrimFunc) or name in other or len(shapes.get(name, ())) != 1:
            continue
        if not root_intermediates(func):
            continue
        shrunk = shrink_intermediates(func)
        scratch = kernel_scratch(tvm.IRModule({gv: shrunk}), target)[name]
        if scratch.error is not None or not scratch.requests:
            if shrunk is not func and scratch.error is None:
                new_funcs[name] = shrunk
            continue
        whole = whole_root_allocations(shrunk)
        bufs = [b for b in root_intermediates(shrunk) if b.name in whole]
        names = [b.name for b in root_intermediates(shrunk)]
        if not bufs or len(set(names)) != len(names):  # ambiguous names: leave the kernel as it was
            if shrunk is not func:
                new_funcs[name] = shrunk
            continue
        n_in, n_out = next(iter(shapes[name]))
        if len(shrunk.params) != n_in + n_out:  # symbolic-shape arguments: not handled
            continue
        new_funcs[name] = lift_intermediates(shrunk, bufs, n_in + n_out)
        lifted[name] = bufs
    return new_funcs, lifted


def _tensor_type(buf) -> relax.TensorType:
    return relax.TensorType([int(d) for d in buf.shape], buf.dtype)


@mutator
class _CallRewriter(PyExprMutator):
    """Each ``call_tir`` of a lifted kernel returns its scratch too; the old var keeps its value."""

    def __init__(self, mod: tvm.IRModule, lifted: dict) -> None:
        super().__init__(mod)
        self.lifted = lifted

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        call = binding.value
        if not (isinstance(call, relax.Call) and call.op.same_as(_CALL_TIR)
                and call.args[0].name_hint in self.lifted):
            super().visit_var_binding_(binding)
            return
        new_gv, bufs = self.lifted[call.args[0].name_hint]
        call = self.visit_expr(call)
        out = call.ty_args[0]
        single = not isinstance(out, relax.TupleType)
        outs = [out] if single else list(out.fields)
        extra = [_tensor_type(b) for b in bufs]
        new_call = relax.call_tir(new_gv, call.args[1], outs + extra)
        with_scratch = self.builder_.emit(new_call, name_hint=f"{binding.var.name}_with_scratch")
        if single:
            value = relax.TupleGetItem(with_scratch, 0)
        else:
            value = relax.Tuple([relax.TupleGetItem(with_scratch, i) for i in range(len(outs))])
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))


@tvm.transform.module_pass(opt_level=0, name="LiftKernelScratch")
class LiftKernelScratch:
    """Kernel scratch becomes planned tensors (see the module notes).

    Parameters
    ----------
    target : str or Target, optional
        The target being built (default: ``Target.current()`` when the pass runs).
        GPU targets are left unchanged.
    """

    def __init__(self, target=None) -> None:
        self.target = target

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        target = self.target or tvm.target.Target.current()
        if target is None:
            raise ValueError("LiftKernelScratch needs a target: pass target= or run it inside `with Target(...)`")
        target = tvm.target.Target(target) if isinstance(target, str) else target
        if "gpu" in target.keys:
            return mod
        new_funcs, lifted = rewrite_kernels(mod, target)
        if not new_funcs:
            return mod
        # a lifted kernel has a new signature, so a new GlobalVar (added below)
        kept = {gv: new_funcs.get(gv.name_hint, func) for gv, func in mod.functions.items()
                if gv.name_hint not in lifted}
        out = tvm.IRModule(kept, attrs=mod.attrs, global_infos=mod.global_infos)
        if not lifted:
            return out
        rewriter = _CallRewriter(out, {})
        for name in lifted:
            new_gv = rewriter.builder_.add_func(new_funcs[name], name)
            rewriter.lifted[name] = (new_gv, lifted[name])
        for gv, func in out.functions.items():
            if isinstance(func, relax.Function):
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        return rewriter.builder_.get()
