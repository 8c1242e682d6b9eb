"""``TrainingStep``: a built ``train_step`` with its signature, shapes and initial values.

The signature order and the in-place update convention are described in
:mod:`roam_tvm.frontend.step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from . import precision
from .errors import MetaWeightsError
from .optim import Optimizer


@dataclass
class TrainingStep:
    """A training step in one Relax function ``train_step``.

    Attributes
    ----------
    mod : tvm.IRModule
        Holds ``train_step`` (signature: see :mod:`roam_tvm.frontend.step`).
    signature : list
        ``(name, kind)`` per parameter of ``train_step``; kind is ``input``, ``target``,
        ``param``, ``frozen``, ``state`` or ``hyper``.
    shapes : dict
        Name -> ``(shape, dtype)``.
    update_deps : dict
        Update binding name -> the parameter or state it mutates in place.
    dynamic_bounds : dict
        Each dynamic dim (by ``torch.export.Dim`` name) -> the size the step is built and
        planned for (its upper bound); empty for a static import.
    """

    mod: tvm.IRModule
    signature: list
    optimizer: Optimizer
    shapes: dict                       # name -> (shape tuple, dtype)
    param_values: dict | None = None   # name -> np.ndarray (None with meta weights)
    buffer_values: dict | None = None  # BN running stats etc.
    update_deps: dict = field(default_factory=dict)
    hyper_dtypes: dict = field(default_factory=dict)  # hyper var name -> (hyper key, dtype)
    meta: bool = False
    func_name: str = "train_step"
    no_values_reason: str = ""
    loss_scale: float = 1.0  # static AMP loss scale (see amp.py); the returned loss is unscaled
    # dynamic dims, by Dim name, and the size the step is built (and planned) for
    dynamic_bounds: dict = field(default_factory=dict)

    # ---- names ---------------------------------------------------------------------------
    def _names(self, kind):
        return [n for n, k in self.signature if k == kind]

    @property
    def input_names(self):
        return self._names("input")

    @property
    def target_names(self):
        return self._names("target")

    @property
    def param_names(self):
        return self._names("param")

    @property
    def frozen_names(self):
        """Parameters with ``requires_grad=False``: read by the step, never updated."""
        return self._names("frozen")

    @property
    def state_names(self):
        return self._names("state")

    @property
    def hyper_names(self):
        return self._names("hyper")

    # ---- values --------------------------------------------------------------------------
    def initial_values(self) -> dict:
        """Parameters (from the model), zero optimizer states and BatchNorm statistics."""
        if self.meta or self.param_values is None:
            raise MetaWeightsError(
                self.no_values_reason or
                "initial_values(): this TrainingStep was built from a model on the 'meta' "
                "device (or fake tensors), so it has shapes but no weights. Build it from a "
                "model with real weights (meta=False), or fill the arrays yourself using "
                "ts.shapes[name] = (shape, dtype).")
        out = {}
        for name in self.param_names + self.frozen_names:
            out[name] = np.array(self.param_values[name], copy=True)
        bufs = self.buffer_values or {}
        for name in self.state_names:
            shape, dtype = self.shapes[name]
            if name in bufs:
                out[name] = np.array(bufs[name], dtype=dtype, copy=True).reshape(shape)
            else:
                out[name] = np.zeros(shape, dtype=dtype)
        return out

    def hyper_values(self, step: int) -> dict:
        """Per-step scalars for ``train_step``; ``step`` counts from 1 like torch's."""
        vals = self.optimizer.hyper_values(step)
        return {name: np.array(vals[key], dtype=dt) for name, (key, dt) in self.hyper_dtypes.items()}

    # ---- running -------------------------------------------------------------------------
    def _data(self, vals, names: list, kind: str) -> dict:
        """Inputs or targets by name, checked against the shapes the step is built for."""
        if isinstance(vals, dict):
            vals = [vals[n] for n in names]
        vals = list(vals)
        if len(vals) != len(names):
            raise ValueError(f"expected {len(names)} arrays ({names}), got {len(vals)}")
        for n, v in zip(names, vals):
            shape = tuple(int(d) for d in getattr(v, "shape", ()))
            if hasattr(v, "shape") and shape != self.shapes[n][0]:
                bound = (f"; the step is built for the upper bound of each dynamic dim "
                         f"({self.dynamic_bounds}), so pad the {kind} to that size"
                         if self.dynamic_bounds else "")
                raise ValueError(f"{kind} '{n}' has shape {shape}, the step takes "
                                 f"{self.shapes[n][0]}{bound}")
        return dict(zip(names, vals))

    def run(self, exe_or_vm, inputs, targets, state: dict, step: int | None = None,
            device=None) -> float:
        """Run one step on a TVM VM; updates ``state`` (params + states) in place.

        Parameters
        ----------
        exe_or_vm : relax.VirtualMachine or tvm.runtime.Executable
            The built module (``tvm.compile(ts.mod, ...)``) or a VM over it.
        inputs, targets : sequence or dict
            Arrays in signature order, or by name, of the shapes in ``shapes``.
        state : dict
            Names to numpy arrays or ``tvm.runtime.Tensor`` (see :meth:`initial_values`);
            numpy arrays are overwritten in place. The step counter is kept in
            ``state["@step"]`` unless ``step`` is given.
        step : int, optional
            The step number (from 1) the per-step scalars are computed for.
        device : tvm.runtime.Device, optional
            Default ``tvm.cpu()``.

        Returns
        -------
        float
            The loss.
        """
        dev = device or tvm.cpu()
        vm = exe_or_vm
        if not isinstance(vm, relax.VirtualMachine):
            vm = relax.VirtualMachine(exe_or_vm, dev)
        if step is None:
            step = int(state.get("@step", 0)) + 1
        values = {**self._data(inputs, self.input_names, "input"),
                  **self._data(targets, self.target_names, "target"),
                  **self.hyper_values(step)}
        state["@step"] = step
        args, back = [], []
        for name, kind in self.signature:
            v = values[name] if kind in ("input", "target", "hyper") else state[name]
            if isinstance(v, tvm.runtime.Tensor):
                args.append(v)
                continue
            v = np.asarray(precision.to_numpy(v) if hasattr(v, "detach") else v)
            t = tvm.runtime.tensor(np.array(v, order="C", copy=True), dev)
            args.append(t)
            if kind in ("param", "state"):
                back.append((name, t))
        out = vm[self.func_name](*args)
        loss = out[0] if isinstance(out, (tuple, list)) or hasattr(out, "__getitem__") else out
        for name, t in back:
            arr = state[name]
            if isinstance(arr, np.ndarray) and arr.flags.writeable:
                np.copyto(arr, t.numpy())
            else:
                state[name] = t.numpy()
        return float(loss.numpy())
