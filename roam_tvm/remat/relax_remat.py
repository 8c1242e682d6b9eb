"""RoamRemat: apply a recomputation plan to a Relax function (call_tir level).

This is the one file of :mod:`roam_tvm.remat` that imports TVM (the package's
``__init__`` does not import it). It runs where ``RoamOrder`` runs: after
fusion and scheduling, before dataflow lowering. For each function:

1. extract the plain graph (``roam_tvm.passes.extract_graph``);
2. plan with :class:`~roam_tvm.remat.planner.RematPlanner` on the function's
   binding order (run ``RoamOrder`` first to start from roam's order) under
   the budget: bytes, or a fraction of that order's peak;
3. rewrite: emit the bindings in the plan's order; a copy re-emits the
   bindings of the op it recomputes with fresh variables, reading the versions
   the plan chose; late readers read the copy's variables. A call the plan
   writes in place (its input dies there, its kernel proven safe:
   :mod:`roam_tvm.remat.inplace_tir`) becomes ``R.call_tir_inplace`` of a
   derived kernel (:mod:`roam_tvm.remat.relax_inplace`).

A copy is the same ``call_tir`` of the same PrimFunc on equal inputs, so the
step computes the same values bit for bit. The extracted graph of the result
is checked against the plan (peak <= budget) before it is returned.
"""
from __future__ import annotations

import warnings

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..graph.model import Graph
from ..passes.extract import ExtractError, RelaxGraph, extract_graph
from .budget import Budget, parse_budget
from .floor import Floor
from .planner import RematPlan
from .portfolio import RematPortfolio
from .relax_inplace import InplaceCalls, inplace_candidates

__all__ = ["RoamRemat", "remat_function", "op_flops"]


def op_flops(mod: tvm.IRModule, g: Graph) -> list[float]:
    """FLOPs of each op: TVM's estimate for the PrimFunc it calls (0 for views and the rest)."""
    from tvm.s_tir.analysis import estimate_tir_flops

    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    cache: dict[str, float] = {}
    out = []
    for op in g.ops:
        if op.kind == "view" or op.name not in funcs:
            out.append(0.0)
            continue
        if op.name not in cache:
            cache[op.name] = float(estimate_tir_flops(tvm.IRModule({"main": funcs[op.name]})))
        out.append(cache[op.name])
    return out


@mutator
class _Substitute(PyExprMutator):
    """Replace variables by others in one expression."""

    def __init__(self, var_map: dict):
        super().__init__()
        self.var_map = var_map

    def visit_var_(self, op: relax.Var) -> relax.Expr:  # noqa: N802 (TVM's visitor names)
        return self.var_map.get(op, op)

    def visit_dataflow_var_(self, op: relax.DataflowVar) -> relax.Expr:  # noqa: N802
        return self.var_map.get(op, op)


def _single_block(rg: RelaxGraph) -> int:
    blocks = {bi for bindings in rg.op_bindings for bi, _ in bindings}
    if len(blocks) != 1:
        raise ExtractError(f"recomputation needs the function's ops in one binding block, found "
                           f"{len(blocks)}; run it on the dataflow (call_tir) level of a training step")
    return blocks.pop()


def _tensor_vars(rg: RelaxGraph) -> dict[int, relax.Var]:
    """Tensor id -> the variable holding exactly that tensor (not a tuple of it)."""
    out = {}
    for var, ids in rg.var_tensors.items():
        if len(ids) == 1 and isinstance(var.ty, relax.TensorType):
            out.setdefault(ids[0], var)
    return out


def _tuple_leaves(rg: RelaxGraph) -> dict[int, tuple[relax.Var, int]]:
    """Tensor id -> (variable, field) for the fields of flat tuple variables (a multi-output call)."""
    out = {}
    for var, ids in rg.var_tensors.items():
        ty = var.ty
        if isinstance(ty, relax.TupleType) and len(ids) == len(ty.fields) \
                and all(isinstance(f, relax.TensorType) for f in ty.fields):
            for k, t in enumerate(ids):
                out.setdefault(t, (var, k))
    return out


def _input_map(op_name: str, g0: Graph, pairs, var_of: dict, leaf_of: dict) -> dict:
    """Variable substitution that makes an op read its plan inputs ``new`` instead of ``old``:
    a tensor variable for a tensor variable, or a tuple variable for a tuple variable when every
    field the op reads moves to the same field of the other tuple (a copy of a multi-output call)."""
    var_map: dict = {}
    fields: dict = {}  # old tuple var -> {field: new (var, field)}
    for old, new in pairs:
        if old == new:
            if old in leaf_of:
                fields.setdefault(leaf_of[old][0], {})[leaf_of[old][1]] = leaf_of[old]
            continue
        if old in var_of and new in var_of:
            var_map[var_of[old]] = var_of[new]
        elif old in leaf_of and new in leaf_of:
            fields.setdefault(leaf_of[old][0], {})[leaf_of[old][1]] = leaf_of[new]
        else:
            raise ExtractError(f"op {op_name!r}: no variable for tensor {g0.tensors[old].name!r}; "
                               f"cannot recompute through it")
    for tv, moved in fields.items():
        targets = {v for v, _ in moved.values()}
        if targets == {tv}:
            continue
        if len(targets) != 1 or any(k != j for k, (_, j) in moved.items()):
            raise ExtractError(f"op {op_name!r} reads fields of {tv.name} from different copies; "
                               f"cannot recompute through it")
        var_map[tv] = targets.pop()
    return var_map


def _inplace_args(rg: RelaxGraph, plan: RematPlan) -> dict[int, list[tuple[int, int]]]:
    """Op id -> (output index, call argument index) of the plan's in-place writes."""
    g0, ops = rg.graph, plan.graph.ops
    out: dict[int, list[tuple[int, int]]] = {}
    for o, x, y in plan.inplace:
        src = plan.source.get(o, o)
        x0 = g0.ops[src].inputs[ops[o].inputs.index(x)]
        (bi, i), = rg.op_bindings[src]
        args = rg.func.body.blocks[bi].bindings[i].value.args[1].fields
        k = [j for j, a in enumerate(args) if isinstance(a, relax.Var) and rg.var_tensors.get(a) == [x0]]
        if len(k) != 1:
            raise ExtractError(f"op {ops[o].name!r}: in-place input {g0.tensors[x0].name!r} is not one argument")
        out.setdefault(o, []).append((ops[o].outputs.index(y), k[0]))
    return out


def remat_function(rg: RelaxGraph, plan: RematPlan, calls: InplaceCalls | None = None) -> relax.Function:
    """``rg.func`` with the plan's copies, in-place calls and order (see the module docstring).

    ``calls`` collects the in-place kernels (add them to the module with
    ``calls.add_to``); it is required when the plan writes anything in place.
    """
    func, g0 = rg.func, rg.graph
    bi = _single_block(rg)
    block = func.body.blocks[bi]
    var_of = _tensor_vars(rg)
    leaf_of = _tuple_leaves(rg)
    ops = plan.graph.ops
    inplace = _inplace_args(rg, plan)
    if inplace and calls is None:
        raise ValueError("the plan writes in place: pass an InplaceCalls to collect its kernels")
    bindings = []
    for o in plan.order:
        src = plan.source.get(o, o)
        var_map = _input_map(ops[o].name, g0, zip(g0.ops[src].inputs, ops[o].inputs), var_of, leaf_of)
        for _, i in rg.op_bindings[src]:
            b = block.bindings[i]
            if not isinstance(b, relax.VarBinding):
                raise ExtractError(f"op {ops[o].name!r} has a {type(b).__name__}; only variable bindings "
                                   f"are recomputed")
            value = _Substitute(var_map).visit_expr(b.value) if var_map else b.value
            if o in inplace:
                value = calls.rewrite(value, inplace[o])
            var = b.var
            if o != src:
                var = type(b.var)(f"{b.var.name}_re", b.var.ty)
                var_map[b.var] = var  # later bindings of the same op read the copy
            bindings.append(relax.VarBinding(var, value))
        if o != src:
            for old, new in zip(g0.ops[src].outputs, ops[o].outputs):
                if old in var_of:
                    var_of[new] = var_map[var_of[old]]
                elif old in leaf_of and leaf_of[old][0] in var_map:  # a field of the copy's tuple
                    leaf_of[new] = (var_map[leaf_of[old][0]], leaf_of[old][1])
    if len(bindings) < len(block.bindings):
        raise ExtractError("internal: the recomputation rewrite lost bindings")
    cls = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else relax.BindingBlock
    blocks = list(func.body.blocks)
    blocks[bi] = cls(bindings)
    body = relax.SeqExpr(blocks, func.body.body)
    new_func = relax.Function(list(func.params), body, func.ret_ty, func.is_pure, func.attrs)
    return relax.BlockBuilder().normalize(new_func)


def arena_peak(mod: tvm.IRModule, gv: tvm.ir.GlobalVar, func: relax.Function, layout: dict,
               calls: InplaceCalls | None = None) -> int:
    """Simulated peak of ``func`` in ``mod`` once lowered as roam's planners lower it
    (``roam_lower_passes``) and laid out by ``RoamLayout(**layout)``."""
    from ..passes import RoamLayout
    from ..runtime.pipeline import roam_lower_passes

    m = mod.clone()
    m[gv] = func
    if calls is not None:
        calls.add_to(m)
    lowered = tvm.transform.Sequential(roam_lower_passes())(m)
    planned = RoamLayout(**layout)(lowered)
    return extract_graph(planned[gv], planned, gv.name_hint, planned=True).graph.peak()


@tvm.transform.module_pass(opt_level=0, name="RoamRemat")
class RoamRemat:
    """Recompute forward activations so that each function's simulated peak fits a budget.

    Parameters
    ----------
    budget : Budget, str or int
        Bytes (``8GiB``, ``123456``) or a fraction in (0, 1] of the function's
        peak in its binding order (see :mod:`roam_tvm.remat.budget`).
    functions : list of str
        Functions to plan (default: ``["train_step"]``).
    cost_model : str
        ``"roofline"`` (default: H100 time from TVM's FLOP estimate of each
        kernel and its bytes), ``"flops"`` or ``"bytes"``.
    layout : dict, optional
        When given, the budget holds for the arena that ``RoamLayout(**layout)``
        plans after dataflow lowering (alignment and fragmentation included),
        not only for perfect packing: each candidate plan is lowered, laid out
        and simulated (slower: one layout per plan tried).
    time_limit : float, optional
        Seconds the recomputation search may take per function (see
        :class:`~roam_tvm.remat.planner.RematPlanner`); default no limit.
    inplace : bool
        Write a call's output into an input that dies there when its kernel
        is proven safe for it (default True; free: no recomputation).
    paths : sequence of (bool, bool), optional
        The (lean chains, hoisting) move sets of the greedy paths
        (:class:`~roam_tvm.remat.portfolio.RematPortfolio`); default all three.

    Attributes
    ----------
    plans : dict of str to RematPlan
        The plan applied to each function (for reports).
    planners : dict of str to RematPortfolio
        The planner of each function (:meth:`floor` gives its floor for reports).
    """

    def __init__(self, budget: Budget | str | int, functions: list[str] | None = None,
                 cost_model: str = "roofline", layout: dict | None = None,
                 time_limit: float | None = None, inplace: bool = True, paths=None):
        self.paths = paths  # (lean, hoist[, readers_first[, siblings]]) move sets of the portfolio; default all of PATHS
        self.budget = parse_budget(budget) if isinstance(budget, str) else budget
        self.inplace = inplace
        self.layout = layout
        self.time_limit = time_limit
        self.functions = ["train_step"] if functions is None else list(functions)
        self.cost_model = cost_model
        self.plans: dict[str, RematPlan] = {}
        self.planners: dict[str, RematPortfolio] = {}
        self.measures: dict = {}  # function -> the peak measure its plan had to fit (None: perfect packing)
        self.skipped: dict[str, str] = {}  # function -> why it was left without recomputation

    def floor(self, name: str = "train_step") -> Floor:
        """The floor of function ``name``'s planner, measured as its budget is (with ``layout``,
        the laid-out arena: the least budget ``rewrite`` meets for it)."""
        return self.planners[name].floor(self.measures.get(name))

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        return self.rewrite(mod)

    def _rewrite_function(self, mod: tvm.IRModule, out: tvm.IRModule, gv: tvm.ir.GlobalVar, name: str) -> None:
        """Plan function ``name`` of ``mod`` under the budget and put its rewrite into ``out``."""
        rg = extract_graph(mod[gv], mod, name)
        from ..runtime.targets import is_gpu_target

        target = tvm.target.Target.current(allow_none=True)
        parallel = target is not None and is_gpu_target(target)  # kernels to be scheduled for a GPU
        pairs = inplace_candidates(mod, rg, parallel) if self.inplace else None
        planner = RematPortfolio(rg.graph, list(range(len(rg.graph.ops))), self.cost_model,
                                 op_flops(mod, rg.graph), time_limit=self.time_limit, inplace=pairs,
                                 **({} if self.paths is None else {"paths": self.paths}))
        self.planners[name] = planner

        def arena_measure(p: RematPlan) -> int:
            calls = InplaceCalls(mod)
            return arena_peak(mod, gv, remat_function(rg, p, calls), self.layout, calls)

        measure = arena_measure if self.layout is not None else None
        self.measures[name] = measure
        plan = planner.plan(self.budget, measure)
        self.plans[name] = plan
        if not plan.source and not plan.inplace:
            return
        calls = InplaceCalls(out)
        new_func = remat_function(rg, plan, calls)
        trial = out.clone()  # ``out`` gets the kernels only once the rewrite is checked
        calls.add_to(trial)
        peak = extract_graph(new_func, trial, name).graph.peak()
        if peak > plan.budget:
            raise RuntimeError(f"RoamRemat: {name}: rewritten function peaks at {peak} B, over the "
                               f"budget {plan.budget} B (plan said {plan.peak} B)")
        calls.add_to(out)
        out[gv] = new_func

    def rewrite(self, mod: tvm.IRModule) -> tvm.IRModule:
        """What the pass does, callable directly so that a ``BudgetError`` keeps its type
        (TVM's FFI turns exceptions raised inside a pass into ``RuntimeError``)."""
        out = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
        names = {gv.name_hint: gv for gv in mod.functions}
        missing = [f for f in self.functions if f not in names]
        if missing:
            raise ValueError(f"RoamRemat: no function {missing} in the module; it has {sorted(names)}")
        for name in self.functions:
            try:
                self._rewrite_function(mod, out, names[name], name)
            except ExtractError as e:
                # What the planner cannot analyse, or the rewrite cannot emit, stays as it is: no
                # recomputation for that function (the report says whether it still fits), never
                # a crash of the step or a program the plan does not describe.
                self.skipped[name] = str(e)
                self.plans.pop(name, None)
                warnings.warn(f"RoamRemat: {name}: no recomputation, the function is left as it is: {e}",
                              stacklevel=2)
        return out
