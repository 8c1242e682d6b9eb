"""Name the real op and TVM's real reason when ``relax.transform.Gradient`` fails.

TVM's message names whatever op its check failed in, which is often not the culprit: a
broadcast gradient of the wrong shape fails later in ``relax.add`` (when the partials are
summed), a one-element ``concat`` fails in the adjoint bookkeeping with no op at all. So on
failure ``Gradient`` is run once more with every gradient function wrapped by a recorder;
the last forward binding whose gradient ran is the one whose partials broke the pass.
"""

from __future__ import annotations

import contextlib
import re

import tvm
from tvm import relax
from tvm.relax.op import register_gradient

from .errors import MissingGradientError

_UNREGISTERED = re.compile(r"FPrimalGradient has not been registered for (relax\.[\w.]+)")


def tvm_reason(exc: BaseException) -> str:
    """TVM's message without the Python / C++ traceback frames, in full."""
    keep = []
    for line in str(exc).splitlines():
        s = line.strip()
        if not s or s.startswith(("File \"", "Traceback (most recent call last)", "[bt]")):
            continue
        if line.startswith((" ", "\t")) and keep and keep[-1].startswith("File"):
            continue
        keep.append(s)
    return "\n".join(keep) or type(exc).__name__


@contextlib.contextmanager
def _recording(op_names, seen: list):
    """Wrap each op's registered gradient so that every call is appended to ``seen``."""
    saved = {}
    try:
        for name in op_names:
            op = tvm.ir.Op.get(name)
            fn = op.get_attr("FPrimalGradient")
            if fn is None:
                continue
            saved[name] = fn

            def wrapper(orig_var, orig_call, output_grad, ctx, _fn=fn, _name=name):
                seen.append((_name, orig_var))
                return _fn(orig_var, orig_call, output_grad, ctx)

            op.reset_attr("FPrimalGradient")
            register_gradient(name, wrapper)
        yield
    finally:
        for name, fn in saved.items():
            op = tvm.ir.Op.get(name)
            op.reset_attr("FPrimalGradient")
            register_gradient(name, fn)


def _culprit(mod, func_name, params):
    """(op name, forward binding var) whose gradient ran last before Gradient failed."""
    func = mod[func_name]
    bindings = {}
    names = set()
    for block in func.body.blocks:
        for b in block.bindings:
            bindings[b.var] = b.value
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op):
                names.add(b.value.op.name)
    seen: list = []
    with _recording(sorted(names), seen):
        try:
            relax.transform.Gradient(func_name, require_grads=params, target_index=0)(mod)
        except Exception:  # noqa: BLE001 - the failure we are explaining
            pass
    if not seen:
        return None, None, None
    name, var = seen[-1]
    value = next((v for k, v in bindings.items() if k.same_as(var) or k.name == var.name), None)
    return name, var, value


def explain_gradient_failure(mod, func_name: str, params, exc: BaseException
                             ) -> MissingGradientError:
    """A :class:`MissingGradientError` naming the op that broke ``Gradient`` and why.

    Parameters
    ----------
    mod : tvm.IRModule
        The module ``Gradient`` failed on (run again here, with recording).
    func_name : str
        The differentiated function.
    params : list of relax.Var
        ``require_grads`` of the failed call.
    exc : BaseException
        What ``Gradient`` raised.
    """
    reason = tvm_reason(exc)
    m = _UNREGISTERED.search(str(exc))
    if m:
        op = m.group(1)
        return MissingGradientError(
            f"relax.transform.Gradient: op '{op}' has no gradient in TVM 0.27, and the loss "
            f"depends on it through a trainable parameter. Register one with "
            f"tvm.relax.op.register_gradient('{op}', fn) before calling the frontend (see "
            f"roam_tvm/frontend/grad_nn.py for examples), or change the model to avoid the "
            f"op. TVM's message:\n{reason}")
    op, var, value = _culprit(mod, func_name, params)
    if op is None:
        where = "before any op's gradient ran"
        fix = "Check the forward function's dataflow block"
    else:
        shown = f" = {value}" if value is not None else ""
        where = f"in the gradient of op '{op}' (binding '{var.name}'{shown})"
        fix = (f"The gradient registered for '{op}' returned partials that do not fit its "
               f"inputs; register a correct one with tvm.relax.op.register_gradient('{op}', "
               "fn) (see roam_tvm/frontend/grad_fixes.py), or change the model to avoid the op")
    return MissingGradientError(
        f"relax.transform.Gradient failed {where}. {fix}. TVM's message:\n{reason}")
