"""Rewrites of imported ops that TVM 0.27 cannot build on llvm."""

from __future__ import annotations

import tvm
from tvm import relax

from .relax_walk import attrs_dict, bindings

_CMP_OPS = {"relax.equal", "relax.not_equal", "relax.less", "relax.less_equal",
            "relax.greater", "relax.greater_equal"}


def _needs_fix(v) -> bool:
    if not (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op)):
        return False
    name = v.op.name
    if name == "relax.cumsum":
        return str(v.args[0].ty.dtype) == "bool"
    if name in _CMP_OPS:
        return any(str(getattr(a.ty, "dtype", "")) == "bool" for a in v.args[:2])
    return False


def _fixed(bb: relax.BlockBuilder, b: relax.VarBinding) -> relax.Expr:
    v = b.value
    out_dt = str(b.var.ty.dtype)
    if v.op.name == "relax.cumsum":
        x = bb.emit(relax.op.astype(v.args[0], "int64"))
        new = relax.op.cumsum(x, axis=v.attrs.axis, dtype="int64", exclusive=v.attrs.exclusive)
        if out_dt != "int64":
            new = relax.op.astype(bb.emit(new), out_dt)
        return new
    a, c = (bb.emit(relax.op.astype(x, "int8")) if str(x.ty.dtype) == "bool" else x
            for x in v.args[:2])
    return relax.Call(v.op, [a, c], v.attrs)


def fix_bindings(func: relax.Function) -> relax.Function:
    """Rewrite ops TVM 0.27 cannot build on llvm.

    * ``cumsum`` of a bool tensor (transformers' mask code) -> cumsum over int64
      (fails with ``MatchesCode(kDLFloat)`` otherwise);
    * comparisons of bool tensors (``equal`` of two masks) -> compare as int8
      (otherwise LLVM emits ``fcmp`` on ``i1`` and module verification fails).

    Parameters
    ----------
    func : relax.Function
        The imported forward.

    Returns
    -------
    relax.Function
        ``func`` itself when nothing needs a fix.
    """
    binds = bindings(func)
    if not any(_needs_fix(b.value) for b in binds):
        return func
    bb = relax.BlockBuilder()
    with bb.function("main", list(func.params), attrs=attrs_dict(func), pure=True):
        with bb.dataflow():
            for b in binds:
                if not _needs_fix(b.value):
                    bb.emit_normalized(b)
                    continue
                bb.emit_normalized(relax.VarBinding(b.var, bb.normalize(_fixed(bb, b))))
            out = func.body.body
        bb.emit_func_output(out)
    return bb.get()["main"]
