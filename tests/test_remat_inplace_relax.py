"""RoamRemat's in-place calls on Relax: emitted as planned, same bits on llvm, checked independently."""
import numpy as np
import pytest
import tvm
import tvm_ffi
from test_remat_relax import Chain, _build, _lowered, _run
from tvm import relax, tirx
from tvm.script import tirx as T

from roam_tvm.passes import extract_graph
from roam_tvm.remat.check import check_recompute
from roam_tvm.remat.relax_remat import RoamRemat


def _inplace_calls(func):
    return [b for blk in func.body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and b.value.op.name == "relax.call_tir_inplace"]


@pytest.fixture(scope="module")
def chain():
    mod = _lowered(Chain)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") * 0.1 for s in [(256, 64)] + [(64, 64)] * 3]
    return mod, args, _run(_build(mod), "main", args)


@pytest.mark.parametrize("budget", ["1", "floor"])
def test_inplace_calls_are_emitted_fit_and_give_the_same_bits(chain, budget):
    mod, args, want = chain
    if budget == "floor":
        from roam_tvm.remat import RematPlanner

        g = extract_graph(mod["main"], mod, "main").graph
        budget = RematPlanner(g, list(range(len(g.ops))), inplace={}).floor().bytes
    rr = RoamRemat(budget, functions=["main"])
    new = rr.rewrite(mod)
    plan = rr.plans["main"]
    assert plan.inplace and len(_inplace_calls(new["main"])) == len(plan.inplace)
    assert extract_graph(new["main"], new, "main").graph.peak() == plan.peak
    off = RoamRemat(budget, functions=["main"], inplace=False)
    off.rewrite(mod)
    assert plan.peak < off.plans["main"].peak or plan.cost < off.plans["main"].cost
    assert check_recompute(mod["main"], new["main"], new) == []
    got = _run(_build(new), "main", args)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def _replace_binding(func, i, value):
    block = func.body.blocks[0]
    bindings = list(block.bindings)
    bindings[i] = relax.VarBinding(bindings[i].var, value)
    return relax.Function(func.params, relax.SeqExpr([relax.DataflowBlock(bindings)], func.body.body),
                          func.ret_ty, func.is_pure, func.attrs)


def _index(func, pred):
    return next(i for i, b in enumerate(func.body.blocks[0].bindings) if pred(b))


def test_checker_rejects_an_inplace_write_of_a_value_read_later(chain):
    mod = chain[0]
    new = RoamRemat("1", functions=["main"]).rewrite(mod)
    f = new["main"]
    # The first transpose reads lv1 later; overwrite lv1 in place before it with a derived kernel of its own.
    i = _index(f, lambda b: b.value.op.name == "relax.call_tir_inplace")
    call = f.body.blocks[0].bindings[i].value
    lv1 = next(b.var for b in f.body.blocks[0].bindings if b.var.name == "lv1")
    args = [lv1 if k == 0 else a for k, a in enumerate(call.args[1].fields)]
    bad = relax.op.call_tir_inplace(call.args[0], args, [0], call.ty_args[0])
    problems = check_recompute(mod["main"], _replace_binding(f, i, bad), new)
    assert any("after" in p and "overwrote it in place" in p for p in problems), problems


@T.prim_func(private=True, s_tir=True)
def shifted(a: T.Buffer((256, 64), "float32"), out: T.Buffer((256, 64), "float32")):
    for i, j in T.grid(256, 64):
        with T.sblock("s"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = a[vi, (vj + 1) % 64]


def _called_in_place(chain, kernel, name: str):
    """The rewrite of ``chain`` at budget 1 with its first in-place call redirected to ``kernel``
    made in place by plain substitution (output 0 into input 0; no safety check), marked as
    ``name``'s in-place form: (reference, rewritten function, its module, the kernel's GlobalVar)."""
    mod = chain[0]
    new = RoamRemat("1", functions=["main"]).rewrite(mod)
    f = new["main"]
    a, o = kernel.params
    body = tvm_ffi.structural_map(kernel.body, [(tirx.Var, lambda x: a if x.same_as(o) else x)])
    inplace = tirx.PrimFunc([a], body, kernel.ret_type, kernel.attrs).with_attr(
        "roam.inplace_of", [name, [[0, 0]]])
    bb = relax.BlockBuilder()
    kgv, igv = bb.add_func(kernel, name), bb.add_func(inplace, name + "_inplace")
    mod2 = new.clone()
    mod2[kgv], mod2[igv] = kernel, inplace
    i = _index(f, lambda b: b.value.op.name == "relax.call_tir_inplace")
    call = f.body.blocks[0].bindings[i].value
    rewritten = _replace_binding(f, i, relax.op.call_tir_inplace(igv, list(call.args[1].fields), [0],
                                                                   call.ty_args[0]))
    return mod["main"], rewritten, mod2, igv


def test_checker_rejects_an_unsafe_kernel_marked_as_inplace(chain):
    # A kernel whose output element reads a neighbouring input element, made in place by plain
    # substitution (what the rewrite refuses to do), and called where the rewrite wrote in place.
    reference, rewritten, mod2, igv = _called_in_place(chain, shifted, "shifted")
    problems = check_recompute(reference, rewritten, mod2)
    assert any("refused" in p and "another element" in p for p in problems), problems
    # and a kernel that is not the claimed one with its output redirected
    mod2[igv] = tirx.PrimFunc([shifted.params[0]], shifted.body, shifted.ret_type, shifted.attrs).with_attr(
        "roam.inplace_of", ["shifted", [[0, 0]]])
    problems = check_recompute(reference, rewritten, mod2)
    assert any("is not shifted" in p and "redirected" in p for p in problems), problems


@T.prim_func(private=True, s_tir=True)
def two_stage(a: T.Buffer((256, 64), "float32"), out: T.Buffer((256, 64), "float32")):
    # safe for sequential loops (the first stage ends before the first write), not on a GPU
    e = T.sblock_alloc_buffer((256, 64), "float32")
    for i, j in T.grid(256, 64):
        with T.sblock("first"):
            vi, vj = T.axis.remap("SS", [i, j])
            e[vi, vj] = a[vi, (vj + 1) % 64]
    for i, j in T.grid(256, 64):
        with T.sblock("second"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = e[vi, vj] * T.float32(2)


def test_checker_refuses_a_staged_kernel_in_place_for_a_gpu(chain):
    # The checker's own rule for GPU builds (an H200 run found such kernels staged through global
    # scratch and giving other bits): a kernel of several blocks is not written in place there.
    reference, rewritten, mod2, _ = _called_in_place(chain, two_stage, "two_stage")
    on_cpu = check_recompute(reference, rewritten, mod2)
    on_gpu = check_recompute(reference, rewritten, mod2, gpu=True)
    assert not any("refused" in p for p in on_cpu), on_cpu
    assert any("refused" in p and "one block" in p for p in on_gpu), on_gpu


def test_checker_rejects_overwriting_a_parameter(chain):
    mod = chain[0]
    new = RoamRemat("1", functions=["main"]).rewrite(mod)
    f = new["main"]
    i = _index(f, lambda b: b.value.op.name == "relax.call_tir_inplace")
    call = f.body.blocks[0].bindings[i].value
    x = f.params[0]
    bad = relax.op.call_tir_inplace(call.args[0], [x], [0], call.ty_args[0])
    problems = check_recompute(mod["main"], _replace_binding(f, i, bad), new)
    assert any("function parameter x" in p for p in problems), problems
