"""Optimizer configs and the in-place TIR kernels that apply them.

Each optimizer is a small dataclass (``SGD``, ``Adam``, ``AdamW``) that matches
``torch.optim`` semantics (single-tensor, non-foreach code path):

* SGD:  ``g = grad + wd * p``; with momentum ``buf = momentum * buf + g``
  (``buf`` starts at zero, which is bit-identical to torch's ``buf = g.clone()``
  on the first step since dampening is 0); nesterov ``g = g + momentum * buf``
  else ``g = buf``; ``p = p - lr * g``.
* Adam: ``g = grad + wd * p`` (L2); ``m = m + (1 - b1) * (g - m)`` (torch's
  ``lerp_``); ``v = b2 * v + (1 - b2) * g * g``;
  ``p = p - step_size * m / (sqrt(v) / sqrt(bc2) + eps)`` with
  ``step_size = lr / (1 - b1**t)`` and ``bc2 = 1 - b2**t``.
* AdamW: ``p = p * (1 - lr * wd)`` first (decoupled), then Adam without L2.

Step-dependent scalars are *hyper* inputs of ``train_step`` (0-d tensors of the
parameter dtype, computed in float64 on the host exactly like torch computes
its Python-float scalars): ``hyper.lr`` (SGD), ``hyper.step_size``,
``hyper.bc2_sqrt`` (Adam, AdamW) and ``hyper.decay`` (AdamW). Constant
coefficients (betas, eps, momentum, weight decay) are baked into the kernels.

The kernels are TIR PrimFuncs with symbolic shapes, one per (optimizer, dtype,
rank). They are called with ``R.call_tir_inplace`` so the parameter and its
states are written in place: the outputs alias the inputs, nothing is copied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .errors import UnsupportedError


def _lit(x: float, dtype: str) -> str:
    return f"T.{dtype}({float(x)!r})"


@dataclass
class Optimizer:
    """Base class. ``state_suffixes`` lists the per-parameter states, in order."""

    lr: float = 1e-3

    name = "opt"
    state_suffixes = ()
    hyper_names = ()

    def hyper_values(self, step: int) -> dict:
        raise NotImplementedError

    def kernel_body(self, dtype: str, idx: str) -> list[str]:
        raise NotImplementedError

    def kernel_key(self) -> tuple:
        return (self.name,) + tuple(sorted(self.__dict__.items()))


@dataclass
class SGD(Optimizer):
    """``torch.optim.SGD(lr, momentum, weight_decay, nesterov)`` (dampening 0)."""

    lr: float = 1e-2
    momentum: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    dampening: float = 0.0

    name = "sgd"
    hyper_names = ("lr",)

    def __post_init__(self):
        if self.dampening != 0.0:
            raise UnsupportedError("SGD: dampening != 0 is not supported; use dampening=0.0")
        if self.nesterov and self.momentum <= 0:
            raise UnsupportedError("SGD: nesterov=True needs momentum > 0")

    @property
    def state_suffixes(self):  # type: ignore[override]
        return ("momentum_buffer",) if self.momentum != 0.0 else ()

    def hyper_values(self, step: int) -> dict:
        return {"lr": float(self.lr)}

    def kernel_body(self, dtype, idx):
        g = f"g[{idx}]"
        if self.weight_decay:
            g = f"({g} + {_lit(self.weight_decay, dtype)} * p[{idx}])"
        lines = []
        if self.momentum:
            lines.append(f"buf[{idx}] = {_lit(self.momentum, dtype)} * buf[{idx}] + {g}")
            upd = f"buf[{idx}]"
            if self.nesterov:
                upd = f"({g} + {_lit(self.momentum, dtype)} * buf[{idx}])"
        else:
            upd = g
        lines.append(f"p[{idx}] = p[{idx}] - lr[()] * {upd}")
        return lines


@dataclass
class Adam(Optimizer):
    """``torch.optim.Adam(lr, betas, eps, weight_decay)`` (L2 weight decay, amsgrad off)."""

    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    name = "adam"
    state_suffixes = ("exp_avg", "exp_avg_sq")
    hyper_names = ("step_size", "bc2_sqrt")
    decoupled = False

    def hyper_values(self, step: int) -> dict:
        if step < 1:
            raise ValueError("step counts from 1 (the first optimizer step is step 1)")
        b1, b2 = self.betas
        bc1 = 1 - b1**step
        bc2 = 1 - b2**step
        out = {"step_size": self.lr / bc1, "bc2_sqrt": math.sqrt(bc2)}
        if self.decoupled:
            out["decay"] = 1 - self.lr * self.weight_decay
        return out

    def kernel_body(self, dtype, idx):
        b1, b2 = self.betas
        lines = []
        g = f"g[{idx}]"
        if self.decoupled:
            if self.weight_decay:
                lines.append(f"p[{idx}] = p[{idx}] * decay[()]")
        elif self.weight_decay:
            g = f"({g} + {_lit(self.weight_decay, dtype)} * p[{idx}])"
        lines.append(f"exp_avg[{idx}] = exp_avg[{idx}] + {_lit(1 - b1, dtype)} * ({g} - exp_avg[{idx}])")
        lines.append(
            f"exp_avg_sq[{idx}] = exp_avg_sq[{idx}] * {_lit(b2, dtype)} + {_lit(1 - b2, dtype)} * ({g} * {g})"
        )
        lines.append(
            f"p[{idx}] = p[{idx}] - step_size[()] * (exp_avg[{idx}] / "
            f"(T.sqrt(exp_avg_sq[{idx}]) / bc2_sqrt[()] + {_lit(self.eps, dtype)}))"
        )
        return lines


@dataclass
class AdamW(Adam):
    """``torch.optim.AdamW(lr, betas, eps, weight_decay=0.01)`` (decoupled weight decay)."""

    weight_decay: float = 0.01

    name = "adamw"
    decoupled = True

    @property
    def hyper_names(self):  # type: ignore[override]
        return ("step_size", "bc2_sqrt", "decay")


# ----------------------------------------------------------------------------------------
# TIR kernels


def _kernel_source(fname: str, ndim: int, dtype: str, tensors: list[str], scalars: list[str],
                   body: list[str], scalar_dtypes: dict | None = None, shapes: dict | None = None,
                   grid: tuple | None = None) -> str:
    """TVMScript of an elementwise kernel over ``ndim`` symbolic dims writing ``body``; with
    ``shapes`` (tensor -> static shape) and ``grid`` (static loop extents) a static one."""
    scalar_dtypes = scalar_dtypes or {}

    def static(dims) -> str:
        return "(" + "".join(f"T.int64({d}), " for d in dims) + ")"

    dims = [f"d{i}" for i in range(ndim)] if grid is None else [str(d) for d in grid]
    shape = "(" + "".join(f"{d}, " for d in dims) + ")"
    args = [f"var_{t}: T.handle" for t in tensors]
    args += [f"{s}: T.Buffer((), \"{scalar_dtypes.get(s, dtype)}\")" for s in scalars]
    src = ["@T.prim_func(private=True, s_tir=True)", f"def {fname}({', '.join(args)}):",
           '    T.func_attr({"tirx.noalias": True})']
    if shapes is None:
        src += [f"    {d} = T.int64()" for d in dims]
    for t in tensors:
        tshape = shape if shapes is None else static(shapes[t])
        src.append(f"    {t} = T.match_buffer(var_{t}, {tshape}, \"{dtype}\")")
    idx = ", ".join(f"v{i}" for i in range(ndim)) if ndim else "()"
    ind = "    "
    if ndim:
        loops = ", ".join(f"i{i}" for i in range(ndim))
        src.append(f"    for {loops} in T.grid({', '.join(dims)}):")
        ind = "        "
    src.append(f"{ind}with T.sblock(\"{fname}\"):")
    ind2 = ind + "    "
    if ndim:
        src.append(f"{ind2}{idx} = T.axis.remap(\"{'S' * ndim}\", "
                   f"[{', '.join(f'i{i}' for i in range(ndim))}])")
    for line in body:
        src.append(ind2 + line.replace("[{idx}]", f"[{idx}]"))
    return "\n".join(src) + "\n"


def make_kernel(fname: str, ndim: int, dtype: str, tensors, scalars, body_fn, scalar_dtypes=None,
                shapes: dict | None = None, grid: tuple | None = None):
    """Parse a kernel built by :func:`_kernel_source` into a ``tir.PrimFunc``."""
    from tvm.script import tirx as T
    from tvm.script.parser import parse

    idx = ", ".join(f"v{i}" for i in range(ndim)) if ndim else "()"
    body = body_fn(dtype, idx)
    src = _kernel_source(fname, ndim, dtype, list(tensors), list(scalars), body, scalar_dtypes,
                         shapes, grid)
    func = parse(src, extra_vars={"T": T})
    return func


def optimizer_kernel(opt: Optimizer, ndim: int, dtype: str):
    """The in-place update kernel of ``opt`` for a parameter of rank ``ndim``.

    Arguments in order: ``p, g, *states, *hypers``; in-place indices ``[0, 2, 3, ...]``.
    """
    tensors = ["p", "g"] + [s if s != "momentum_buffer" else "buf" for s in opt.state_suffixes]
    scalars = list(opt.hyper_names)
    fname = f"{opt.name}_update_{dtype}_{ndim}d"
    return fname, make_kernel(fname, ndim, dtype, tensors, scalars, opt.kernel_body)


def bn_stats_kernel(momentum: float, count: int, ndim: int, dtype: str):
    """Kernel updating BatchNorm running stats in place, torch semantics.

    ``running_mean = (1 - m) * running_mean + m * batch_mean``;
    ``running_var = (1 - m) * running_var + m * batch_var * n / (n - 1)`` (unbiased).
    """
    corr = count / max(count - 1, 1)

    def body(dt, idx):
        return [
            f"rm[{idx}] = {_lit(1 - momentum, dt)} * rm[{idx}] + {_lit(momentum, dt)} * mean[{idx}]",
            f"rv[{idx}] = {_lit(1 - momentum, dt)} * rv[{idx}] + {_lit(momentum, dt)} * "
            f"(var[{idx}] * {_lit(corr, dt)})",
        ]

    tag = f"{momentum!r}_{count}".replace(".", "p").replace("-", "m")
    fname = f"bn_running_update_{dtype}_{ndim}d_{tag}"
    return fname, make_kernel(fname, ndim, dtype, ["rm", "rv", "mean", "var"], [], body)


def counter_kernel(dtype: str = "int64"):
    """Kernel ``c[()] += 1`` in place (BatchNorm ``num_batches_tracked``)."""
    def body(dt, idx):
        return [f"c[()] = c[()] + T.{dt}(1)"]
    fname = f"increment_{dtype}"
    return fname, make_kernel(fname, 0, dtype, ["c"], [], body)


def copy_kernel(ndim: int, dtype: str):
    """Kernel ``dst[...] = src[...]`` in place (states carried by a backbone)."""
    def body(dt, idx):
        return [f"dst[{idx}] = src[{idx}]"]
    fname = f"copy_{dtype}_{ndim}d"
    return fname, make_kernel(fname, ndim, dtype, ["dst", "src"], [], body)


def hyper_array(value: float, dtype: str) -> np.ndarray:
    return np.array(value, dtype=dtype)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "optimizer_kernel", "bn_stats_kernel",
           "counter_kernel", "hyper_array", "field"]


def _from_relax_training(opt) -> Optimizer | None:
    """Our kernel for an optimizer of ``tvm.relax.training.optimizer`` (same update rule).

    TVM's own ``Adam`` cannot even be initialised with numpy 2 (``Could not convert
    T.float32 to a NumPy dtype``); a user of the backbone route gets the same
    update from our TIR kernels instead.
    """
    try:
        from tvm.relax.training import optimizer as relax_opt
    except ImportError:  # pragma: no cover - TVM built without relax.training
        return None
    if isinstance(opt, relax_opt.MomentumSGD):
        return SGD(lr=float(opt.lr), momentum=float(opt.momentum), weight_decay=float(opt.weight_decay),
                   nesterov=bool(opt.nesterov), dampening=float(opt.dampening))
    if isinstance(opt, relax_opt.SGD):
        return SGD(lr=float(opt.lr), weight_decay=float(opt.weight_decay))
    if isinstance(opt, relax_opt.Adam):
        return Adam(lr=float(opt.lr), betas=(float(opt.beta1), float(opt.beta2)), eps=float(opt.eps),
                    weight_decay=float(opt.weight_decay))
    return None


def as_optimizer(opt) -> Optimizer:
    """Accept our optimizers, TVM's ``relax.training`` optimizers (translated to ours),
    or any config with ``kind`` in sgd|momentum|adam|adamw
    (e.g. the zoo's ``OptimizerConfig``) and ``lr``/``momentum``/``betas``/``eps``/
    ``weight_decay`` attributes."""
    if isinstance(opt, Optimizer):
        return opt
    translated = _from_relax_training(opt)
    if translated is not None:
        return translated
    kind = getattr(opt, "kind", None)
    if kind is None:
        raise UnsupportedError(f"unknown optimizer {opt!r}: use SGD, Adam or AdamW from "
                               "roam_tvm.frontend")
    wd = float(getattr(opt, "weight_decay", 0.0))
    lr = float(opt.lr)
    if kind == "sgd":
        return SGD(lr=lr, momentum=float(getattr(opt, "momentum", 0.0) or 0.0), weight_decay=wd)
    if kind == "momentum":
        return SGD(lr=lr, momentum=float(getattr(opt, "momentum", 0.9) or 0.9), weight_decay=wd)
    if kind in ("adam", "adamw"):
        cls = Adam if kind == "adam" else AdamW
        return cls(lr=lr, betas=tuple(float(b) for b in opt.betas), eps=float(opt.eps),
                   weight_decay=wd)
    raise UnsupportedError(f"unknown optimizer kind {kind!r} (valid: sgd, momentum, adam, adamw)")
