"""Rows of ``benchmarks/remat.py``: one model prepared and planned, its baselines, the issue's targets."""
from __future__ import annotations

import time
from argparse import Namespace

_LAST: dict = {}  # one prepared model, reused by the next call with the same key


def prepare(name: str, sizes: dict, small: bool, target: str, order_time: float, time_limit: float,
            inplace: bool = True) -> dict:
    """Import, schedule and order one zoo model; returns its graph, FLOPs and a recomputation planner
    (with the in-place pairs its kernels allow, unless ``inplace`` is False)."""
    key = (name, tuple(sorted(sizes.items())), small, target, order_time, time_limit, inplace)
    if _LAST.get("key") == key:
        return _LAST["prep"]
    _LAST.clear()
    import tvm

    from roam_tvm.cli import load_step
    from roam_tvm.passes import RoamOrder, extract_graph
    from roam_tvm.remat import RematPortfolio
    from roam_tvm.remat.relax_inplace import inplace_candidates
    from roam_tvm.remat.relax_remat import op_flops
    from roam_tvm.report.compare import with_param_kinds
    from roam_tvm.report.simulate import schedule_for
    from roam_tvm.runtime.targets import as_target, is_gpu_target

    args = Namespace(model=name, batch=sizes.get("batch"), seq=sizes.get("seq"), image=sizes.get("image"),
                     small=small, optimizer=None, lr=None, loss=None, quiet=True)
    t0 = time.perf_counter()
    ts, spec = load_step(args)
    func = ts.func_name
    scheduled = schedule_for(with_param_kinds(ts), target)
    with tvm.target.Target(target):
        ordered = RoamOrder(functions=[func], time_limit=order_time)(scheduled)
    rg = extract_graph(ordered[func], ordered, func)
    g = rg.graph
    flops = op_flops(ordered, g)
    # kernels built for a GPU are written in place only under the GPU rule, as RoamRemat does
    pairs = inplace_candidates(ordered, rg, is_gpu_target(as_target(target))) if inplace else None
    prep = {"name": name, "sizes": sizes, "small": small, "g": g,
            "config": {k: v for k, v in spec.config.items() if isinstance(v, (int, float, str, bool))},
            "planner": RematPortfolio(g, list(range(len(g.ops))), "roofline", flops, time_limit=time_limit,
                                    inplace=pairs),
            "prepare_seconds": time.perf_counter() - t0}
    _LAST.update(key=key, prep=prep)
    return prep


def order_free_bound(prep: dict):
    """The order-free bound of ``prep``'s graph (:mod:`roam_tvm.remat.cross_bound`), built once."""
    if "cross_bound" not in prep:
        from roam_tvm.remat.cross_bound import CrossingBound

        pl = prep["planner"]
        prep["cross_bound"] = CrossingBound(prep["g"], pl.costs, pl.cost_model, pl.inplace)
    return prep["cross_bound"]


def plan_one(prep: dict, budget: int, bound) -> dict:
    """One budget: the plan's peak and overheads, the LP bound and the gap, the order-free bounds
    (same kernels; any kernel), or the error."""
    from roam_tvm.remat import BudgetError

    planner = prep["planner"]
    t = time.perf_counter()
    try:
        plan = planner.plan(budget)
    except BudgetError as e:
        return {"budget_bytes": budget, "error": str(e), "floor_bytes": planner.floor().bytes,
                "lower_bound_bytes": planner.lower_bound, "largest_op": largest_op(prep["g"])}
    over = plan.report["overheads"]
    low = bound.overhead(budget)
    xb = order_free_bound(prep)
    same, anyk = xb.overhead(budget), xb.overhead(budget, "any_kernel")
    return {"budget_bytes": budget, "fraction_of_unbudgeted": budget / planner.unbudgeted_peak,
            "peak_bytes": plan.peak, "recomputed_ops": len(plan.source), "overhead_time": over.get("roofline"),
            "overhead_flops": over.get("flops"), "overhead_bytes": over.get("bytes"),
            "lp_bound_time": low, "gap_time": None if low is None else over["roofline"] - low,
            "order_free_bound_time": same, "order_free_gap_time": None if same is None else over["roofline"] - same,
            "any_kernel_bound_time": anyk,
            "plan_seconds": plan.report["plan_seconds"], "path": plan.report["path"],
            "hoists": plan.report["hoists"],
            "inplace_ops": plan.report.get("inplace_ops", 0), "inplace_bytes": plan.report.get("inplace_bytes", 0),
            "query_seconds": time.perf_counter() - t, "truncated": planner.truncated}


def largest_op(g) -> dict:
    """The op whose inputs, outputs and workspace are largest (what sets the lower bound)."""
    def foot(op):
        return sum(g.tensors[t].size for t in dict.fromkeys((*op.inputs, *op.outputs))) + op.workspace

    op = max(g.ops, key=foot)
    return {"name": op.name, "bytes": foot(op),
            "tensors": [[g.tensors[t].name, g.tensors[t].size] for t in dict.fromkeys((*op.inputs, *op.outputs))]}


def plan_row(prep: dict, n_budgets: int) -> dict:
    """``n_budgets`` budgets from the floor to roam's unbudgeted peak, with the monotone check."""
    from roam_tvm.remat.lp_bound import RelaxedBound

    planner = prep["planner"]
    t0 = time.perf_counter()
    floor = planner.floor()
    floor_seconds = time.perf_counter() - t0
    bound = RelaxedBound(prep["g"], planner.base_order, planner.costs, planner.inplace)
    top = planner.unbudgeted_peak
    rows = [plan_one(prep, floor.bytes + (top - floor.bytes) * k // max(1, n_budgets - 1), bound)
            for k in range(n_budgets)]
    costs = [r["overhead_time"] for r in rows]
    return {"model": prep["name"], "sizes": prep["sizes"], "small": prep["small"], "config": prep["config"],
            "ops": len(prep["g"].ops), "unbudgeted_peak_bytes": top, "floor_bytes": floor.bytes,
            "inplace_peak_bytes": planner.initial_peak,
            "inplace_candidate_ops": len(planner.inplace.positions) if planner.inplace else 0,
            "floor": floor.describe(), "lower_bound_bytes": floor.lower_bound,
            "path_states": sum(len(p.states) for p in planner.paths),
            "path_seconds": planner.seconds, "truncated": planner.truncated, "lp_variables": bound.variables,
            "prepare_seconds": prep["prepare_seconds"], "floor_seconds": floor_seconds,
            "max_plan_seconds": max(r["plan_seconds"] for r in rows),
            "monotone": all(costs[i + 1] <= costs[i] for i in range(len(costs) - 1)),
            "peaks_fit": all(r["peak_bytes"] <= r["budget_bytes"] for r in rows), "budgets": rows}


def baselines(name: str, sizes: dict, small: bool) -> dict:
    """PyTorch eager and per-stage/per-block checkpointing on the eager simulator."""
    from roam_tvm.report.checkpointed import checkpointed_spec, eager_step_time
    from roam_tvm.report.pytorch_peak import simulate_eager_step
    from roam_tvm.zoo import MODELS, get_model

    spec = get_model(name, small=small, meta=MODELS[name].needs_meta_for_default and not small, **sizes)
    eager = simulate_eager_step(spec)
    out = {"pytorch": {"peak_bytes": eager["peak_bytes"], "overhead_time": 0.0, "overhead_flops": 0.0}}
    try:
        ck, what = checkpointed_spec(spec)
    except ValueError as e:
        out["checkpoint"] = {"error": str(e)}
        return out
    t0, t1 = eager_step_time(spec), eager_step_time(ck)
    out["checkpoint"] = {"wraps": what, "peak_bytes": simulate_eager_step(ck)["peak_bytes"],
                         "overhead_time": t1["seconds"] / t0["seconds"] - 1,
                         "overhead_flops": t1["flops"] / t0["flops"] - 1,
                         "overhead_note": "eager roofline of the aten ops (unfused), checkpointed vs plain"}
    return out


def _why(row: dict, limit: float) -> str:
    """What the bounds say about a missed target."""
    anyk, same, lp = row.get("any_kernel_bound_time"), row.get("order_free_bound_time"), row.get("lp_bound_time")
    if anyk is not None and anyk > limit:
        return (f"no recomputation plan meets it, in any order and with any kernel that stores what it "
                f"recomputes (fused ones too): writing again the bytes that must go already costs {anyk:.1%}")
    if same is not None and same > limit:
        return (f"no plan that recomputes with the same kernels meets it, in any order: order-free bound "
                f"{same:.1%}; only new (fused) kernels could, and they cost at least {anyk:.1%}")
    if lp is not None and lp > limit:
        return f"no plan of the planner's moves in roam's order meets it: LP bound {lp:.1%}"
    return "the search: the bounds allow it"


def run_targets(targets: list, args, parse_model, save_to=None) -> list[dict]:
    """The issue's target rows: plan each budget, say whether the overhead limit holds and by how much not."""
    from roam_tvm.remat.lp_bound import RelaxedBound

    out: list[dict] = []
    base_cache: dict[str, dict] = {}
    for spec_text, kind, value, limit in targets:
        name, sizes = parse_model(spec_text)
        t0 = time.perf_counter()
        try:
            if kind == "pytorch":
                if spec_text not in base_cache:
                    base_cache[spec_text] = baselines(name, sizes, False)
                ref = base_cache[spec_text]["pytorch"]["peak_bytes"]
                budget, text = int(ref * value), f"{value:.0%} of PyTorch's peak ({ref} B)"
            elif kind.startswith("roam:"):
                rname, rsizes = parse_model(kind[5:])
                ref = prepare(rname, rsizes, False, args.target, args.order_time_limit,
                              args.time_limit, not args.no_inplace)["planner"].unbudgeted_peak
                budget, text = int(ref * value), f"roam's unbudgeted peak of {kind[5:]} ({ref} B)"
            else:
                budget, text = int(value), f"{value / (1 << 30):g} GiB"
            prep = prepare(name, sizes, False, args.target, args.order_time_limit, args.time_limit,
                           not args.no_inplace)
            row = plan_one(prep, budget, RelaxedBound(prep["g"], prep["planner"].base_order,
                                                      prep["planner"].costs, prep["planner"].inplace))
            row["unbudgeted_peak_bytes"] = prep["planner"].unbudgeted_peak
        except Exception as e:  # a target that cannot run is recorded as a miss, with why
            row = {"error": f"{type(e).__name__}: {e}"}
            budget, text = None, kind
        row.update(model=spec_text, budget=text, budget_bytes=budget, overhead_limit=limit,
                   seconds=time.perf_counter() - t0)
        over = row.get("overhead_time")
        row["met"] = over is not None and over <= limit
        if over is not None and not row["met"]:
            row["missed_by"] = f"overhead {over:.1%} against {limit:.0%} (+{over - limit:.1%})"
            row["why"] = _why(row, limit)
        elif over is None:
            row["missed_by"] = row.get("error", "no plan")
        out.append(row)
        print(f"target {spec_text} @ {text}: {row.get('missed_by', 'met')} "
              f"(overhead {over if over is None else f'{over:.2%}'})", flush=True)
        if save_to is not None:
            save_to[0]["targets"] = out
            save_to[1]()
    return out
