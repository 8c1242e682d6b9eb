"""Test-only kernels and externs the fuzzer's functions call.

* In-place PrimFuncs for ``R.call_tir_inplace`` (TVMScript text, one per shape
  and dtype): ``a <- a * b`` alone, or with a fresh second output ``c = a + b``.
* Packed functions registered in this process with ``tvm.register_global_func``:

  - ``roam_fuzz.copy(x, out)``: destination-passing copy (``R.call_dps_packed``);
  - ``roam_fuzz.view(x)``: returns ``x`` itself, a view no planner can see through;
  - ``roam_fuzz.expect_device(x, index)``: raises if ``x`` does not live on
    ``cpu(index)``; a tensor planned into another device's storage fails here
    at run time.
"""
from __future__ import annotations

import functools

import tvm
from tvm.script import from_source

_REGISTERED = False


def register_externs() -> None:
    """Register the fuzzer's packed functions (idempotent)."""
    global _REGISTERED  # pylint: disable=global-statement
    if _REGISTERED:
        return

    def _copy(x, out):
        out.copyfrom(x)

    def _view(x):
        return x

    def _expect_device(x, index):
        if x.device.index != int(index):
            raise RuntimeError(f"roam_fuzz.expect_device: tensor {x.shape} {x.dtype} lives on {x.device}, "
                               f"expected cpu:{int(index)}")

    tvm.register_global_func("roam_fuzz.copy", _copy, override=True)
    tvm.register_global_func("roam_fuzz.view", _view, override=True)
    tvm.register_global_func("roam_fuzz.expect_device", _expect_device, override=True)
    _REGISTERED = True


def _dims_text(dims: list[str]) -> str:
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


@functools.lru_cache(maxsize=None)
def inplace_kernel(dims: tuple[str, ...], dtype: str, two_outputs: bool) -> tvm.tirx.PrimFunc:
    """``a <- a * b`` over a tensor of shape ``dims`` (TVMScript expressions, ``n`` symbolic).

    With ``two_outputs`` the kernel first writes ``c = a + b`` (a fresh output),
    then updates ``a``: ``R.call_tir_inplace(..., inplace_indices=[0, -1])``.
    """
    idx = [f"i{k}" for k in range(len(dims))]
    ax = [f"v{k}" for k in range(len(dims))]
    shape = _dims_text(dims)
    sym = "    n = T.int64()\n" if any("n" in d for d in dims) else ""
    params = "var_a: T.handle, var_b: T.handle" + (", var_c: T.handle" if two_outputs else "")
    at = ", ".join(ax)

    def nest(block: str, stmt: str) -> str:
        return (f"    for {', '.join(idx)} in T.grid{_dims_text(dims)}:\n"
                f"        with T.sblock(\"{block}\"):\n"
                f"            {', '.join(ax)} = T.axis.remap(\"{'S' * len(dims)}\", [{', '.join(idx)}])\n"
                f"            {stmt}\n")

    body = ""
    if two_outputs:
        body += f"    c = T.match_buffer(var_c, {shape}, \"{dtype}\")\n"
        body += nest("sum", f"c[{at}] = a[{at}] + b[{at}]")
    body += nest("update", f"a[{at}] = a[{at}] * b[{at}]")
    text = ("@T.prim_func(private=True, s_tir=True)\n"
            f"def inplace({params}):\n{sym}"
            f"    a = T.match_buffer(var_a, {shape}, \"{dtype}\")\n"
            f"    b = T.match_buffer(var_b, {shape}, \"{dtype}\")\n{body}")
    return from_source(text, extra_vars={"T": tvm.script.tirx})
