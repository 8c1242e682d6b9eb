"""The AMP recipe: fp32 master weights, low-precision activations, static loss scaling.

``from_torch(..., precision="bf16-amp" | "fp16-amp")`` exports model and loss under
``torch.autocast("cpu", dtype)`` (:func:`autocast`): parameters stay fp32 inputs of the
step, autocast inserts the casts, so matmuls/convs (and what they save for the backward)
run in bf16/fp16 while softmax, norms and the loss stay fp32, exactly as in PyTorch. The
gradient of each cast returns the parameter gradient in fp32, so the optimizer updates the
fp32 master weights and fp32 states in place.

fp16 needs loss scaling: the loss is multiplied by a static power of two ``S`` before the
backward, and the update kernel reads ``grad / S`` (:func:`unscaling`; exact). The step
returns the unscaled loss (:func:`with_loss_scale`). The scale is static: there is no
skip-on-overflow step as in ``torch.amp.GradScaler``, because updates are placed as soon as
each gradient is final (that is where the memory goes), before later gradients are known
to be finite. Pick ``loss_scale`` so that the scaled gradients stay below 65504.

Also here: the warning for pure-fp16 parameters with Adam's default ``eps=1e-8``.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

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
    if any(p.device.type == "meta" for p in params):
        # torch.autocast("cpu") does not apply to meta tensors: the export would be fp32
        raise UnsupportedError(
            f"precision={precision!r} needs the model's weights on the CPU: autocast does not "
            "apply to meta-device tensors, so the step would silently stay float32. Build the "
            "model with real (random) weights, or plan it in float32 (precision=None)")
    if loss_scale is None:
        return DEFAULT_FP16_SCALE if precision == "fp16-amp" else 1.0
    return float(loss_scale)


def autocast(wrapped, precision, loss_scale: float):
    """``wrapped`` (model + loss) run under ``torch.autocast(cpu, dtype)``, with recurrent layers in
    ``dtype`` too (:mod:`.amp_rnn`), its loss times ``loss_scale``. The model keeps its name, so
    parameter names do not change."""
    import torch

    from .amp_rnn import rnns_in

    dtype = getattr(torch, AMP[precision])

    class _Autocast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = wrapped.model

        def forward(self, *args):
            with torch.autocast("cpu", dtype=dtype), rnns_in(dtype):  # RNNs as CUDA autocast runs them
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
            inv = relax.const(1.0 / scale, str(loss.ty.dtype))
            loss = bb.emit(relax.op.multiply(loss, inv), name_hint="loss_unscaled")
            res = bb.emit_output(relax.Tuple([loss] + list(tup.fields[1:])))
        bb.emit_func_output(res)
    mod = tvm.IRModule(dict(ts.mod.functions))
    mod[ts.func_name] = bb.get()[ts.func_name]
    ts.mod, ts.optimizer, ts.loss_scale = mod, optimizer, scale
    return ts
