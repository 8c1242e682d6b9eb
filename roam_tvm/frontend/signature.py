"""The names and variables of ``train_step``'s parameters, in signature order.

Order (see :mod:`roam_tvm.frontend.step`): inputs, targets, trainable parameters, frozen
parameters, optimizer states, BatchNorm statistics, carried states, then per-step scalars.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import relax

from .optim import Optimizer


@dataclass(frozen=True)
class StepNames:
    """The names of the forward's parameters, by kind, in the forward's parameter order."""

    inputs: tuple
    targets: tuple
    params: tuple
    frozen: tuple = ()
    carried: tuple = ()

    def in_order(self) -> list:
        """Every name, in the order of the forward's parameters."""
        return (list(self.inputs) + list(self.targets) + list(self.params) + list(self.frozen)
                + list(self.carried))

    def split(self, fwd_params: list) -> tuple[list, list, list, list]:
        """The forward's parameters as (inputs and targets, params, frozen, carried)."""
        n_data = len(self.inputs) + len(self.targets)
        n_p, n_f = len(self.params), len(self.frozen)
        ps = list(fwd_params)
        return (ps[:n_data], ps[n_data:n_data + n_p], ps[n_data + n_p:n_data + n_p + n_f],
                ps[n_data + n_p + n_f:])


def _static(ty: relax.TensorType) -> tuple:
    return tuple(int(s) for s in ty.shape.values)


@dataclass
class StepSignature:
    """``train_step``'s signature, shapes and the variables of its added parameters."""

    sig: list = field(default_factory=list)            # (name, kind) in order
    shapes: dict = field(default_factory=dict)         # name -> (shape tuple, dtype)
    opt_states: dict = field(default_factory=dict)     # param name -> [state vars]
    bn_states: dict = field(default_factory=dict)      # "<bn>.running_mean" ... -> var
    hyper_vars: dict = field(default_factory=dict)     # (hyper key, dtype) -> var
    hyper_dtypes: dict = field(default_factory=dict)   # hyper var name -> (hyper key, dtype)

    def parameters(self, data: list, pvars: list, fvars: list, cvars: list) -> list:
        """``train_step``'s parameter vars, in signature order."""
        states = [v for vs in self.opt_states.values() for v in vs] + list(self.bn_states.values())
        return list(data) + list(pvars) + list(fvars) + states + list(cvars) + list(
            self.hyper_vars.values())


def build_signature(names: StepNames, fwd_params: list, optimizer: Optimizer,
                    bn_info: list, bn_stat_types: list) -> StepSignature:
    """Name and type every parameter of ``train_step``.

    Parameters
    ----------
    names : StepNames
        The forward's parameter names.
    fwd_params : list of relax.Var
        The adjoint's parameters (same order and types as the forward's).
    optimizer : Optimizer
        Decides the per-parameter state suffixes and the per-step scalars.
    bn_info : list
        ``(spec, count, dtype)`` per BatchNorm (see ``bn_stats.add_bn_stat_outputs``).
    bn_stat_types : list of relax.TensorType
        The type of each BatchNorm's batch mean, in ``bn_info``'s order.

    Returns
    -------
    StepSignature
    """
    out = StepSignature()
    fixed = list(names.inputs) + list(names.targets) + list(names.params) + list(names.frozen)
    kinds = (["input"] * len(names.inputs) + ["target"] * len(names.targets)
             + ["param"] * len(names.params) + ["frozen"] * len(names.frozen))
    out.sig = list(zip(fixed, kinds))
    for n, p in zip(fixed, fwd_params):
        out.shapes[n] = (_static(p.ty), str(p.ty.dtype))
    _, pvars, _, cvars = names.split(fwd_params)
    opt_names = []
    for n, p in zip(names.params, pvars):
        out.opt_states[n] = []
        for suf in optimizer.state_suffixes:
            sn = f"{n}.{suf}"
            out.opt_states[n].append(relax.Var(sn, p.ty))
            out.shapes[sn] = out.shapes[n]
            opt_names.append(sn)
    bn_names = []
    for (spec, _, dtype), ty in zip(bn_info, bn_stat_types):
        for suf in ("running_mean", "running_var"):
            bn_names.append(f"{spec.name}.{suf}")
            out.shapes[bn_names[-1]] = (_static(ty), dtype)
        if spec.track_count:
            bn_names.append(f"{spec.name}.num_batches_tracked")
            out.shapes[bn_names[-1]] = ((), "int64")
    for sn in bn_names:
        shp, dt = out.shapes[sn]
        out.bn_states[sn] = relax.Var(sn, relax.TensorType(shp, dt))
    for n, v in zip(names.carried, cvars):
        out.shapes[n] = (_static(v.ty), str(v.ty.dtype))
    out.sig += [(n, "state") for n in opt_names + bn_names + list(names.carried)]
    # one set of per-step scalars per parameter dtype
    dtypes = sorted({str(p.ty.dtype) for p in pvars})
    for dt in dtypes:
        for h in optimizer.hyper_names:
            hn = f"hyper.{h}" if len(dtypes) == 1 else f"hyper.{h}.{dt}"
            out.hyper_vars[(h, dt)] = relax.Var(hn, relax.TensorType((), dt))
            out.hyper_dtypes[hn] = (h, dt)
    out.sig += [(n, "hyper") for n in out.hyper_dtypes]
    return out
