"""``from_torch``: a PyTorch model + loss + optimizer into a Relax ``train_step``.

Route (see docs/tvm-notes): ``torch.export`` of model+loss in train mode ->
``from_exported_program(run_ep_decomposition=True, keep_params_as_input=True,
unwrap_unit_return_tuple=True)`` -> fixes (tied weights, bool cumsum, BatchNorm
running stats) -> ``build_train_step`` (DCE, Gradient with the norms whole,
DecomposeOpsForTraining, in-place optimizer updates).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import tvm
from tvm import relax

from .converters import CONVERTERS
from .errors import FrontendError, ImportError_, TraceError, UnsupportedError
from .losses import make_loss_fn
from .optim import SGD, Optimizer, as_optimizer
from .frozen import check_trainable, split_frozen
from .hf_experts import exportable_experts
from .ep_asserts import decompose_without_asserts
from .amp import autocast, check_precision, unscaling, warn_adam_eps, with_loss_scale
from .precision import mixed_norm, to_numpy
from .step import BNSpec, TrainingStep, _Progress, _attrs_dict, build_train_step

_PREFIX = "model."


def _torch():
    import torch
    return torch


def _first_output(out):
    """The tensor a loss applies to: logits / last hidden state / first element."""
    torch = _torch()
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state"):
        v = getattr(out, key, None)
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(out, dict) and isinstance(out.get(key), torch.Tensor):
            return out[key]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)) and out:
        return _first_output(out[0])
    raise UnsupportedError(f"cannot find a tensor in the model output of type {type(out).__name__}")


def _make_loss_fn(loss):
    return make_loss_fn(loss)  # PyTorch's conventions live in .losses


def _wrapper(model, n_inputs, loss_fn):
    torch = _torch()

    class _ModelWithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(*args[:n_inputs])
            return loss_fn(_first_output(out), *args[n_inputs:])

    return _ModelWithLoss()


def _is_meta(t) -> bool:
    torch = _torch()
    if getattr(t, "is_meta", False):
        return True
    try:
        from torch._subclasses.fake_tensor import FakeTensor
        return isinstance(t, FakeTensor)
    except Exception:  # pragma: no cover
        return False


def _bn_specs_in_graph_order(ep, model):
    """BatchNorm modules in the order their ops appear in the exported graph."""
    torch = _torch()
    sig = ep.graph_signature
    buf_of = {}
    for spec in sig.input_specs:
        if spec.kind.name == "BUFFER" and spec.target is not None:
            buf_of[spec.arg.name] = spec.target
    order = []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        for a in node.args:
            if isinstance(a, torch.fx.Node) and a.name in buf_of:
                tgt = buf_of[a.name]
                if tgt.endswith(".running_mean"):
                    mod_name = tgt[: -len(".running_mean")]
                    if mod_name not in order:
                        order.append(mod_name)
    mods = dict(model.named_modules())
    specs = []
    for full in order:
        name = full[len(_PREFIX):] if full.startswith(_PREFIX) else full
        m = mods.get(name)
        if m is None or not isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            continue
        if m.momentum is None:
            raise UnsupportedError(f"BatchNorm '{name}' has momentum=None (cumulative average); "
                                   "set a numeric momentum")
        specs.append(BNSpec(name=name, momentum=float(m.momentum),
                            track_count=m.num_batches_tracked is not None))
    return specs


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


def _fix_bindings(func: relax.Function) -> relax.Function:
    """Rewrite ops TVM 0.27 cannot build on llvm.

    * ``cumsum`` of a bool tensor (transformers' mask code) -> cumsum over int64
      (fails with ``MatchesCode(kDLFloat)`` otherwise);
    * comparisons of bool tensors (``equal`` of two masks) -> compare as int8
      (otherwise LLVM emits ``fcmp`` on ``i1`` and module verification fails).
    """
    from .step import _bindings

    binds = _bindings(func)
    if not any(_needs_fix(b.value) for b in binds):
        return func
    bb = relax.BlockBuilder()
    with bb.function("main", list(func.params), attrs=_attrs_dict(func), pure=True):
        with bb.dataflow():
            for b in binds:
                v = b.value
                if not _needs_fix(v):
                    bb.emit_normalized(b)
                    continue
                out_dt = str(b.var.ty.dtype)
                if v.op.name == "relax.cumsum":
                    x = bb.emit(relax.op.astype(v.args[0], "int64"))
                    new = relax.op.cumsum(x, axis=v.attrs.axis, dtype="int64",
                                          exclusive=v.attrs.exclusive)
                    if out_dt != "int64":
                        new = relax.op.astype(bb.emit(new), out_dt)
                else:
                    a, c = (bb.emit(relax.op.astype(x, "int8")) if str(x.ty.dtype) == "bool"
                            else x for x in v.args[:2])
                    new = relax.Call(v.op, [a, c], v.attrs)
                bb.emit_normalized(relax.VarBinding(b.var, bb.normalize(new)))
            out = func.body.body
        bb.emit_func_output(out)
    return bb.get()["main"]


def from_torch(model, example_inputs, targets, loss="cross_entropy", optimizer: Optimizer | None = None,
               keep_params=True, quiet=None, dynamic_shapes=None,
               precise_reductions=True, precision=None, loss_scale=None) -> TrainingStep:
    """Import ``model`` with ``loss`` and ``optimizer`` into a one-function training step.

    ``example_inputs`` / ``targets``: tuples of tensors (a single tensor is accepted).
    ``loss``: ``"cross_entropy"`` (classes in dim 1 as ``F.cross_entropy``; ``[B, T, V]`` logits
    with ``[B, T]`` targets: classes last; see ``.losses``), ``"mse"``, or a callable
    ``loss(output, *targets)``. ``optimizer``: ``SGD``/``Adam``/``AdamW``.
    ``keep_params``: keep the model's parameter values for ``initial_values()``.
    Models on the ``meta`` device (or fake tensors) import from shapes only.
    ``dynamic_shapes``: optional, one ``torch.export`` spec per input then per target
    (e.g. ``({0: Dim("b", max=64)}, {0: Dim("b", max=64)})``); every dynamic dim needs
    an upper bound.
    ``precise_reductions``: split multi-axis float sums/means into one-axis steps (see
    ``step.blocked_reduction``; fixes fp32 gradient error of large BatchNorm layers).
    ``precision``: ``None`` trains the model in its own dtypes (fp32, fp64, bf16 or fp16
    parameters); ``"bf16-amp"`` / ``"fp16-amp"`` is the AMP recipe (see
    ``roam_tvm.frontend.amp``): the model and loss run under ``torch.autocast``, so
    parameters and optimizer states stay fp32 (master weights) while autocast's ops
    (matmul, conv, ...) compute, save and differentiate in bf16/fp16. ``loss_scale``: a
    static power of two the loss is multiplied by before the backward and every gradient
    divided by in the optimizer update (default 1024 with ``"fp16-amp"``, 1 with
    ``"bf16-amp"``); the step returns the unscaled loss. No step is skipped on overflow.
    Stage messages go to stderr once the import runs longer than 3 s (``quiet=True``: never,
    ``quiet=False``: always).
    """
    torch = _torch()
    progress = _Progress(quiet)
    optimizer = as_optimizer(optimizer) if optimizer is not None else SGD(lr=1e-2)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if isinstance(targets, torch.Tensor):
        targets = (targets,)
    example_inputs, targets = tuple(example_inputs), tuple(targets)
    if not isinstance(model, torch.nn.Module):
        raise FrontendError(f"model must be a torch.nn.Module, got {type(model).__name__}")

    params = dict(model.named_parameters())  # tied weights: one entry
    meta = any(_is_meta(p) for p in params.values())
    check_trainable(params)
    scale = check_precision(precision, loss_scale, params.values())
    warn_adam_eps(optimizer, params.values(), precision)
    loss_fn = _make_loss_fn(loss)
    wrapped = _wrapper(model, len(example_inputs), loss_fn)
    if precision is not None:
        wrapped = autocast(wrapped, precision, scale)
    was_training = model.training
    model.train()
    cfg = getattr(model, "config", None)
    old_cache = getattr(cfg, "use_cache", None)
    if old_cache:  # HF: a KV cache in a training step only adds a bogus concat
        cfg.use_cache = False
    progress("torch.export")
    try:
        with warnings.catch_warnings(), exportable_experts(model):
            warnings.simplefilter("ignore")
            ds = dynamic_shapes
            if ds is not None:  # one spec per input, then per target; the wrapper takes *args
                ds = (tuple(ds),)
            ep = torch.export.export(wrapped, example_inputs + targets, strict=False,
                                     dynamic_shapes=ds)
    except FrontendError:
        raise
    except Exception as e:  # noqa: BLE001 - report any tracing failure cleanly
        msg = str(e).strip().splitlines()
        first = next((ln for ln in msg if ln.strip()), type(e).__name__)
        raise TraceError(
            f"torch.export could not trace {type(model).__name__} with its loss: "
            f"{type(e).__name__}: {first[:400]}. Make the forward traceable (no data-dependent "
            "Python control flow, no .item()/.numpy() on tensors; for Hugging Face models use "
            "attn_implementation='eager'), or pass a model that torch.export.export accepts."
        ) from None
    finally:
        model.train(was_training)
        if old_cache:
            cfg.use_cache = old_cache

    sig = ep.graph_signature
    user_inputs = [s.arg.name for s in sig.input_specs if s.kind.name == "USER_INPUT"]
    ph_target = {s.arg.name: s.target for s in sig.input_specs if s.kind.name == "PARAMETER"}
    n_in = len(example_inputs)
    input_names = _input_names(model, n_in)
    target_names = ["target"] + [f"target_{i}" for i in range(1, len(targets))]
    bn_specs = _bn_specs_in_graph_order(ep, model)

    progress("from_exported_program")
    from tvm.relax.frontend.torch import from_exported_program
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = _import_ep(ep, meta)
    except FrontendError:
        raise
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()
        last = next((ln for ln in reversed(msg) if ln.strip()), type(e).__name__)
        raise ImportError_(
            f"TVM's PyTorch importer failed on {type(model).__name__}: {type(e).__name__}: "
            f"{last[:400]}. If an op is unsupported, rewrite it in the model or register a "
            "converter in tvm.relax.frontend.torch.") from None
    del ep
    func = mod["main"]
    func = _fix_bindings(func)

    # order params: inputs, targets, then parameters in named_parameters() order
    by_name = {p.name: p for p in func.params}
    missing = [n for n in user_inputs if n not in by_name]
    if missing:
        raise ImportError_(f"inputs {missing} missing from the imported function")
    # tied weights (e.g. GPT-2 wte / lm_head) arrive as several relax params for one torch
    # parameter: map every alias name to the canonical name of named_parameters(); the
    # aliases are bound to the canonical var, so autodiff sums their gradients.
    canon_of_id = {id(p): n for n, p in params.items()}
    canonical = {n: canon_of_id[id(p)] for n, p in model.named_parameters(remove_duplicate=False)}
    pvar_by_fqn: dict[str, list] = {}
    for p in func.params:
        if p.name in ph_target:
            fqn = ph_target[p.name]
            fqn = fqn[len(_PREFIX):] if fqn.startswith(_PREFIX) else fqn
            fqn = canonical.get(fqn, fqn)
            pvar_by_fqn.setdefault(fqn, []).append(p)
    param_names, frozen_names = split_frozen([n for n in params if n in pvar_by_fqn], params)
    unused = [n for n in params if n not in pvar_by_fqn]
    binds = {}
    keep = []
    for n in param_names + frozen_names:
        vs = pvar_by_fqn[n]
        keep.append(vs[0])
        for other in vs[1:]:
            binds[other] = vs[0]
    extra = [p for p in func.params if p.name not in ph_target and p.name not in user_inputs]
    if extra:
        raise ImportError_(f"unexpected parameters of the imported function: "
                           f"{[p.name for p in extra][:5]}")
    order = [by_name[n] for n in user_inputs] + keep
    if binds:
        body = func.bind_params(binds)
        func = relax.Function(list(body.params), body.body, body.ret_ty, True, func.attrs)
    func = relax.Function(order, func.body, func.ret_ty, True, func.attrs)
    if unused:
        progress(f"{len(unused)} parameters do not reach the loss and are left out: {unused[:3]}")

    values = None
    bufs = {}
    if keep_params and not meta:
        values = {n: to_numpy(params[n]) for n in param_names + frozen_names}
        mods = dict(model.named_modules())
        for spec in bn_specs:
            m = mods[spec.name]
            bufs[f"{spec.name}.running_mean"] = to_numpy(m.running_mean)
            bufs[f"{spec.name}.running_var"] = to_numpy(m.running_var)
            if spec.track_count:
                bufs[f"{spec.name}.num_batches_tracked"] = to_numpy(m.num_batches_tracked)
    ts = build_train_step(func, input_names=input_names, target_names=target_names,
                          param_names=param_names, frozen_names=frozen_names,
                          optimizer=unscaling(optimizer, scale), bn_specs=bn_specs,
                          param_values=values, buffer_values=bufs, meta=meta or not keep_params,
                          progress=progress, precise_reductions=precise_reductions)
    ts.meta = meta
    if scale != 1.0:
        ts = with_loss_scale(ts, scale, optimizer)
    if not keep_params and not meta:
        ts.param_values = None
    progress("done")
    return ts


def _input_names(model, n):
    """Names of the first ``n`` arguments of ``model.forward`` (``input_<i>`` as fallback)."""
    import inspect

    names = []
    try:
        for p in inspect.signature(model.forward).parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
    except (TypeError, ValueError):  # pragma: no cover
        pass
    names = names[:n]
    names += [f"input_{i}" for i in range(len(names), n)]
    if len(set(names)) != n or any(x.startswith("target") for x in names):
        names = [f"input_{i}" for i in range(n)]
    return names


def _fix_out_dtype(fn):
    """Wrap a Relax op constructor whose TVM converter hard-codes ``out_dtype="float32"``.

    TVM 0.27's PyTorch importer builds ``addmm``/``mm``/conv with ``out_dtype="float32"``
    whatever the input dtype, so a float64 (or float16) model fails to import with
    "Binary operators must have the same datatype". The wrapper keeps the input dtype.
    """
    import functools

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if kwargs.get("out_dtype") == "float32" and args:
            dt = str(getattr(getattr(args[0], "ty", None), "dtype", "float32"))
            if dt.startswith(("float", "bfloat")) and dt != "float32":
                kwargs["out_dtype"] = dt
        return fn(*args, **kwargs)

    wrapped.__roam_wrapped__ = fn
    return wrapped


@contextlib.contextmanager
def _patched_importer(ep, meta: bool):
    """Scoped fixes of TVM's importer: dtype-preserving matmul/conv; meta weights.

    With ``meta`` weights the importer would copy every parameter and buffer into a TVM
    tensor ("Cannot copy out of meta tensor"). Parameters become inputs of the function
    (their values are dropped by ``detach_params`` anyway), so they get a 1-element dummy;
    buffers (e.g. BatchNorm stats, masks) become uninitialised tensors of the right shape,
    which is enough for a module built from shapes only.
    """
    from tvm.relax.frontend.torch import exported_program_translator as ept

    patches = []

    def patch(obj, name, value):
        # save the raw attribute (a staticmethod object for classes), not the bound one
        raw = obj.__dict__[name] if isinstance(obj, type) else getattr(obj, name)
        patches.append((obj, name, raw))
        setattr(obj, name, value)

    patch(relax.op.linear_algebra, "matmul", _fix_out_dtype(relax.op.linear_algebra.matmul))
    for name in ("conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose"):
        if hasattr(relax.op.nn, name):
            patch(relax.op.nn, name, _fix_out_dtype(getattr(relax.op.nn, name)))
    for name in ("layer_norm", "group_norm", "batch_norm"):  # autocast: bf16 x, fp32 gamma
        patch(relax.op.nn, name, mixed_norm(getattr(relax.op.nn, name)))
    if meta:
        orig = ept.ExportedProgramImporter._convert_pytorch_tensor_to_tvm
        param_ids = {id(p) for _, p in ep.named_parameters()}

        def convert(tensor_value):
            if _is_meta(tensor_value):
                if id(tensor_value) in param_ids:
                    return tvm.runtime.empty((1,), str(tensor_value.dtype).replace("torch.", ""))
                return tvm.runtime.empty(tuple(int(d) for d in tensor_value.shape),
                                         str(tensor_value.dtype).replace("torch.", ""))
            return orig(tensor_value)

        patch(ept.ExportedProgramImporter, "_convert_pytorch_tensor_to_tvm", staticmethod(convert))
    try:
        yield
    finally:
        for obj, name, value in reversed(patches):
            setattr(obj, name, value)


def _import_ep(ep, meta):
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.torch import from_exported_program

    ep, decomposed = decompose_without_asserts(ep)
    with _patched_importer(ep, meta):
        mod = from_exported_program(ep, run_ep_decomposition=not decomposed,
                                    keep_params_as_input=True,
                                    unwrap_unit_return_tuple=True,
                                    custom_convert_map=CONVERTERS)
    mod, _ = detach_params(mod)
    return mod
