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

    Returns ``(fwd', pvars', proxies)`` with ``proxies[i] = original bf16 var`` for the
    position ``i`` of each proxy among the function's parameters (Gradient makes new vars).
    """
    out = fwd.body.body
    loss = out.fields[0] if isinstance(out, relax.Tuple) else out
    low = [p for p in pvars if _dtype(p) == "bfloat16"]
    if not low and _dtype(loss) != "bfloat16":
        return fwd, list(pvars), {}
    proxies, repl, inner = {}, {}, {}
    for p in low:
        proxy = relax.Var(p.name, relax.TensorType(p.ty.shape, "float32"))
        proxies[[q.same_as(p) for q in fwd.params].index(True)], repl[p] = p, proxy
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
    proxies = {adj.params[i]: p for i, p in proxies.items()}
    binds = [b for blk in adj.body.blocks for b in blk.bindings]
    defs = {b.var: b.value for b in binds}
    ret = adj.body.body
    while isinstance(ret, relax.Var) and isinstance(defs.get(ret), (relax.Var, relax.Tuple)):
        ret = defs[ret]
    grads = ret.fields[1]
    while isinstance(grads, relax.Var) and isinstance(defs.get(grads), (relax.Var, relax.Tuple)):
        grads = defs[grads]
    new_fields = []
    for g in grads.fields:
        while isinstance(g, relax.Var) and isinstance(defs.get(g), relax.Var):
            g = defs[g]
        v = defs.get(g) if isinstance(g, relax.Var) else g
        if (isinstance(v, relax.Call) and v.op.same_as(tvm.ir.Op.get("relax.astype"))
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
            out = bb.emit_output(relax.Tuple([ret.fields[0], relax.Tuple(new_fields)]))
        bb.emit_func_output(out)
    mod = bb.get()
    mod = relax.transform.CanonicalizeBindings()(mod)
    mod = relax.transform.DeadCodeElimination([name])(mod)
    return mod[name]


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
    """Wrap ``relax.op.nn.layer_norm``/``group_norm`` for a low-precision input with fp32
    gamma/beta (what torch.autocast on CPU exports): normalise in the parameters' dtype and
    cast the result back to the input's dtype, as PyTorch's mixed-dtype kernels do."""
    import functools

    @functools.wraps(fn)
    def wrapped(data, gamma, beta, *args, **kwargs):
        dt, pdt = _dtype(data), _dtype(gamma)
        if dt in LOW and pdt and pdt != dt:
            return relax.op.astype(fn(relax.op.astype(data, pdt), gamma, beta, *args, **kwargs),
                                   dt)
        return fn(data, gamma, beta, *args, **kwargs)

    wrapped.__roam_wrapped__ = fn
    return wrapped


# ------------------------------------------------------------------------------------------
# the AMP recipe


AMP = {"bf16-amp": "bfloat16", "fp16-amp": "float16"}
PRECISIONS = (None, "bf16-amp", "fp16-amp")
DEFAULT_FP16_SCALE = 1024.0


def check_precision(precision, loss_scale, params) -> float:
    """Validate ``precision``/``loss_scale`` before any slow work; returns the loss scale."""
    from .errors import UnsupportedError

    if precision not in PRECISIONS:
        raise UnsupportedError(f"unknown precision {precision!r}: use None (the model's own "
                               "dtypes), 'bf16-amp' or 'fp16-amp'")
    if loss_scale is not None:
        ok = isinstance(loss_scale, (int, float)) and loss_scale > 0 and np.isfinite(loss_scale)
        if not ok or float(np.log2(loss_scale)) % 1:
            raise UnsupportedError(f"loss_scale={loss_scale!r}: give a positive power of two "
                                   "(e.g. 1024.0), so that scaling and unscaling are exact")
        if precision is None:
            raise UnsupportedError("loss_scale needs precision='fp16-amp' (or 'bf16-amp')")
    if precision is None:
        return 1.0
    bad = sorted({str(p.dtype).replace("torch.", "") for p in params if p.is_floating_point()
                  and str(p.dtype) != "torch.float32"})
    if bad:
        raise UnsupportedError(
            f"precision={precision!r} keeps fp32 master weights, but the model has {bad} "
            "parameters: pass the model in float32 (model.float()), or use precision=None to "
            "train it in its own dtype")
    if loss_scale is None:
        return DEFAULT_FP16_SCALE if precision == "fp16-amp" else 1.0
    return float(loss_scale)


def autocast(wrapped, precision, loss_scale: float):
    """``wrapped`` (model + loss) run under ``torch.autocast(cpu, dtype)``, its loss times
    ``loss_scale``. The model keeps its name, so parameter names do not change."""
    import torch

    dtype = getattr(torch, AMP[precision])

    class _Autocast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = wrapped.model

        def forward(self, *args):
            with torch.autocast("cpu", dtype=dtype):
                loss = wrapped.forward(*args)
            loss = loss.float()
            return loss * loss_scale if loss_scale != 1.0 else loss

    return _Autocast()


class PrecisionWarning(UserWarning):
    """A precision setting that is known to make training diverge."""


def warn_adam_eps(optimizer, params, precision) -> None:
    """Warn (before any slow work) when Adam's ``eps`` underflows in fp16 parameters."""
    import warnings

    eps = getattr(optimizer, "eps", None)
    if precision is not None or eps is None or eps >= 1e-4:
        return
    if not any(str(p.dtype) == "torch.float16" and p.requires_grad for p in params):
        return
    warnings.warn(
        f"{type(optimizer).__name__}(eps={eps:g}) with float16 parameters: eps underflows in "
        "fp16 (smallest normal 6.1e-5, eps rounds to 0), so one step puts inf/nan into most "
        "weights (in PyTorch too). Use eps>=1e-4, or keep fp32 master weights with "
        "from_torch(model.float(), ..., precision='fp16-amp').", PrecisionWarning,
        stacklevel=3)


class _Unscaled:
    """``opt`` whose update reads ``grad / scale`` (static loss scaling: exact for a power of
    two). Duck-types :class:`~roam_tvm.frontend.optim.Optimizer` for the kernel builder."""

    def __init__(self, opt, scale: float):
        self.inner, self.scale = opt, float(scale)
        self.name = f"{opt.name}_unscale{int(scale)}"
        self.state_suffixes, self.hyper_names = opt.state_suffixes, opt.hyper_names

    def hyper_values(self, step: int) -> dict:
        return self.inner.hyper_values(step)

    def kernel_body(self, dtype: str, idx: str) -> list[str]:
        import re

        inv = f"T.{dtype}({1.0 / self.scale!r})"
        pat = re.compile(r"\bg\[" + re.escape(idx) + r"\]")
        return [pat.sub(f"(g[{idx}] * {inv})", line) for line in self.inner.kernel_body(dtype, idx)]


def unscaling(opt, scale: float):
    """The optimizer to build the step with: ``opt`` itself, or one that unscales."""
    return opt if scale == 1.0 else _Unscaled(opt, scale)


def with_loss_scale(ts, scale: float, optimizer):
    """``ts`` whose ``train_step`` returns ``loss / scale`` (the loss the user wrote)."""
    func = ts.mod[ts.func_name]
    binds = [b for blk in func.body.blocks for b in blk.bindings]
    out = func.body.body
    defs = {b.var: b.value for b in binds}
    tup = defs.get(out, out)
    attrs = {str(k): v for k, v in func.attrs.items()} if func.attrs is not None else {}
    bb = relax.BlockBuilder()
    with bb.function(ts.func_name, list(func.params), attrs=attrs, pure=True):
        with bb.dataflow():
            for b in binds:
                if not b.var.same_as(out):
                    bb.emit_normalized(b)
            loss = tup.fields[0]
            inv = relax.const(1.0 / scale, _dtype(loss))
            loss = bb.emit(relax.op.multiply(loss, inv), name_hint="loss_unscaled")
            res = bb.emit_output(relax.Tuple([loss] + list(tup.fields[1:])))
        bb.emit_func_output(res)
    mod = tvm.IRModule(dict(ts.mod.functions))
    mod[ts.func_name] = bb.get()[ts.func_name]
    ts.mod, ts.optimizer, ts.loss_scale = mod, optimizer, scale
    return ts
