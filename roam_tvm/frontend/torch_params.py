"""The model's parameters and BatchNorm buffers as the imported forward's inputs.

The exported program names the model's parameters ``model.<fqn>`` (the loss wrapper holds
the model as ``model``); the step names them as ``model.named_parameters()`` does.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from tvm import relax

from .autodiff import params_without_gradient
from .bn_stats import BNSpec
from .errors import ImportError_, UnsupportedError
from .frozen import split_frozen
from .module_modes import traced_training
from .precision import to_numpy

_PREFIX = "model."


def strip_prefix(fqn: str) -> str:
    """A name of the exported program (``model.<fqn>``) as the model names it."""
    return fqn[len(_PREFIX):] if fqn.startswith(_PREFIX) else fqn



def bn_buffer_names(bn_specs: list) -> set:
    """The exported program's names of the statistics buffers of ``bn_specs`` (the step updates them)."""
    return {f"{_PREFIX}{spec.name}.{suf}" for spec in bn_specs
            for suf in ("running_mean", "running_var", "num_batches_tracked")}


def is_meta(t) -> bool:
    """Whether ``t`` is a tensor on the ``meta`` device or a fake tensor (no values)."""
    if getattr(t, "is_meta", False):
        return True
    try:
        from torch._subclasses.fake_tensor import FakeTensor
        return isinstance(t, FakeTensor)
    except Exception:  # pragma: no cover
        return False


@dataclass
class ExportedNames:
    """What the import needs from an exported program's signature."""

    user_inputs: list   # placeholder names of inputs then targets
    param_fqn: dict     # placeholder name -> "model.<fqn>"
    bn_specs: list      # BatchNorm layers with running statistics, in graph order


def _bn_specs_in_graph_order(ep, model) -> list:
    """BatchNorm modules in the order their ops appear in the exported graph."""
    import torch

    buf_of = {s.arg.name: s.target for s in ep.graph_signature.input_specs
              if s.kind.name == "BUFFER" and s.target is not None}
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
        name = strip_prefix(full)
        m = mods.get(name)
        if m is None or not isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            continue
        if not traced_training(model, m):  # an eval-mode BatchNorm reads its statistics, never updates them
            continue
        if m.momentum is None:
            raise UnsupportedError(f"BatchNorm '{name}' has momentum=None (cumulative average); "
                                   "set a numeric momentum")
        specs.append(BNSpec(name=name, momentum=float(m.momentum),
                            track_count=m.num_batches_tracked is not None))
    return specs


def check_running_stats(model) -> None:
    """Before any slow work: only BatchNorm layers may keep running statistics.

    An ``InstanceNorm*d(track_running_stats=True)`` is exported as a training batch norm over a
    ``[1, B * C, ...]`` view with its running statistics repeated per sample; the step keeps BatchNorm's
    statistics only, so the two could not be matched ("found 1 training batch_norm ops but 0 BatchNorm
    modules"). In training its output uses each instance's own statistics either way.

    Raises
    ------
    UnsupportedError
        Names the first such layer and the way out.
    """
    import torch

    for name, m in model.named_modules():
        if isinstance(m, torch.nn.modules.instancenorm._InstanceNorm) and m.track_running_stats:
            raise UnsupportedError(
                f"{type(m).__name__} '{name}' has track_running_stats=True: roam-tvm keeps running statistics "
                "for BatchNorm layers only. Its training output uses each instance's own statistics either way, "
                "so construct it with track_running_stats=False (the default) for the import.")


def exported_names(ep, model) -> ExportedNames:
    """Read the inputs, parameters and BatchNorm layers of an exported program.

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        The model with its loss, exported.
    model : torch.nn.Module
        The model (for BatchNorm modules' momentum).

    Returns
    -------
    ExportedNames
    """
    specs = ep.graph_signature.input_specs
    return ExportedNames(
        user_inputs=[s.arg.name for s in specs if s.kind.name == "USER_INPUT"],
        param_fqn={s.arg.name: s.target for s in specs if s.kind.name == "PARAMETER"},
        bn_specs=_bn_specs_in_graph_order(ep, model))


def order_params(func: relax.Function, names: ExportedNames, model,
                 params: dict, carried: list = ()) -> tuple[relax.Function, list, list, list]:
    """Order the forward's parameters: inputs, targets, trainable then frozen parameters, then the
    carried buffers (``carried``: their parameter names, in the order the forward returns them).

    Tied weights (e.g. GPT-2's ``wte`` / ``lm_head``) arrive as several Relax parameters for
    one torch parameter: every alias is bound to the canonical var (the name
    ``named_parameters()`` gives), so autodiff sums their gradients.

    Parameters
    ----------
    func : relax.Function
        The imported forward.
    names : ExportedNames
        From :func:`exported_names`.
    model : torch.nn.Module
        The model.
    params : dict
        ``dict(model.named_parameters())``.

    Returns
    -------
    (relax.Function, list, list, list)
        The reordered forward, trainable and frozen parameter names, and the names of
        parameters that do not reach the loss (left out).
    """
    by_name = {p.name: p for p in func.params}
    missing = [n for n in names.user_inputs if n not in by_name]
    if missing:
        raise ImportError_(f"inputs {missing} missing from the imported function")
    canon_of_id = {id(p): n for n, p in params.items()}
    canonical = {n: canon_of_id[id(p)] for n, p in model.named_parameters(remove_duplicate=False)}
    pvar_by_fqn: dict[str, list] = {}
    for p in func.params:
        if p.name in names.param_fqn:
            fqn = strip_prefix(names.param_fqn[p.name])
            pvar_by_fqn.setdefault(canonical.get(fqn, fqn), []).append(p)
    # a parameter the forward never reads (a module defined but not called) gets no gradient
    # in PyTorch and is skipped by its optimizer: leave it out, as one TVM's importer dropped
    read = set(relax.analysis.free_vars(func.body))
    pvar_by_fqn = {n: vs for n, vs in pvar_by_fqn.items() if any(v in read for v in vs)}
    gradless = _gradless(func, pvar_by_fqn, params)
    param_names, frozen_names = split_frozen([n for n in params if n in pvar_by_fqn], params, gradless)
    unused = [n for n in params if n not in pvar_by_fqn]
    binds, keep = {}, []
    for n in param_names + frozen_names:
        vs = pvar_by_fqn[n]
        keep.append(vs[0])
        for other in vs[1:]:
            binds[other] = vs[0]
    extra = [p for p in func.params
             if p.name not in names.param_fqn and p.name not in names.user_inputs and p.name not in carried]
    if extra:
        raise ImportError_(f"unexpected parameters of the imported function: "
                           f"{[p.name for p in extra][:5]}")
    order = [by_name[n] for n in names.user_inputs] + keep + [by_name[n] for n in carried]
    if binds:
        body = func.bind_params(binds)
        func = relax.Function(list(body.params), body.body, body.ret_ty, True, func.attrs)
    func = relax.Function(order, func.body, func.ret_ty, True, func.attrs)
    return func, param_names, frozen_names, unused


def _gradless(func: relax.Function, pvar_by_fqn: dict, params: dict) -> list:
    """Trainable parameters the loss reads only through no-grad regions (LayoutLMv3's relative
    position tables under ``torch.no_grad()``): frozen, as PyTorch's optimizer skips a parameter
    whose ``.grad`` stays None. None are moved when that would leave nothing to train (the
    gradient pre-check then says why)."""
    trainable = {n: vs for n, vs in pvar_by_fqn.items() if params[n].requires_grad}
    stopped = params_without_gradient(func, [v for vs in trainable.values() for v in vs])
    gradless = [n for n, vs in trainable.items() if all(v in stopped for v in vs)]
    return gradless if len(gradless) < len(trainable) else []


def initial_arrays(model, params: dict, names: list, bn_specs: list,
                   carried: list = ()) -> tuple[dict, dict]:
    """The parameters' values and the BatchNorm and carried buffers, as numpy arrays by step name.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    params : dict
        ``dict(model.named_parameters())``.
    names : list of str
        The parameters the step reads.
    bn_specs : list of BNSpec
        The BatchNorm layers whose statistics are states.
    carried : list of str
        The other buffers the step carries (``model.named_buffers()`` names).

    Returns
    -------
    (dict, dict)
        Parameter values and buffer values.
    """
    values = {n: to_numpy(params[n]) for n in names}
    mods = dict(model.named_modules())
    bufs = {}
    for spec in bn_specs:
        m = mods[spec.name]
        bufs[f"{spec.name}.running_mean"] = to_numpy(m.running_mean)
        bufs[f"{spec.name}.running_var"] = to_numpy(m.running_var)
        if spec.track_count:
            bufs[f"{spec.name}.num_batches_tracked"] = to_numpy(m.num_batches_tracked)
    buffers = dict(model.named_buffers())
    for name in carried:
        bufs[name] = to_numpy(buffers[name])
    return values, bufs


def input_names(model, n: int) -> list:
    """Names of the first ``n`` arguments of ``model.forward`` (``input_<i>`` as fallback)."""
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
