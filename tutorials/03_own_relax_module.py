"""Tutorial 3: RoamOrder and RoamLayout on your own Relax module, and the layout solver on its own.

    python tutorials/03_own_relax_module.py           # width 1024 (a few seconds of planning)
    python tutorials/03_own_relax_module.py --fast    # width 64, what the tests run

What it does:

1. writes a Relax module in TVMScript: four branches, each a big temporary (``matmul`` + ``relu``) reduced
   to a small vector (``sum``), written in the worst order (all big temporaries first, then all sums);
2. lowers it to where memory planning runs (``roam_tvm.runtime.lower_to_memory_planning``: legalize,
   fuse, ``CallTIRRewrite``) and compares ``StaticPlanBlockMemory`` with
   ``tvm.transform.Sequential([RoamOrder(), RoamLayout()])`` on that module;
3. builds the module with a custom Relax pipeline that runs the two passes in place of
   ``StaticPlanBlockMemory``, runs it on the CPU and checks the result against NumPy;
4. reads what the passes decided (``latest_order``, ``latest_layout``): the new order, the arena, every
   tensor's offset, and draws the arena;
5. solves a dynamic storage allocation (DSA) instance from a minimalloc CSV
   (``../shared/benchmarks/dsa/minimalloc/input.12.csv`` if present, else a small CSV written here) with
   ``roam_tvm.layout.solve``, validates it and draws it.

Outputs (``--out``, default ``tutorials/out/03_own_relax_module``): ``arena.png``, ``dsa.png``, ``dsa_solved.csv``.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MINIMALLOC_CSV = os.path.join(HERE, "..", "..", "shared", "benchmarks", "dsa", "minimalloc", "input.12.csv")
FALLBACK_CSV = """id,lower,upper,size
a,0,4,2
b,2,6,3
c,4,10,2
d,6,9,4
e,0,3,1
f,9,12,3
"""


def make_module(batch: int, width: int):
    """Four branches, each: h_i = relu(x @ w_i) (batch x width, big), s_i = sum(h_i, axis=1) (batch, small).

    The source order computes all four big ``h_i`` before any ``sum``, so all four are live at once;
    interleaving each ``sum`` right after its ``h_i`` keeps one alive at a time.
    """
    from tvm.script import ir as I
    from tvm.script import relax as R

    x_t = R.Tensor((batch, width), "float32")
    w_t = R.Tensor((width, width), "float32")

    @I.ir_module
    class Branches:
        @R.function
        def main(x: x_t, w0: w_t, w1: w_t, w2: w_t, w3: w_t):
            with R.dataflow():
                h0 = R.nn.relu(R.matmul(x, w0))
                h1 = R.nn.relu(R.matmul(x, w1))
                h2 = R.nn.relu(R.matmul(x, w2))
                h3 = R.nn.relu(R.matmul(x, w3))
                s0 = R.sum(h0, axis=1)
                s1 = R.sum(h1, axis=1)
                s2 = R.sum(h2, axis=1)
                s3 = R.sum(h3, axis=1)
                out = R.add(R.add(s0, s1), R.add(s2, s3))
                R.output(out)
            return out

    return Branches


def roam_passes(time_limit: float = 5.0):
    """The two roam passes as one pass: order first, then one arena instead of StaticPlanBlockMemory."""
    import tvm

    from roam_tvm.passes import RoamLayout, RoamOrder

    return tvm.transform.Sequential([RoamOrder(time_limit=time_limit), RoamLayout(time_limit=time_limit)],
                                    name="RoamPasses")


def custom_pipeline(time_limit: float = 5.0):
    """A Relax pipeline for ``tvm.compile``: lower to memory planning, roam passes, TVM's finalize passes."""
    import tvm

    from roam_tvm.runtime import finalize_rest_passes, lower_to_memory_planning

    @tvm.transform.module_pass(opt_level=0, name="MyRoamPipeline")
    def _pipeline(mod, _ctx):
        target = tvm.target.Target.current()  # tvm.compile enters the target before running the pipeline
        mod = lower_to_memory_planning(mod, target)
        with target:
            mod = roam_passes(time_limit)(mod)
            return tvm.transform.Sequential(finalize_rest_passes(target))(mod)

    return _pipeline


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fast", action="store_true", help="tiny sizes, for CI")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "03_own_relax_module"))
    ap.add_argument("--csv", default=None, help="a minimalloc CSV (id,lower,upper,size) to solve")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    import matplotlib.pyplot as plt
    import tvm
    from tvm import relax

    from roam_tvm.layout import read_csv, solve, validate, write_csv
    from roam_tvm.passes import extract_graph, latest_layout, latest_order
    from roam_tvm.report.plan import plan_problem
    from roam_tvm.report.plots import human_bytes, plot_timeline, save
    from roam_tvm.runtime import lower_to_memory_planning

    batch, width = (8, 64) if args.fast else (256, 1024)
    mod = make_module(batch, width)
    print(f"module: 4 branches of relu(x @ w) -> sum, x {batch}x{width}, w {width}x{width} (float32)")

    # ---- 2. lower to memory planning; StaticPlanBlockMemory vs the roam passes ------------------
    target = tvm.target.Target("llvm")
    lowered = lower_to_memory_planning(mod, target)
    with target:
        spbm = relax.transform.StaticPlanBlockMemory()(lowered)
        planned = roam_passes()(lowered)

    def peak(m):
        return extract_graph(m["main"], m, "main", planned=True).graph.peak()

    unplanned = extract_graph(lowered["main"], lowered, "main").graph
    before, after = peak(spbm), peak(planned)
    print(f"always live (inputs, weights): {human_bytes(unplanned.always_live_bytes)}")
    print(f"peak, StaticPlanBlockMemory in the source order: {human_bytes(before)}")
    print(f"peak, RoamOrder + RoamLayout:                    {human_bytes(after)} "
          f"({100 * (1 - after / before):.1f}% lower)")

    # ---- 3. build with a custom pipeline and run -------------------------------------------------
    exe = tvm.compile(mod, target="llvm", relax_pipeline=custom_pipeline())
    vm = relax.VirtualMachine(exe, tvm.cpu())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    ws = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(4)]
    got = vm["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(w) for w in ws]).numpy()
    want = sum(np.maximum(x @ w, 0).sum(axis=1) for w in ws)
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    ok = err < 1e-4
    print(f"built with the custom pipeline and ran: max relative error vs NumPy {err:.1e} "
          f"{'OK' if ok else 'MISMATCH'}")

    # ---- 4. what the passes recorded -----------------------------------------------------------------
    orec, lrec = latest_order("main"), latest_layout("main")
    ops = unplanned.ops
    print(f"RoamOrder: status {orec.status!r}, peak {human_bytes(orec.peak_before)} -> "
          f"{human_bytes(orec.peak_after)} ({orec.seconds:.2f} s)")
    if orec.order:
        print("  new order: " + ", ".join(ops[i].name.split(".")[-1] if i < len(ops) else str(i)
                                          for i in orec.order))
    print(f"RoamLayout: status {lrec.status!r}, method {lrec.method!r}, {lrec.planned_tensors} tensors, "
          f"arena {human_bytes(lrec.arena_bytes)} (lower bound {human_bytes(lrec.lower_bound_bytes)}), "
          f"StaticPlanBlockMemory would peak at {human_bytes(lrec.static_plan_peak_bytes)}")
    if lrec.offsets:
        if lrec.status != "roam":
            print("  (never worse: the arena below was planned but StaticPlanBlockMemory's plan simulated no higher,"
                  " so it was kept)")
        print(f"  {'tensor':24s} {'size':>12s} {'steps':>9s} {'offset':>12s}")
        for t in sorted(lrec.offsets, key=lambda t: lrec.offsets[t]):
            first, last = lrec.lifetimes[t]
            print(f"  {str(lrec.names.get(t, t)):24s} {human_bytes(lrec.sizes[t]):>12s} {first:>4d}-{last:<4d} "
                  f"{human_bytes(lrec.offsets[t]):>12s}")
        problem, sol = plan_problem(lrec)
        fig, ax = plt.subplots(figsize=(9, 4.5))
        plot_timeline(ax, problem.buffers, sol.offsets, height=lrec.arena_bytes,
                      lower_bound=lrec.lower_bound_bytes, label_top=8,
                      labels={str(t): str(lrec.names.get(t, t)) for t in lrec.offsets},
                      title=f"RoamLayout's arena for main ({batch}x{width}): {human_bytes(lrec.arena_bytes)}"
                      + ("" if lrec.status == "roam" else f"\n(not emitted: {lrec.status})"))
        arena_png = save(fig, os.path.join(args.out, "arena.png"))
        print(f"wrote {arena_png}")

    # ---- 5. a DSA instance from minimalloc CSV ----------------------------------------------------------
    path = args.csv or MINIMALLOC_CSV
    if not os.path.exists(path):
        path = os.path.join(args.out, "small_instance.csv")
        with open(path, "w") as f:
            f.write(FALLBACK_CSV)
    problem = read_csv(path)
    sol = solve(problem, time_limit=2.0 if args.fast else 20.0)
    bad = validate(problem, sol)
    print(f"DSA {os.path.relpath(path)}: {len(problem.buffers)} buffers, lower bound (max live) "
          f"{problem.lower_bound()}, solved height {sol.height} by {sol.method!r}, "
          f"{'valid' if not bad else 'INVALID: ' + '; '.join(bad[:3])}")
    for b in problem.buffers[:12]:
        print(f"  {b.id:6s} [{b.lower:3d}, {b.upper:3d})  size {b.size:5d}  offset {sol.offsets[b.id]}")
    if len(problem.buffers) > 12:
        print(f"  ... ({len(problem.buffers) - 12} more in the solved CSV)")
    solved_csv = os.path.join(args.out, "dsa_solved.csv")
    write_csv(solved_csv, problem, sol)
    fig, ax = plt.subplots(figsize=(7, 4))
    plot_timeline(ax, problem.buffers, sol.offsets, lower_bound=problem.lower_bound(), label_top=20 if len(problem.buffers) <= 50 else 0,
                  unit="B" if sol.height < 10**4 else None,
                  title=f"{os.path.basename(path)}: height {sol.height} ({sol.method})", xlabel="time")
    dsa_png = save(fig, os.path.join(args.out, "dsa.png"))
    print(f"wrote {dsa_png} and {solved_csv}")
    return 0 if ok and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
