"""Low-precision training: bf16/fp16 tensors, fp32 proxies for autodiff, fp32 accumulation.

Three things a bfloat16 or float16 model needs that an fp32 one does not:

* **Host arrays.** numpy has no bfloat16; TVM 0.27 uses ``ml_dtypes.bfloat16`` (a
  dependency of apache-tvm) for its bf16 tensors, so a torch bf16 tensor is moved to numpy
  through its raw 16-bit pattern (:func:`to_numpy`): bit-exact, no rounding.
* **Autodiff.** TVM 0.27's ``Gradient`` only differentiates w.r.t. ``float`` tensors and
  refuses ``bfloat16`` parameters. :func:`add_float_proxies` gives the forward a float32
  stand-in for each bf16 parameter, cast to bf16 as its first binding; after ``Gradient``
  :func:`drop_float_proxies` puts the bf16 parameter back and returns the bf16 gradient (the
  operand of the proxy's ``astype`` gradient), so the step reads, differentiates and updates
  bf16 tensors only, as PyTorch's pure-bf16 step does.
* **Accumulation.** TVM legalizes a reduction in its output dtype: a bf16 matmul or sum
  would round after every term (error ~ n * 2**-9), where PyTorch's CPU kernels accumulate
  in fp32 and round once. :func:`accumulate_in_fp32` rewrites matmul/conv to
  ``out_dtype="float32"`` and a cast, and sum/mean/softmax-like reductions to cast, reduce in
  fp32, cast back. ``FuseOps`` folds each cast into its kernel, so no fp32 copy is planned.
  The few ops TVM cannot lower in bf16 at all (``power``, ``max_pool2d_backward``) are
  computed in fp32 the same way.
* **Mixed-dtype norms.** ``torch.autocast`` on CPU exports layer/group/batch norms with a
  bf16 input and fp32 affine parameters, which TVM's importer rejects; :func:`mixed_norm`
  normalises in fp32 and casts the output back.

The AMP recipe built on these is in :mod:`roam_tvm.frontend.amp`.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

LOW = ("bfloat16", "float16")

# ops whose TVM lowering accumulates in the output dtype
_OUT_DTYPE_OPS = {"relax.matmul", "relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d",
                  "relax.nn.conv1d_transpose", "relax.nn.conv2d_transpose"}
_REDUCE_OPS = {"relax.sum", "relax.mean", "relax.variance", "relax.collapse_sum_to",
               "relax.collapse_sum_like", "relax.cumsum", "relax.nn.softmax",
               "relax.nn.log_softmax", "relax.nn.layer_norm", "relax.nn.rms_norm",
               "relax.nn.group_norm", "relax.nn.batch_norm", "relax.prod",
               "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d",
               "relax.grad.avg_pool2d_backward",
               # TIR has no bf16 ``pow`` ("power only applies to float"); bf16
               # max_pool2d_backward fails TIR lowering (Bind type mismatch)
               "relax.power", "relax.grad.max_pool2d_backward"}


def to_numpy(t) -> np.ndarray:
    """A torch tensor as a numpy array, bf16 included (``ml_dtypes.bfloat16``, bit-exact)."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def _dtype(x) -> str:
    return str(getattr(getattr(x, "ty", None), "dtype", ""))


# ------------------------------------------------------------------------------------------
# bf16 parameters through Gradient


def add_float_proxies(fwd: relax.Function, pvars) -> tuple[relax.Function, list, dict]:
    """Replace each bf16 parameter in ``pvars`` by a float32 proxy cast to bf16 on entry,
    and a bf16 loss by its (exact) float32 copy: Gradient wants float params and target.

    Returns ``(fwd', pvars', proxies)`` with ``proxies[i] = (k, original bf16 var)`` for the
    position ``i`` of each proxy among the function's parameters (Gradient makes new vars)
    and its position ``k`` among ``pvars`` (the order of the gradients).
    """
    out = fwd.body.body
    loss = out.fields[0] if isinstance(out, relax.Tuple) else out
    low = [p for p in pvars if _dtype(p) == "bfloat16"]
    if not low and _dtype(loss) != "bfloat16":
        return fwd, list(pvars), {}
    proxies, repl, inner = {}, {}, {}
    for p in low:
        proxy = relax.Var(p.name, relax.TensorType(p.ty.shape, "float32"))
        pos = [q.same_as(p) for q in fwd.params].index(True)
        proxies[pos] = ([q.same_as(p) for q in pvars].index(True), p)
        repl[p] = proxy
        inner[p] = relax.DataflowVar(p.name + "_bf16", p.ty)
    body = fwd.bind_params(inner) if inner else fwd
    params = [repl.get(p, p) for p in fwd.params]
    attrs = {str(k): v for k, v in fwd.attrs.items()} if fwd.attrs is not None else {}
    bb = relax.BlockBuilder()
    with bb.function("fwd", params, attrs=attrs, pure=True):
        with bb.dataflow():
            for p in low:
                cast = bb.normalize(relax.op.astype(repl[p], "bfloat16"))
                bb.emit_normalized(relax.VarBinding(inner[p], cast))
            for blk in body.body.blocks:
                for b in blk.bindings:
                    bb.emit_normalized(b)
            out = body.body.body
            fields = list(out.fields) if isinstance(out, relax.Tuple) else [out]
            if _dtype(fields[0]) == "bfloat16":  # an exact fp32 copy of the loss
                fields[0] = bb.emit(relax.op.astype(fields[0], "float32"), name_hint="loss_fp32")
            fields = [bb.emit_output(f) for f in fields]
        bb.emit_func_output(relax.Tuple(fields) if isinstance(out, relax.Tuple) else fields[0])
    return bb.get()["fwd"], [repl.get(p, p) for p in pvars], proxies


def drop_float_proxies(adj: relax.Function, proxies: dict) -> relax.Function:
    """Undo :func:`add_float_proxies` on the adjoint: bf16 params, bf16 gradients.

    The proxy's cast binding becomes an alias of the bf16 parameter; each gradient
    ``astype(g_bf16, "float32")`` the adjoint returns for a proxy is replaced by ``g_bf16``.
    """
    if not proxies:
        return adj
    proxied = {k for k, _ in proxies.values()}
    proxies = {adj.params[i]: p for i, (_, p) in proxies.items()}
    binds = [b for blk in adj.body.blocks for b in blk.bindings]
    defs = {b.var: b.value for b in binds}
    ret = adj.body.body
    while isinstance(ret, relax.Var) and isinstance(defs.get(ret), (relax.Var, relax.Tuple)):
        ret = defs[ret]
    grads = ret.fields[1]
    while isinstance(grads, relax.Var) and isinstance(defs.get(grads), (relax.Var, relax.Tuple)):
        grads = defs[grads]
    new_fields = []
    for k, g in enumerate(grads.fields):
        while k in proxied and isinstance(g, relax.Var) and isinstance(defs.get(g), relax.Var):
            g = defs[g]
        v = defs.get(g) if isinstance(g, relax.Var) else g
        if (k in proxied and isinstance(v, relax.Call) and _is_cast(v)
                and _dtype(v.args[0]) == "bfloat16" and _dtype(g) == "float32"):
            g = v.args[0]
        new_fields.append(g)
    params = [proxies.get(p, p) for p in adj.params]
    is_cast = lambda v: (isinstance(v, relax.Call)  # noqa: E731
                         and v.op.same_as(tvm.ir.Op.get("relax.astype")) and v.args[0] in proxies)
    attrs = {str(k): v for k, v in adj.attrs.items()} if adj.attrs is not None else {}
    bb = relax.BlockBuilder()
    name = str(attrs.get("global_symbol", "adj"))
    with bb.function(name, params, attrs=attrs, pure=True):
        with bb.dataflow():
            for b in binds:
                if is_cast(b.value):  # ``x = astype(proxy, bf16)`` -> ``x = param``
                    b = relax.VarBinding(b.var, proxies[b.value.args[0]])
                bb.emit_normalized(b)
            # outputs of the block, as Gradient leaves them: FuseOps never fuses a block
            # output into its consumer, so no cast is fused into an in-place update kernel
            # (FuseTIR rejects that: "Inconsistent buffers ... mapped to the same relax var")
            def out(e):
                if isinstance(e, relax.Tuple):
                    return relax.Tuple([out(f) for f in e.fields])
                return bb.emit_output(e) if isinstance(e, relax.DataflowVar) else e
            res = relax.Tuple([out(ret.fields[0]), relax.Tuple([out(g) for g in new_fields])])
        bb.emit_func_output(res)
    mod = bb.get()
    mod = relax.transform.CanonicalizeBindings()(mod)
    mod = relax.transform.DeadCodeElimination([name])(mod)
    return mod[name]


# ------------------------------------------------------------------------------------------
# norms computed in fp32


_NORMS = {"relax.nn.batch_norm", "relax.nn.layer_norm", "relax.nn.group_norm",
          "relax.nn.rms_norm"}


def norms_in_fp32(fwd: relax.Function) -> relax.Function:
    """Compute each low-precision norm in fp32 and round its outputs once.

    PyTorch's bf16/fp16 norm kernels work in fp32 inside (forward and backward). Done in the
    forward, before ``Gradient``, so that the norm's backward is fp32 too: TVM's decomposed
    norm backward rounds every intermediate (``x - mean``, ``dy * gamma``, ...), and the
    cancellations there cost several ulps, which flip ReLU/max-pool decisions downstream.
    """
    binds = [b for blk in fwd.body.blocks for b in blk.bindings]
    if not any(isinstance(b.value, relax.Call) and getattr(b.value.op, "name", None) in _NORMS
               and _low(b.value.args[0]) for b in binds):
        return fwd
    attrs = {str(k): v for k, v in fwd.attrs.items()} if fwd.attrs is not None else {}
    name = str(attrs.get("global_symbol", "fwd"))
    bb = relax.BlockBuilder()
    with bb.function(name, list(fwd.params), attrs=attrs, pure=True):
        with bb.dataflow():
            for b in binds:
                v = b.value
                if not (isinstance(v, relax.Call) and getattr(v.op, "name", None) in _NORMS
                        and _low(v.args[0])):
                    bb.emit_normalized(b)
                    continue
                dt = _dtype(v.args[0])
                args = [bb.emit(relax.op.astype(a, "float32")) if _low(a) else a for a in v.args]
                wide = bb.emit(relax.Call(v.op, args, v.attrs, v.ty_args))
                if isinstance(b.var.ty, relax.TupleType):  # batch_norm: (y, mean, var)
                    new = relax.Tuple([relax.op.astype(relax.TupleGetItem(wide, i), dt)
                                       for i in range(len(b.var.ty.fields))])
                else:
                    new = relax.op.astype(wide, dt)
                bb.emit_normalized(relax.VarBinding(b.var, bb.normalize(new)))
            out = fwd.body.body
            outs = [bb.emit_output(f) for f in out.fields] if isinstance(out, relax.Tuple) \
                else bb.emit_output(out)
        bb.emit_func_output(relax.Tuple(outs) if isinstance(out, relax.Tuple) else outs)
    return bb.get()[name]


def _is_cast(v) -> bool:
    return isinstance(v, relax.Call) and getattr(v.op, "name", None) == "relax.astype"


def _is_widening_cast(v) -> bool:
    return (isinstance(v, relax.Call) and getattr(v.op, "name", None) == "relax.astype"
            and _low(v.args[0]) and str(v.attrs.dtype) == "float32")


def _substitute(e, new_of):
    """``e`` (an ANF value) with the vars in ``new_of`` replaced (``new_of[v]()`` emits)."""
    if isinstance(e, relax.Var):
        return new_of[e]() if e in new_of else e
    if isinstance(e, relax.Tuple):
        return relax.Tuple([_substitute(f, new_of) for f in e.fields])
    if isinstance(e, relax.TupleGetItem):
        return relax.TupleGetItem(_substitute(e.tuple_value, new_of), e.index)
    if isinstance(e, relax.Call):
        return relax.Call(e.op, [_substitute(a, new_of) for a in e.args], e.attrs, e.ty_args)
    return e


def recompute_casts(func: relax.Function) -> relax.Function:
    """Re-emit a cast at each of its uses instead of keeping its result from forward to
    backward, where that keeps less alive.

    * A widening cast (bf16/fp16 -> fp32): after :func:`norms_in_fp32` a norm's backward
      reads the fp32 cast of its input, twice the bf16 tensor PyTorch saves.
    * A cast of a parameter (AMP's bf16 copy of an fp32 weight), which is alive anyway.
    * A cast whose input lives at least as long as the cast would (AMP: the bf16 copy of an
      fp32 softmax output that softmax's backward keeps anyway).

    A cast is one elementwise op that ``FuseOps`` folds into each consumer's kernel.
    """
    binds = [b for blk in func.body.blocks for b in blk.bindings]
    uses, last = {}, {}
    for i, b in enumerate(binds):
        for v in relax.analysis.free_vars(b.value):
            uses[v], last[v] = uses.get(v, 0) + 1, i
    params = set(func.params)

    def cheap(b):  # recomputing it keeps nothing alive longer than a wider copy would
        x = b.value.args[0] if _is_cast(b.value) else None
        return x is not None and isinstance(x, relax.Var) and (
            _is_widening_cast(b.value) or x in params or last.get(x, -1) >= last[b.var])

    casts = {b.var: b.value for b in binds if isinstance(b.var, relax.DataflowVar)
             and uses.get(b.var, 0) > 1 and cheap(b)}
    if not casts:
        return func
    attrs = {str(k): v for k, v in func.attrs.items()} if func.attrs is not None else {}
    name = str(attrs.get("global_symbol", "f"))
    bb = relax.BlockBuilder()
    new_of = {c: (lambda v=v: bb.emit(v)) for c, v in casts.items()}
    with bb.function(name, list(func.params), attrs=attrs, pure=True):
        with bb.dataflow():
            for b in binds:
                if b.var in casts:
                    continue
                value = _substitute(b.value, new_of)
                bb.emit_normalized(relax.VarBinding(b.var, bb.normalize(value)))
            out = func.body.body
        bb.emit_func_output(out)
    return bb.get()[name]


# ------------------------------------------------------------------------------------------
# fp32 accumulation of low-precision reductions


def _low(e) -> bool:
    return isinstance(getattr(e, "ty", None), relax.TensorType) and _dtype(e) in LOW


def _constructor(op_name: str):
    f = relax.op
    for part in op_name.split(".")[1:]:
        f = getattr(f, part, None)
        if f is None:
            return None
    return f


def _with_fp32_out(value):
    """``value`` (a matmul/conv call) rebuilt with ``out_dtype="float32"``."""
    import inspect

    ctor = _constructor(value.op.name)
    sig = list(inspect.signature(ctor).parameters)
    n_args = len(value.args)
    kw = {k: getattr(value.attrs, k) for k in sig[n_args:] if value.attrs is not None
          and hasattr(value.attrs, k)}
    kw["out_dtype"] = "float32"
    return ctor(*value.args, **kw)


def _fp32_value(bb, value):
    """The fp32-accumulating replacement of ``value``, or None to keep it."""
    name = value.op.name if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) \
        else None
    if name not in _OUT_DTYPE_OPS and name not in _REDUCE_OPS:
        return None
    if not any(_low(a) for a in value.args):
        return None
    if name in _OUT_DTYPE_OPS:
        return _with_fp32_out(value)
    args = [bb.emit(relax.op.astype(a, "float32")) if _low(a) else a for a in value.args]
    return relax.Call(value.op, args, value.attrs, value.ty_args)


def accumulate_in_fp32(func: relax.Function) -> relax.Function:
    """Reduce low-precision tensors in fp32 (matmul/conv ``out_dtype``, casts around sums,
    softmax and the like) and round the result once, as PyTorch's CPU and GPU kernels do."""
    binds = [b for blk in func.body.blocks for b in blk.bindings]
    if not any(isinstance(b.value, relax.Call) and any(_low(a) for a in b.value.args)
               for b in binds):
        return func
    attrs = {str(k): v for k, v in func.attrs.items()} if func.attrs is not None else {}
    bb = relax.BlockBuilder()
    name = str(attrs.get("global_symbol", "f"))
    with bb.function(name, list(func.params), attrs=attrs, pure=True):
        with bb.dataflow():
            for b in binds:
                out_ty = b.var.ty
                new = None
                if isinstance(out_ty, relax.TensorType) and _dtype(b.var) in LOW:
                    new = _fp32_value(bb, b.value)
                if new is None:
                    bb.emit_normalized(b)
                    continue
                wide = bb.emit(new)
                bb.emit_normalized(relax.VarBinding(
                    b.var, bb.normalize(relax.op.astype(wide, _dtype(b.var)))))
            out = func.body.body
        bb.emit_func_output(out)
    return bb.get()[name]


# ------------------------------------------------------------------------------------------
# import: norms whose input and affine parameters differ in dtype (autocast on CPU)


def mixed_norm(fn):
    """Wrap ``relax.op.nn.layer_norm``/``group_norm``/``batch_norm`` for a low-precision input
    with fp32 affine parameters (what ``torch.autocast`` on CPU exports): normalise in the
    parameters' dtype and cast the output back to the input's dtype, as PyTorch's
    mixed-dtype kernels do. BatchNorm's batch statistics (and so its running statistics)
    stay fp32, like PyTorch's fp32 buffers."""
    import functools
    import inspect

    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        data, gamma = bound.arguments.get("data"), bound.arguments.get("gamma")
        dt, pdt = _dtype(data), _dtype(gamma)
        if not (dt in LOW and pdt and pdt != dt):
            return fn(*args, **kwargs)
        bound.arguments["data"] = relax.op.astype(data, pdt)
        out = fn(*bound.args, **bound.kwargs)
        if fn.__name__ != "batch_norm":
            return relax.op.astype(out, dt)
        # (y, mean, var): emit the norm once, cast only y
        bn = relax.BlockBuilder.current().emit(out)
        return relax.Tuple([relax.op.astype(relax.TupleGetItem(bn, 0), dt),
                            relax.TupleGetItem(bn, 1), relax.TupleGetItem(bn, 2)])

    wrapped.__roam_wrapped__ = fn
    return wrapped
