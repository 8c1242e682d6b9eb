"""Build a whole training step (forward, backward, optimizer) as one Relax function.

``train_step`` signature (see :attr:`TrainingStep.signature`), in this order:

1. ``input``  — the model's example inputs (names from ``torch.export``: ``x``, ``input_ids``, …);
2. ``target`` — the loss targets (``target``, ``target_1``, …);
3. ``param``  — trainable parameters, named like ``model.named_parameters()``;
   then ``frozen`` — parameters with ``requires_grad=False`` (no gradient, no state, never
   updated: constants of the step passed as inputs);
4. ``state``  — optimizer states ``<param>.<suffix>`` (per parameter, in parameter order),
   then BatchNorm running statistics ``<module>.running_mean`` / ``.running_var`` /
   ``.num_batches_tracked``;
5. ``hyper``  — 0-d step-dependent scalars ``hyper.<name>`` (see ``optim.py``).

It returns the loss (a 0-d tensor) and a tuple with every updated parameter and
state. Those are *the same buffers* as the corresponding inputs: each update is an
``R.call_tir_inplace`` call, whose outputs alias its inputs (nothing is allocated or
copied). The tuple is returned only so that dead-code elimination keeps the
updates (``call_tir_inplace`` is "pure" to Relax); a caller ignores it and reads
the mutated inputs.

Program order: each parameter's update is placed right after the later of
(a) the binding that makes its gradient final and (b) the last binding that reads
the parameter (directly or through a view: reshape, squeeze, expand_dims, flatten,
tuple). So the gradient dies right after its update, and nothing after the update
reads the old parameter. A pass that reorders ``train_step`` must keep that rule:
``TrainingStep.update_deps`` lists, for each update binding, the parameter it mutates.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from . import gradients, precision
from .errors import DynamicShapeError, MetaWeightsError, MissingGradientError, UnsupportedError
from .fuse_gelu import fuse_tanh_gelu
from .fuse_rms_norm import fuse_rms_norm
from .fuse_silu import fuse_silu
from .gradient_errors import explain_gradient_failure
from .norm_grad import share_statistics
from .flatten_tuples import InlineTupleVars
from .nt_matmul import FuseNTMatmul
from .simplify import drop_noop_broadcasts
from .stop_gradient import ActiveVars, insert_stop_gradients, remove_stop_gradients
from .optim import Optimizer, bn_stats_kernel, copy_kernel, counter_kernel, optimizer_kernel

# Ops whose output may be a view (alias) of their input once lowered.
_VIEW_OPS = {"relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.flatten",
             "relax.memory.view"}


class _Progress:
    """Stage messages on stderr, once the import has run for more than ``after`` seconds
    (small models stay silent); ``quiet=True`` silences them, ``quiet=False`` always prints."""

    def __init__(self, quiet=None, after: float = 3.0):
        self.quiet = quiet
        self.after = 0.0 if quiet is False else after
        self.t0 = time.time()
        self.last = "start"

    def __call__(self, msg: str):
        el = time.time() - self.t0
        if not self.quiet and el >= self.after:
            print(f"[roam-tvm frontend {el:6.1f}s] (done: {self.last}) {msg}", file=sys.stderr,
                  flush=True)
        self.last = msg


@dataclass
class BNSpec:
    """A BatchNorm layer whose running statistics are states of the step."""

    name: str            # module path, e.g. "layer1.0.bn1"
    momentum: float
    track_count: bool = True  # whether ``num_batches_tracked`` exists


@dataclass
class TrainingStep:
    """A training step in one Relax function ``train_step`` (see module docstring)."""

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
    def run(self, exe_or_vm, inputs, targets, state: dict, step: int | None = None,
            device=None) -> float:
        """Run one step on a TVM VM; updates ``state`` (params + states) in place.

        ``inputs``/``targets``: sequences (or dicts by name) of arrays. ``state`` maps names
        to numpy arrays or ``tvm.runtime.Tensor``; numpy arrays are overwritten in place.
        The step counter is kept in ``state["@step"]`` unless ``step`` is given.
        """
        dev = device or tvm.cpu()
        vm = exe_or_vm
        if not isinstance(vm, relax.VirtualMachine):
            vm = relax.VirtualMachine(exe_or_vm, dev)
        if step is None:
            step = int(state.get("@step", 0)) + 1
        state["@step"] = step
        hyp = self.hyper_values(step)

        def pick(vals, names):
            if isinstance(vals, dict):
                return [vals[n] for n in names]
            vals = list(vals)
            if len(vals) != len(names):
                raise ValueError(f"expected {len(names)} arrays ({names}), got {len(vals)}")
            return vals

        ins = dict(zip(self.input_names, pick(inputs, self.input_names)))
        tgs = dict(zip(self.target_names, pick(targets, self.target_names)))
        args, back = [], []
        for name, kind in self.signature:
            if kind == "input":
                v = ins[name]
            elif kind == "target":
                v = tgs[name]
            elif kind == "hyper":
                v = hyp[name]
            else:
                v = state[name]
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


# ------------------------------------------------------------------------------------------
# helpers over Relax functions


def _free_vars(expr) -> list:
    return list(relax.analysis.free_vars(expr))


def _bindings(func: relax.Function):
    body = func.body
    out = []
    for block in body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            raise UnsupportedError(
                "train_step construction expects the forward function to be one dataflow "
                "region; found a non-dataflow block (impure ops?)")
        out.extend(block.bindings)
    return out


def _op_name(value):
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def check_static_shapes(func: relax.Function):
    """Raise DynamicShapeError for a symbolic dim with no upper bound."""
    bounds = {}
    if func.attrs is not None and "tir_var_upper_bound" in func.attrs:
        bounds = {str(k): v for k, v in func.attrs["tir_var_upper_bound"].items()}
    for p in func.params:
        ty = p.ty
        if isinstance(ty, relax.TensorType):
            if ty.shape is None or not hasattr(ty.shape, "values"):
                raise DynamicShapeError(
                    f"input '{p.name}' has an unknown rank/shape; give every input a static "
                    "shape (or a symbolic dim with an upper bound).")
            for i, d in enumerate(ty.shape.values):
                if not isinstance(d, tvm.tirx.IntImm):
                    names = [str(v) for v in tvm.tirx.analysis.undefined_vars(d)] if hasattr(
                        tvm.tirx, "analysis") and hasattr(tvm.tirx.analysis, "undefined_vars") else [str(d)]
                    if not all(n in bounds for n in names):
                        raise DynamicShapeError(
                            f"dim {i} of input '{p.name}' is dynamic ({d}) with no upper bound. "
                            "Export with static example shapes, or give the dim an upper bound "
                            "(torch.export.Dim(name, max=...)), which becomes the function attr "
                            "'tir_var_upper_bound'.")


def check_gradients(func: relax.Function, param_vars):
    """Raise MissingGradientError for the first op on a param->loss path with no gradient."""
    gradients.ensure_registered()
    active = ActiveVars(func, param_vars).active  # what Gradient will differentiate
    for b in _bindings(func):
        if b.var not in active:
            continue
        name = _op_name(b.value)
        if name is None:
            continue
        if tvm.ir.Op.get(name).get_attr("FPrimalGradient") is None:
            raise MissingGradientError(
                f"Relax op '{name}' (binding '{b.var.name}' = {str(b.value)[:160]}) has no "
                "gradient in TVM 0.27, and it lies on a path from a parameter to the loss. "
                f"Register one with tvm.relax.op.register_gradient('{name}', fn) before "
                "calling the frontend (see roam_tvm/frontend/gradients.py for examples), or "
                "change the model to avoid the op.")


def add_bn_stat_outputs(func: relax.Function, bn_specs, n_carry=0):
    """Make the forward return ``(loss, mean_0, var_0, ...)`` for each training batch_norm.

    The batch mean and the biased variance of each BatchNorm input are computed right
    after the batch_norm binding; the step uses them to update running stats in place.
    Returns the new function and a list of (spec, count, dtype, ndim) per BN.
    """
    binds = _bindings(func)
    bns = [b for b in binds if _op_name(b.value) == "relax.nn.batch_norm"
           and bool(b.value.attrs.training)] if bn_specs or not n_carry else []
    if not bns and not n_carry:
        return func, []
    if len(bns) != len(bn_specs):
        raise UnsupportedError(
            f"found {len(bns)} training batch_norm ops but {len(bn_specs)} BatchNorm modules "
            "with running stats; cannot match running statistics to ops")
    bb = relax.BlockBuilder()
    info = []
    ret = func.body.body
    rets = [ret]
    if n_carry:
        defs = {b.var: b.value for b in binds}
        tup = _resolve(ret, defs)
        if not isinstance(tup, relax.Tuple) or len(tup.fields) != 1 + n_carry:
            raise UnsupportedError(f"the forward must return (loss, {n_carry} updated states)")
        rets = list(tup.fields)
    with bb.function("fwd", list(func.params), attrs=_attrs_dict(func), pure=True):
        with bb.dataflow():
            k = 0
            stats = []
            for b in binds:
                bb.emit_normalized(b)
                if b in bns or any(b.same_as(x) for x in bns):
                    x = b.value.args[0]
                    axis = int(b.value.attrs.axis)
                    ndim = x.ty.ndim
                    axis = axis % ndim
                    red = [i for i in range(ndim) if i != axis]
                    shape = [int(s) for s in x.ty.shape.values]
                    count = int(np.prod([shape[i] for i in red]))
                    mean = bb.emit(relax.op.mean(x, axis=red))
                    var = bb.emit(relax.op.variance(x, axis=red))
                    stats += [mean, var]
                    info.append((bn_specs[k], count, str(x.ty.dtype)))
                    k += 1
            outs = [bb.emit_output(e) for e in rets + stats]
        # Gradient's target_index needs a Tuple *expression* as the return value
        bb.emit_func_output(relax.Tuple(outs))
    return bb.get()["fwd"], info


def _resolve(expr, defs):
    while isinstance(expr, relax.Var) and expr in defs and isinstance(
            defs[expr], (relax.Var, relax.Tuple)):
        expr = defs[expr]
    return expr


def build_train_step(fwd: relax.Function, *, input_names, target_names, param_names,
                     optimizer: Optimizer, bn_specs=(), param_values=None, buffer_values=None,
                     meta=False, quiet=None, progress=None, extra_module=None,
                     carry_names=(), precise_reductions=True, frozen_names=()) -> TrainingStep:
    """Core: ``fwd(inputs..., targets..., params...) -> loss`` into a ``TrainingStep``.

    ``fwd``'s params must be ordered inputs, targets, params, frozen params, carried
    states, with the given names. Frozen parameters (``frozen_names``) get no gradient and
    no optimizer state: they are inputs of the step that it never updates.
    """
    progress = progress or _Progress(quiet)
    gradients.ensure_registered()
    n_in, n_tg, n_p = len(input_names), len(target_names), len(param_names)
    n_c, n_f = len(carry_names), len(frozen_names)
    if len(fwd.params) != n_in + n_tg + n_p + n_f + n_c:
        raise ValueError(f"forward has {len(fwd.params)} params, expected "
                         f"{n_in}+{n_tg}+{n_p}+{n_f}+{n_c}")
    check_static_shapes(fwd)

    # rename the params after the names the caller gives
    names = (list(input_names) + list(target_names) + list(param_names) + list(frozen_names)
             + list(carry_names))
    new_params = [relax.Var(n, p.ty) for n, p in zip(names, fwd.params)]
    body_f = fwd.bind_params({old: new for old, new in zip(fwd.params, new_params)})
    fwd = relax.Function(new_params, body_f.body, body_f.ret_ty, True, fwd.attrs)
    fwd = fwd.with_attr("global_symbol", "fwd")
    fwd, bn_info = add_bn_stat_outputs(fwd, list(bn_specs), n_carry=n_c)
    fwd = fwd.with_attr("global_symbol", "fwd")
    mod = tvm.IRModule({"fwd": fwd})
    # explicit tanh-GELU (GPT-2's gelu_new) -> one op, whose gradient keeps only its input
    # likewise x * sigmoid(x) -> silu, and the spelled-out RMSNorm -> rms_norm (keeps x only)
    mod["fwd"] = fuse_rms_norm(fuse_silu(fuse_tanh_gelu(mod["fwd"])))
    # broadcast_to onto a tensor's own shape (torch.matmul's expand) would be a copy kernel
    # whose result the backward keeps beside the original (attention probabilities)
    mod["fwd"] = drop_noop_broadcasts(mod["fwd"])
    mod = relax.transform.DeadCodeElimination(["fwd"])(mod)
    # layer_norm / batch_norm stay whole through Gradient: their registered gradients
    # (norm_grad.py) keep only x and gamma; they are decomposed after autodiff
    fwd = mod["fwd"]
    pvars = list(fwd.params[n_in + n_tg: n_in + n_tg + n_p])
    check_gradients(fwd, pvars)
    # TVM's Gradient refuses bf16 parameters: differentiate w.r.t. fp32 stand-ins;
    # bf16/fp16 norms work in fp32 inside, forward and backward (as PyTorch's kernels)
    fwd, pvars, proxies = precision.add_float_proxies(precision.norms_in_fp32(fwd), pvars)
    # Gradient sees no value that has no derivative (positions, masks, indices)
    mod["fwd"] = fwd = insert_stop_gradients(fwd, pvars)
    progress(f"gradient of {len(_bindings(fwd))} bindings w.r.t. {len(pvars)} params")
    try:
        with gradients.output_based_gradients():
            mod = relax.transform.Gradient("fwd", require_grads=pvars, target_index=0)(mod)
    except Exception as e:  # noqa: BLE001  # pre-check catches most
        with gradients.output_based_gradients():
            raise explain_gradient_failure(mod, "fwd", pvars, e) from None
    mod["fwd_adjoint"] = remove_stop_gradients(mod["fwd_adjoint"])
    # the forward's norms become the same primitive ops as before (batch_norm in training
    # mode: batch statistics); the backward already is primitive
    mod = relax.transform.DecomposeOpsForTraining("fwd_adjoint")(mod)
    # the norms' gradients read the forward's mean/variance vectors instead of recomputing
    adj = share_statistics(mod["fwd_adjoint"])
    if proxies:
        adj = precision.drop_float_proxies(adj, proxies)
    # bf16/fp16 matmuls and sums accumulate in fp32, rounded once (as in PyTorch)
    adj = precision.accumulate_in_fp32(precision.recompute_casts(adj))
    progress("placing optimizer updates")
    return _assemble(adj, n_in=n_in, n_tg=n_tg, n_p=n_p, carry_names=list(carry_names),
                     frozen_names=list(frozen_names),
                     precise_reductions=precise_reductions,
                     input_names=input_names,
                     target_names=target_names, param_names=param_names, optimizer=optimizer,
                     bn_info=bn_info, param_values=param_values, buffer_values=buffer_values,
                     meta=meta, extra_module=extra_module)


def _assemble(adj, *, n_in, n_tg, n_p, carry_names, frozen_names, precise_reductions, input_names, target_names, param_names, optimizer, bn_info,
              param_values, buffer_values, meta, extra_module):
    binds = _bindings(adj)
    defs = {b.var: b.value for b in binds}
    pos = {b.var: i for i, b in enumerate(binds)}
    ret = _resolve(adj.body.body, defs)
    if not isinstance(ret, relax.Tuple) or len(ret.fields) != 2:
        raise RuntimeError(f"unexpected adjoint return {ret}")
    fwd_out = _resolve(ret.fields[0], defs)
    grads = _resolve(ret.fields[1], defs)
    if isinstance(fwd_out, relax.Tuple):
        loss = fwd_out.fields[0]
        stats = list(fwd_out.fields[1:])
    else:
        loss, stats = fwd_out, []
    carried_new = stats[:len(carry_names)]
    stats = stats[len(carry_names):]
    grads = list(grads.fields)
    pvars = list(adj.params[n_in + n_tg: n_in + n_tg + n_p])
    n_f = len(frozen_names)
    fvars = list(adj.params[n_in + n_tg + n_p: n_in + n_tg + n_p + n_f])
    cvars = list(adj.params[n_in + n_tg + n_p + n_f:])
    assert len(grads) == len(pvars)

    # alias closure: bindings that (may) read each param's memory
    alias_of = {p: p for p in pvars + cvars}
    last_read = {p: -1 for p in pvars + cvars}
    for i, b in enumerate(binds):
        v = b.value
        roots = set()
        for fv in _free_vars(v):
            if fv in alias_of:
                roots.add(alias_of[fv])
        for r in roots:
            last_read[r] = i
        if roots and (isinstance(v, (relax.Var, relax.Tuple, relax.TupleGetItem))
                      or _op_name(v) in _VIEW_OPS) and len(roots) == 1:
            alias_of[b.var] = next(iter(roots))
    # skip the bindings that only pack the adjoint's return tuple
    ret_pack = set()
    for e in (adj.body.body, ret.fields[0], ret.fields[1]):
        if isinstance(e, relax.Var) and e in defs and isinstance(defs[e], relax.Tuple):
            ret_pack.add(e)

    sig = [(n, "input") for n in input_names] + [(n, "target") for n in target_names]
    sig += [(n, "param") for n in param_names] + [(n, "frozen") for n in frozen_names]
    shapes = {}
    for n, p in zip(list(input_names) + list(target_names) + list(param_names)
                    + list(frozen_names), adj.params):
        shapes[n] = (tuple(int(s) for s in p.ty.shape.values), str(p.ty.dtype))

    # states
    state_vars = {}
    opt_states = []
    for n, p in zip(param_names, pvars):
        sv = []
        for suf in optimizer.state_suffixes:
            sn = f"{n}.{suf}"
            v = relax.Var(sn, p.ty)
            state_vars[sn] = v
            sv.append(v)
            shapes[sn] = shapes[n]
            opt_states.append(sn)
        state_vars[n] = sv
    bn_states = []
    for j, (spec, count, dtype) in enumerate(bn_info):
        st_shape = tuple(int(s) for s in stats[2 * j].ty.shape.values)
        for suf in ("running_mean", "running_var"):
            sn = f"{spec.name}.{suf}"
            bn_states.append(sn)
            shapes[sn] = (st_shape, dtype)
        if spec.track_count:
            sn = f"{spec.name}.num_batches_tracked"
            bn_states.append(sn)
            shapes[sn] = ((), "int64")
    for sn in bn_states:
        shp, dt = shapes[sn]
        state_vars[sn] = relax.Var(sn, relax.TensorType(shp, dt))
    for n, v in zip(carry_names, cvars):
        state_vars[n] = v
        shapes[n] = (tuple(int(x) for x in v.ty.shape.values), str(v.ty.dtype))
    sig += [(n, "state") for n in opt_states + bn_states + list(carry_names)]

    # hypers, per param dtype
    dtypes = sorted({str(p.ty.dtype) for p in pvars})
    hyper_vars, hyper_dtypes = {}, {}
    for dt in dtypes:
        for h in optimizer.hyper_names:
            hn = f"hyper.{h}" if len(dtypes) == 1 else f"hyper.{h}.{dt}"
            hyper_vars[(h, dt)] = relax.Var(hn, relax.TensorType((), dt))
            hyper_dtypes[hn] = (h, dt)
    sig += [(n, "hyper") for n in hyper_dtypes]

    # where each update goes
    updates_at: dict[int, list] = {}
    for k, (p, g) in enumerate(zip(pvars, grads)):
        gpos = pos.get(g, -1) if isinstance(g, relax.Var) else -1
        at = max(gpos, last_read[p])
        updates_at.setdefault(at, []).append(("param", k))
    for j, (spec, count, dtype) in enumerate(bn_info):
        m, v = stats[2 * j], stats[2 * j + 1]
        at = max(pos.get(m, -1), pos.get(v, -1))
        updates_at.setdefault(at, []).append(("bn", j))
    for j, (cv, new) in enumerate(zip(cvars, carried_new)):
        if new.same_as(cv):
            continue
        at = max(pos.get(new, -1), last_read[cv])
        updates_at.setdefault(at, []).append(("carry", j))

    bb = relax.BlockBuilder()
    if extra_module is not None:
        for gv, f in extra_module.functions.items():
            bb.add_func(f, gv.name_hint if hasattr(gv, "name_hint") else gv.name)
    kernels = {}

    def kernel(key, make):
        # kernels are parsed from TVMScript: build each (optimizer, rank, dtype) once
        if key not in kernels:
            fname, prim = make()
            kernels[key] = bb.add_func(prim, fname)
        return kernels[key]

    all_params = list(adj.params[: n_in + n_tg]) + pvars + fvars
    all_params += [state_vars[n] for n in opt_states + bn_states] + cvars
    all_params += list(hyper_vars.values())
    updated = []
    update_deps = {}
    with bb.function("train_step", all_params, pure=True,
                     attrs={"num_input": n_in + n_tg}):
        with bb.dataflow():

            def emit_updates(at):
                for kind, k in updates_at.get(at, []):
                    if kind == "param":
                        p, g, n = pvars[k], grads[k], param_names[k]
                        dt, nd = str(p.ty.dtype), p.ty.ndim
                        gv = kernel(("opt", nd, dt),
                                    lambda: optimizer_kernel(optimizer, nd, dt))
                        if not isinstance(g, relax.Var):
                            g = bb.emit(g)
                        sts = state_vars[n]
                        hyp = [hyper_vars[(h, dt)] for h in optimizer.hyper_names]
                        idx = [0] + [2 + i for i in range(len(sts))]
                        out_ty = [p.ty] + [s.ty for s in sts]
                        call = relax.op.call_tir_inplace(gv, [p, g] + sts + hyp, idx,
                                                         out_ty if len(out_ty) > 1 else out_ty[0])
                        o = bb.emit(call, name_hint=f"upd_{_ident(n)}")
                        update_deps[o.name] = n
                        updated.append(o)
                    elif kind == "carry":
                        cv, new = cvars[k], carried_new[k]
                        if not isinstance(new, relax.Var):
                            new = bb.emit(new)
                        nd, dt = cv.ty.ndim, str(cv.ty.dtype)
                        gv = kernel(("copy", nd, dt), lambda: copy_kernel(nd, dt))
                        o = bb.emit(relax.op.call_tir_inplace(gv, [cv, new], [0], cv.ty),
                                    name_hint=f"upd_{_ident(carry_names[k])}")
                        updated.append(o)
                        update_deps[o.name] = carry_names[k]
                    else:
                        spec, count, dtype = bn_info[k]
                        m, v = stats[2 * k], stats[2 * k + 1]
                        rm = state_vars[f"{spec.name}.running_mean"]
                        rv = state_vars[f"{spec.name}.running_var"]
                        gv = kernel(("bn", spec.momentum, count, rm.ty.ndim, dtype),
                                    lambda: bn_stats_kernel(spec.momentum, count, rm.ty.ndim,
                                                            dtype))
                        o = bb.emit(relax.op.call_tir_inplace(gv, [rm, rv, m, v], [0, 1],
                                                              [rm.ty, rv.ty]),
                                    name_hint=f"upd_{_ident(spec.name)}_stats")
                        updated.append(o)
                        update_deps[o.name] = spec.name
                        if spec.track_count:
                            c = state_vars[f"{spec.name}.num_batches_tracked"]
                            gv = kernel(("count",), lambda: counter_kernel("int64"))
                            o = bb.emit(relax.op.call_tir_inplace(gv, [c], [0], c.ty),
                                        name_hint=f"upd_{_ident(spec.name)}_count")
                            updated.append(o)

            emit_updates(-1)
            for i, b in enumerate(binds):
                if b.var not in ret_pack:
                    new = blocked_reduction(bb, b.value, b.var) if precise_reductions else None
                    if new is None:
                        bb.emit_normalized(b)
                    else:
                        bb.emit_normalized(relax.VarBinding(b.var, bb.normalize(new)))
                emit_updates(i)
            out = bb.emit_output(relax.Tuple([loss, relax.Tuple(updated)]))
        bb.emit_func_output(out)
    mod = bb.get()
    # matmul(x, permute_dims(w)) -> one NT-matmul kernel: no transposed copy of a weight
    # (or of an activation) is materialised, forward or backward
    # (FuseNTMatmul: TVM's FuseTransposeMatmul with operands that cannot swap, nt_matmul.py)
    # adjoint tuples (of split / chunk outputs, nested in RNN steps) are read field by
    # field, else FuseTIR fails on a tuple parameter (GRU; flatten_tuples.py)
    mod = relax.transform.DeadCodeElimination()(InlineTupleVars()(FuseNTMatmul()(mod)))
    buffer_values = dict(buffer_values or {})
    return TrainingStep(mod=mod, signature=sig, optimizer=optimizer, shapes=shapes,
                        param_values=None if meta else param_values,
                        buffer_values=buffer_values, update_deps=update_deps,
                        hyper_dtypes=hyper_dtypes, meta=meta)


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _attrs_dict(func) -> dict:
    if func.attrs is None:
        return {}
    return {str(k): v for k, v in func.attrs.items()}


# ------------------------------------------------------------------------------------------
# precise reductions


def _split_axes(x, axes):
    nd = x.ty.ndim
    return sorted({int(a) % nd for a in axes}, reverse=True)


def blocked_reduction(bb, value, var):
    """Rewrite a float multi-axis ``sum``/``mean``/``collapse_sum_to`` as a chain of one-axis
    reductions (``keepdims=True``), then a reshape to the original output shape.

    TVM's llvm legalization accumulates a reduction sequentially in the output dtype: summing
    n fp32 terms has an error ~ n * eps. BatchNorm backward sums over N*H*W (50k terms for a
    ResNet-18 stem at 224x224), which made fp32 gradients ~1e-3..1e-2 off (docs/tvm-notes'
    "ResNet-18 gap"). Reducing one axis at a time bounds the error by (sum of extents) * eps
    at the cost of small intermediates (|x| / extent of the first axis reduced). Returns the
    replacement expression, or None to keep the binding.
    """
    name = _op_name(value)
    if name not in ("relax.sum", "relax.mean", "relax.collapse_sum_to"):
        return None
    x = value.args[0]
    ty = x.ty
    if not isinstance(ty, relax.TensorType) or not str(ty.dtype).startswith(("float", "bfloat")):
        return None
    if ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    try:
        shape = [int(s) for s in ty.shape.values]
    except TypeError:
        return None
    if name == "relax.collapse_sum_to":
        tgt = [int(s) for s in var.ty.shape.values]
        lead = len(shape) - len(tgt)
        axes = list(range(lead)) + [lead + i for i, t in enumerate(tgt)
                                    if t == 1 and shape[lead + i] != 1]
        op = "sum"
    else:
        if value.attrs.axis is None:
            axes = list(range(len(shape)))
        else:
            axes = [int(a) for a in value.attrs.axis]
        op = "sum" if name == "relax.sum" else "mean"
    axes = [a for a in _split_axes(x, axes) if shape[a] != 1]
    if len(axes) < 2:
        return None
    y = x
    for a in axes:
        f = relax.op.sum if op == "sum" else relax.op.mean
        y = bb.emit(f(y, axis=[a], keepdims=True))
    out_shape = [int(s) for s in var.ty.shape.values]
    return relax.op.reshape(y, out_shape)
