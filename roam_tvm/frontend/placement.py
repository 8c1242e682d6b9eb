"""Optimizer placement: where each in-place update goes in ``train_step``, and emitting it.

Each parameter's update is placed right after the later of (a) the binding that makes its
gradient final and (b) the last binding that reads the parameter, directly or through a
view (reshape, squeeze, expand_dims, flatten, tuple). So the gradient dies right after its
update, and nothing after the update reads the old parameter. BatchNorm statistics are
folded in once the batch's mean and variance exist; a carried state is overwritten once its
new value exists and the old one is no longer read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import relax

from .block_updates import block_kernel
from .zero_fills import is_zero_fill
from .optim import Optimizer, bn_stats_kernel, copy_kernel, counter_kernel, optimizer_kernel
from .relax_shapes import shape_tuple
from .relax_walk import VIEW_OPS, free_vars, ident, op_name
from .signature import StepSignature


def last_reads(binds: list, roots: list) -> dict:
    """The index of the last binding that may read each root's memory.

    A binding that is a view of exactly one root (a var, tuple, tuple item or a view op)
    joins that root's alias set, so reading the view counts as reading the root.

    Parameters
    ----------
    binds : list of relax.Binding
        The adjoint's bindings, in program order.
    roots : list of relax.Var
        Parameters and carried states.

    Returns
    -------
    dict
        root var -> index into ``binds`` (-1 if no binding reads it).
    """
    alias_of = {p: p for p in roots}
    last = {p: -1 for p in roots}
    for i, b in enumerate(binds):
        v = b.value
        read = {alias_of[fv] for fv in free_vars(v) if fv in alias_of}
        for r in read:
            last[r] = i
        if len(read) == 1 and (isinstance(v, (relax.Var, relax.Tuple, relax.TupleGetItem))
                               or op_name(v) in VIEW_OPS):
            alias_of[b.var] = next(iter(read))
    return last


def update_points(binds: list, pvars: list, grads: list, cvars: list, carried_new: list,
                  stats: list) -> dict[int, list]:
    """Where each update goes: binding index -> ``[(kind, k), ...]`` (-1: before all).

    Parameters
    ----------
    binds : list of relax.Binding
        The adjoint's bindings, in program order.
    pvars, grads : list
        Trainable parameters and their gradients (vars or expressions), paired.
    cvars, carried_new : list
        Carried states and their new values, paired.
    stats : list
        Each BatchNorm's batch mean then variance.

    Returns
    -------
    dict
        Index of the binding after which to emit ``("param" | "bn" | "carry", k)``.
    """
    pos = {b.var: i for i, b in enumerate(binds)}
    last = last_reads(binds, list(pvars) + list(cvars))
    at: dict[int, list] = {}
    for k, (p, g) in enumerate(zip(pvars, grads)):
        gpos = pos.get(g, -1) if isinstance(g, relax.Var) else -1
        at.setdefault(max(gpos, last[p]), []).append(("param", k))
    for j in range(len(stats) // 2):
        m, v = stats[2 * j], stats[2 * j + 1]
        at.setdefault(max(pos.get(m, -1), pos.get(v, -1)), []).append(("bn", j))
    for j, (cv, new) in enumerate(zip(cvars, carried_new)):
        if new.same_as(cv):
            continue
        at.setdefault(max(pos.get(new, -1), last[cv]), []).append(("carry", j))
    return at


@dataclass
class UpdateEmitter:
    """Emits the ``R.call_tir_inplace`` updates into a function being built.

    Each update's outputs alias its inputs (nothing is allocated or copied); the emitted
    vars are collected in ``updated`` so the step can return them and DCE keeps them, in a
    fixed order whatever the program order: parameters (in parameter order), then carried
    states, then BatchNorm statistics.
    """

    bb: relax.BlockBuilder
    optimizer: Optimizer
    signature: StepSignature
    param_names: list
    pvars: list
    grads: list
    carry_names: list
    cvars: list
    carried_new: list
    bn_info: list
    stats: list
    _updates: list = field(default_factory=list)  # (sort key, var)
    update_deps: dict = field(default_factory=dict)  # update var name -> what it mutates
    # parameter index -> [(row block of its gradient, first row), ...] (block_updates.py)
    blocks: dict = field(default_factory=dict)
    _kernels: dict = field(default_factory=dict)

    def _kernel(self, key, make):
        # kernels are parsed from TVMScript: build each (kind, rank, dtype) once
        if key not in self._kernels:
            fname, prim = make()
            self._kernels[key] = self.bb.add_func(prim, fname)
        return self._kernels[key]

    @property
    def updated(self) -> list:
        """The update vars: parameters, then carried states, then BatchNorm statistics."""
        return [o for _, o in sorted(self._updates, key=lambda ko: ko[0])]

    def _emit(self, call: relax.Expr, name: str, mutates: str | None, key: tuple) -> None:
        o = self.bb.emit(call, name_hint=name)
        self._updates.append((key, o))
        if mutates is not None:
            self.update_deps[o.name] = mutates

    def emit(self, entries: list) -> None:
        """Emit the updates ``entries`` (from :func:`update_points`), in order."""
        for kind, k in entries:
            {"param": self._param, "carry": self._carry, "bn": self._bn}[kind](k)

    def _param(self, k: int) -> None:
        p, g, n = self.pvars[k], self.grads[k], self.param_names[k]
        dt, nd = str(p.ty.dtype), p.ty.ndim
        gv = self._kernel(("opt", nd, dt), lambda: optimizer_kernel(self.optimizer, nd, dt))
        value = self.bb.lookup_binding(g) if isinstance(g, relax.Var) else g
        pshape = shape_tuple(p)
        if value is not None and is_zero_fill(value) and pshape is not None:
            # a gradient that is all zeros (a weight no step reaches): FuseOps fuses the fill into the
            # update, and FuseTIR refuses a shape-generic kernel fed by a static producer (block_updates)
            pshape = tuple(pshape)
            gv = self._kernel(("opt-rows", dt, 0, pshape, pshape),
                              lambda: block_kernel(self.optimizer, dt, 0, pshape, pshape))
            g = relax.op.zeros(relax.ShapeExpr(list(pshape)), dt)  # in the parameter's dtype (a fill may be fp32)
        if not isinstance(g, relax.Var):
            g = self.bb.emit(g)
        sts = self.signature.opt_states[n]
        hyp = [self.signature.hyper_vars[(h, dt)] for h in self.optimizer.hyper_names]
        idx = [0] + [2 + i for i in range(len(sts))]
        out_ty = [p.ty] + [s.ty for s in sts]
        if k in self.blocks:
            self._param_blocks(k, sts, hyp, idx, out_ty)
            return
        call = relax.op.call_tir_inplace(gv, [p, g] + sts + hyp, idx,
                                         out_ty if len(out_ty) > 1 else out_ty[0])
        self._emit(call, f"upd_{ident(n)}", n, (0, k))

    def _param_blocks(self, k: int, sts: list, hyp: list, idx: list, out_ty: list) -> None:
        """Parameter ``k``'s update, one row block of its gradient at a time: a chain of
        in-place updates, each reading the previous one's parameter and states."""
        p, n = self.pvars[k], self.param_names[k]
        dt, nd = str(p.ty.dtype), p.ty.ndim
        whole = [p] + list(sts)
        for j, (g, offset) in enumerate(self.blocks[k]):
            pshape, gshape = tuple(shape_tuple(p)), tuple(shape_tuple(g))
            gv = self._kernel(("opt-rows", dt, offset, pshape, gshape),
                              lambda: block_kernel(self.optimizer, dt, offset, pshape, gshape))
            call = relax.op.call_tir_inplace(gv, [whole[0], g] + whole[1:] + hyp, idx,
                                             out_ty if len(out_ty) > 1 else out_ty[0])
            last = j == len(self.blocks[k]) - 1
            if last:
                self._emit(call, f"upd_{ident(n)}", n, (0, k))
                continue
            o = self.bb.emit(call, name_hint=f"upd_{ident(n)}_rows{offset}")
            self.update_deps[o.name] = n
            whole = [self.bb.emit(relax.TupleGetItem(o, i)) for i in range(len(whole))] \
                if len(whole) > 1 else [o]

    def _carry(self, k: int) -> None:
        cv, new, n = self.cvars[k], self.carried_new[k], self.carry_names[k]
        if not isinstance(new, relax.Var):
            new = self.bb.emit(new)
        nd, dt = cv.ty.ndim, str(cv.ty.dtype)
        gv = self._kernel(("copy", nd, dt), lambda: copy_kernel(nd, dt))
        self._emit(relax.op.call_tir_inplace(gv, [cv, new], [0], cv.ty), f"upd_{ident(n)}", n, (1, k))

    def _bn(self, k: int) -> None:
        spec, count, dtype = self.bn_info[k]
        m, v = self.stats[2 * k], self.stats[2 * k + 1]
        rm = self.signature.bn_states[f"{spec.name}.running_mean"]
        rv = self.signature.bn_states[f"{spec.name}.running_var"]
        gv = self._kernel(("bn", spec.momentum, count, rm.ty.ndim, dtype),
                          lambda: bn_stats_kernel(spec.momentum, count, rm.ty.ndim, dtype))
        self._emit(relax.op.call_tir_inplace(gv, [rm, rv, m, v], [0, 1], [rm.ty, rv.ty]),
                   f"upd_{ident(spec.name)}_stats", spec.name, (2, k, 0))
        if spec.track_count:
            c = self.signature.bn_states[f"{spec.name}.num_batches_tracked"]
            gv = self._kernel(("count",), lambda: counter_kernel("int64"))
            self._emit(relax.op.call_tir_inplace(gv, [c], [0], c.ty),
                       f"upd_{ident(spec.name)}_count", None, (2, k, 1))
