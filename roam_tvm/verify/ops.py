"""Calls for the plan checker: memory ops, views, lowered DPS calls, externs and pure ops."""
from __future__ import annotations

import tvm
from tvm import relax

from .effects import OBJECT_VIEW_EXTERNS, READ_ONLY_EXTERNS, VIEW_EXTERNS, primfunc_effect
from .executor import Event, Run
from .memory import Opaque, Root, StorageVal, TensorVal, Unmodelled

_NULL = ("null",)


def call(run: Run, c: relax.Call, var, label: str):
    op = c.op
    run.call_ty = c.ty  # the call's own type, for a binding var that carries none
    if isinstance(op, tvm.ir.Op):
        fn = _OPS.get(op.name)
        if fn is not None:
            return fn(run, c, var, label)
        if op.name in _IDENTITY_OPS:
            return run.expr(c.args[0])
        if op.name in _UNSAFE_OPS:
            raise Unmodelled(f"`{label}`: {op.name} may write its arguments or alias them")
        if op.name.startswith(("relax.memory.", "relax.vm.", "relax.builtin.")):
            raise Unmodelled(f"`{label}`: memory/VM op {op.name} is not modelled")
        return _pure(run, ("op", op.name, str(c.attrs) if c.attrs is not None else ""), c.args, var, label)
    if isinstance(op, relax.GlobalVar):
        return _global_call(run, op, list(c.args), var, label)
    if isinstance(op, relax.ExternFunc):
        return _extern(run, op.global_symbol, list(c.args), c.ty_args, var, label, ordered=True)
    raise Unmodelled(f"`{label}`: call of `{op}` (closure or computed callee) is not modelled")


# ---- helpers -------------------------------------------------------------------------------------
def _arg(run: Run, e, label: str, what: str):
    v = run.expr(e)
    if what == "tensor" and not isinstance(v, TensorVal):
        raise Unmodelled(f"`{label}`: expected a tensor, got `{e}`")
    if what == "storage" and not isinstance(v, StorageVal):
        raise Unmodelled(f"`{label}`: expected a storage, got `{e}`")
    return v


def _int(run: Run, e, label: str) -> int:
    v = run.expr(e)
    if not isinstance(v, Opaque) or v.ints is None or len(v.ints) != 1:
        raise Unmodelled(f"`{label}`: expected an integer, got `{e}`")
    return v.ints[0]


def _shape(run: Run, e, label: str) -> tuple:
    v = run.expr(e)
    if not isinstance(v, Opaque) or v.ints is None:
        raise Unmodelled(f"`{label}`: expected a shape, got `{e}`")
    return v.ints


def _dtype(e) -> str:
    return str(e.value) if isinstance(e, tvm.ir.expr.GenericConst) else str(e)


def _is_missing(run: Run, e) -> bool:
    if isinstance(e, relax.Tuple) and len(e.fields) == 0:
        return True
    v = run.expr(e)
    return isinstance(v, Opaque) and v.tok == run.tok.get(_NULL, "null")


def _leaves(v):
    if isinstance(v, tuple):
        for x in v:
            yield from _leaves(x)
    else:
        yield v


def _view(run: Run, base: TensorVal, shape: tuple, dtype: str, rel: int, label: str) -> TensorVal:
    from .executor import nbytes_of

    nb = nbytes_of(shape, dtype)
    t = TensorVal(base.storage, base.root, base.offset + rel, nb, shape, dtype, run.new_id())
    if rel < 0 or rel + nb > base.nbytes:
        run.violation(f"`{label}`: view bytes [{rel},{rel + nb}) fall outside `{base.root.name}` "
                      f"({base.nbytes} B)")
    return t


# ---- allocation and memory ops --------------------------------------------------------------------
def _builtin_alloc(run, c, var, label):
    shape, dtype = _shape(run, c.args[0], label), _dtype(c.args[1])
    dev = _int(run, c.args[2], label) if len(c.args) > 2 else 0
    return run.fresh_tensor(var.name, shape, dtype, dev)


def _alloc_storage(dev_arg: int):
    def fn(run, c, var, label):
        size = _shape(run, c.args[0], label)
        if len(size) != 1:
            raise Unmodelled(f"`{label}`: storage size is not one number")
        dev = _int(run, c.args[dev_arg], label)
        return StorageVal(run.storage(var.name, size[0], dev), run.new_id())
    return fn


def _alloc_tensor(run, c, var, label):
    s = _arg(run, c.args[0], label, "storage")
    run.check_alive_storage(s, label)
    off, shape, dtype = _int(run, c.args[1], label), _shape(run, c.args[2], label), _dtype(c.args[3])
    from .executor import nbytes_of

    nb = nbytes_of(shape, dtype)
    if off < 0 or off + nb > s.storage.size:
        run.violation(f"`{label}`: tensor bytes [{off},{off + nb}) fall outside storage "
                      f"`{s.storage.name}` ({s.storage.size} B)")
    if len(c.args) > 4 and c.op.name == "relax.memory.alloc_tensor":
        dev = _int(run, c.args[4], label)
        if dev != s.storage.device:
            run.violation(f"`{label}`: tensor for device {dev} placed in storage `{s.storage.name}` "
                          f"of device {s.storage.device}")
    return TensorVal(s.storage, Root(run.new_id(), var.name), off, nb, shape, dtype, run.new_id())


def _kill(run, c, var, label):
    v = run.lookup(c.args[0], check_kill=False) if type(c.args[0]).__name__ in ("Var", "DataflowVar") \
        else run.expr(c.args[0])
    if getattr(v, "oid", -1) in run.killed:
        run.violation(f"`{label}` kills `{_nm(c.args[0])}` twice")
    run.killed.add(getattr(v, "oid", -1))
    return Opaque(run.tok.get(("unit",), "()"))


def _nm(e):
    return getattr(e, "name", str(e))


def _memory_view(run, c, var, label):
    base = _arg(run, c.args[0], label, "tensor")
    shape = base.shape if _is_missing(run, c.args[1]) else _shape(run, c.args[1], label)
    dtype = base.dtype if _is_missing(run, c.args[2]) else _dtype(c.args[2])
    rel = 0 if _is_missing(run, c.args[3]) else _int(run, c.args[3], label)
    return _view(run, base, shape, dtype, rel, label)


def _ensure_zero_offset(run, c, var, label):
    base = _arg(run, c.args[0], label, "tensor")
    return _view(run, base, base.shape, base.dtype, 0, label)


def _reshape(run, c, var, label):
    base = _arg(run, c.args[0], label, "tensor")
    shape = _shape(run, c.args[1], label)
    t = _view(run, base, shape, base.dtype, 0, label)
    if t.nbytes != base.nbytes:
        run.violation(f"`{label}`: reshape changes the byte size {base.nbytes} -> {t.nbytes}")
    return t


def _null(run, c, var, label):
    return Opaque(run.tok.get(_NULL, "null"))


# ---- calls that read and write memory --------------------------------------------------------------
def _event(run: Run, callee: str, args: list, written: dict, label: str, names: list, extern=False):
    """Read the inputs, record the event, then write the outputs (fresh ones must not overlap)."""
    keys, seen = [], []
    for i, a in enumerate(args):
        if isinstance(a, TensorVal):
            if i in written and written[i] == "out":
                keys.append(("out", a.dtype, a.shape))
                seen.append((names[i], "a fresh output (never written before)"))
            else:
                k, desc = run.read(a)
                keys.append(k)
                seen.append((names[i], desc))
        elif isinstance(a, Opaque):
            keys.append(("o", a.tok))
            seen.append((names[i], run.tok.describe(a.tok)))
        else:
            raise Unmodelled(f"`{label}`: argument {i} is a storage or tuple")
    key = (callee, tuple(keys))
    run.out.events.append(Event(callee, key, label, seen, extern))
    outs = [(i, args[i]) for i, how in written.items() if how == "out"]
    run.overlap_check(outs, list(enumerate(args)), label)
    for i in written:
        t = args[i]
        dev = t.storage.device
        where = f" on device {dev}" if dev > 0 else ""
        run.write(t, run.tok.get(("out", key, i, dev), f"output arg {i} of `{label}`{where}"), label)
    return key


def _dps(run: Run, callee: str, args: list, eff_written, opaque: bool, label: str, names: list,
         ordered: bool = False):
    written = {}
    tensors = [i for i, a in enumerate(args) if isinstance(a, TensorVal)]
    for k, i in enumerate(tensors):
        fresh = run.is_fresh(args[i])
        if opaque:
            if fresh:
                written[i] = "out"
        elif k in eff_written:
            written[i] = "out" if fresh else "inplace"
    if opaque and not written:
        raise Unmodelled(f"`{label}`: `{callee}` has no visible store and no fresh argument, so what it "
                         "writes is unknown")
    _event(run, callee, args, written, label, names, extern=ordered)
    return Opaque(run.tok.get(("unit",), "()"))


def _global_call(run: Run, gv, arg_exprs: list, var, label: str):
    name = gv.name_hint
    if run.global_names is None:
        run.global_names = {g.name_hint for g in run.mod.get_global_vars()}
    if name not in run.global_names:
        raise Unmodelled(f"`{label}`: `{name}` is not in the module given to the checker")
    fn = run.mod[name]
    if isinstance(fn, relax.Function):
        raise Unmodelled(f"`{label}`: call of Relax function `{name}`, whose result may alias its "
                         "arguments")
    if not isinstance(fn, tvm.tirx.PrimFunc):
        raise Unmodelled(f"`{label}`: `{name}` is neither a PrimFunc nor a Relax function")
    args = [run.expr(a) for a in arg_exprs]
    if any(isinstance(a, tuple) for a in args):
        raise Unmodelled(f"`{label}`: tuple argument to PrimFunc `{name}`")
    eff = primfunc_effect(name, fn)
    n_t = sum(isinstance(a, TensorVal) for a in args)
    if n_t != eff.n_buffers and not eff.opaque:
        raise Unmodelled(f"`{label}`: {n_t} tensor args for {eff.n_buffers} buffer params of `{name}`")
    return _dps(run, name, args, eff.written, eff.opaque, label, [_nm(a) for a in arg_exprs])


def _extern(run: Run, name: str, arg_exprs: list, ty_args, var, label: str, ordered: bool = False):
    """``ordered``: an impure ``R.call_packed``, whose order among impure calls must be kept."""
    if name in VIEW_EXTERNS:
        base = _arg(run, arg_exprs[0], label, "tensor")
        shape = _shape(run, arg_exprs[1], label)
        t = _view(run, base, shape, base.dtype, 0, label)
        if t.nbytes != base.nbytes:
            run.violation(f"`{label}`: reshape changes the byte size {base.nbytes} -> {t.nbytes}")
        return t
    if name in OBJECT_VIEW_EXTERNS:
        args = [run.expr(a) for a in arg_exprs]
        if any(isinstance(a, (TensorVal, tuple)) for a in args):
            raise Unmodelled(f"`{label}`: extern `{name}` given a tensor, of which its result may be a view")
        key = _event(run, "extern:" + name, args, {}, label, [_nm(a) for a in arg_exprs], extern=ordered)
        ty = var.ty if var.ty is not None else run.call_ty
        return run.from_type(ty, ("res", key), var.name, f"result of `{label}`", True)
    rets = list(ty_args) if ty_args is not None else []
    if any(isinstance(r, (relax.TensorType, relax.TupleType)) for r in rets):
        if not all(isinstance(r, relax.TupleType) and len(r.fields) == 0 for r in rets):
            raise Unmodelled(f"`{label}`: extern `{name}` returns a tensor, which may be a view of its "
                             "arguments")
    args = [run.expr(a) for a in arg_exprs]
    if any(isinstance(a, tuple) for a in args):
        raise Unmodelled(f"`{label}`: tuple argument to extern `{name}`")
    return _dps(run, "extern:" + name, args, frozenset(), name not in READ_ONLY_EXTERNS, label,
                [_nm(a) for a in arg_exprs], ordered)


def _pure(run: Run, callee: tuple, arg_exprs: list, var, label: str):
    """A value-semantics call: reads every tensor it is given, returns fresh memory."""
    args = [run.expr(a) for a in arg_exprs]
    flat = list(_leaves(tuple(args)))
    if any(isinstance(a, StorageVal) for a in flat):
        raise Unmodelled(f"`{label}`: storage handed to `{callee[1]}`")
    names = [n for e, v in zip(arg_exprs, args) for n in _leaf_names(_nm(e), v)]
    key = _event(run, ":".join(callee[:2]), flat, {}, label, names)
    ty = var.ty if var.ty is not None else run.call_ty
    return run.from_type(ty, ("res", key), var.name, f"result of `{label}`", True)


def _leaf_names(name: str, v) -> list:
    if isinstance(v, tuple):
        return [n for i, x in enumerate(v) for n in _leaf_names(f"{name}[{i}]", x)]
    return [name]


def _call_tir(inplace: bool):
    def fn(run, c, var, label):
        gv, arg_tuple = c.args[0], c.args[1]
        args = [run.expr(a) for a in arg_tuple.fields] if isinstance(arg_tuple, relax.Tuple) \
            else list(_leaves(run.expr(arg_tuple)))
        outs = run.from_type(var.ty, ("fresh", label), var.name, "", False, _device(run, var.ty, label))
        out_list = list(outs) if isinstance(outs, tuple) else [outs]
        idx = [int(i) for i in c.attrs.inplace_indices] if inplace else [-1] * len(out_list)
        res, extra = [], []
        for o, i in zip(out_list, idx):
            res.append(args[i] if i >= 0 else o)
            if i < 0:
                extra.append(o)
        tail = [run.expr(a) for a in c.args[2:]]
        name = gv.name_hint if isinstance(gv, relax.GlobalVar) else "extern:" + gv.global_symbol
        written = {len(args) + k: "out" for k in range(len(extra))}
        written.update({i: "inplace" for i in idx if i >= 0})
        _event(run, name, args + extra + tail, written, label, [_nm(a) for a in arg_tuple.fields]
               + [f"out{k}" for k in range(len(extra))] + ["tir_vars"] * len(tail))
        return tuple(res) if isinstance(outs, tuple) else res[0]
    return fn


def _device(run: Run, ty, label: str) -> int:
    """Device index CallTIRRewrite gives an output of type ``ty``: its vdevice's index, else 0."""
    vdevs = [getattr(f, "vdevice", None) for f in (ty.fields if isinstance(ty, relax.TupleType) else [ty])]
    vdevs = [v for v in vdevs if v is not None]
    if not vdevs:
        return 0
    infos = run.mod.global_infos.get("vdevice", []) if run.mod.global_infos is not None else []
    for i, v in enumerate(infos):
        if all(v.same_as(x) for x in vdevs):
            return i
    raise Unmodelled(f"`{label}`: outputs on a vdevice that is not (or not uniquely) in the module")


def _call_tir_dyn(run, c, var, label):
    gv, tup = c.args[0], c.args[1]
    return _global_call(run, gv, list(tup.fields), var, label)


def _call_pure_packed(run, c, var, label):
    ext = c.args[0]
    if not isinstance(ext, relax.ExternFunc):
        raise Unmodelled(f"`{label}`: call_pure_packed of a non-extern")
    return _extern(run, ext.global_symbol, list(c.args[1:]), c.ty_args, var, label)


def _call_builtin_with_ctx(run, c, var, label):
    ext, tup = c.args[0], c.args[1]
    return _extern(run, ext.global_symbol, list(tup.fields), c.ty_args, var, label)


#: annotations that return their argument itself
_IDENTITY_OPS = frozenset({"relax.hint_on_device", "relax.builtin.stop_lift_params"})
#: ops that may write or alias their arguments in ways the checker does not model
_UNSAFE_OPS = frozenset({"relax.call_inplace_packed", "relax.invoke_closure", "relax.invoke_pure_closure",
                         "relax.make_closure"})

_OPS = {
    "relax.builtin.alloc_tensor": _builtin_alloc,
    "relax.memory.alloc_storage": _alloc_storage(1),
    "relax.memory.alloc_tensor": _alloc_tensor,
    "relax.vm.alloc_storage": _alloc_storage(1),
    "relax.vm.alloc_tensor": _alloc_tensor,
    "relax.memory.kill_tensor": _kill,
    "relax.memory.kill_storage": _kill,
    "relax.vm.kill_object": _kill,
    "relax.memory.view": _memory_view,
    "relax.memory.ensure_zero_offset": _ensure_zero_offset,
    "relax.reshape": _reshape,
    "relax.null_value": _null,
    "relax.call_tir": _call_tir(False),
    "relax.call_tir_inplace": _call_tir(True),
    "relax.call_dps_packed": _call_tir(False),
    "relax.vm.call_tir_dyn": _call_tir_dyn,
    "relax.call_pure_packed": _call_pure_packed,
    "relax.call_builtin_with_ctx": _call_builtin_with_ctx,
}
