"""Relax -> plain graph: in-place updates, views and the three IR levels."""
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from roam_tvm.passes import ExtractError, extract_graph

LLVM = tvm.target.Target("llvm")


@I.ir_module
class SgdStep:
    @T.prim_func(private=True, s_tir=True)
    def sgd(p: T.handle, g: T.handle):
        T.func_attr({"op_pattern": 8})  # opaque: never fused with the reshape views
        n = T.int64()
        P = T.match_buffer(p, (n,), "float32")
        G = T.match_buffer(g, (n,), "float32")
        for i in range(n):
            with T.sblock("update"):
                vi = T.axis.spatial(n, i)
                P[vi] = P[vi] - T.float32(0.1) * G[vi]

    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        cls = SgdStep
        with R.dataflow():
            h = R.nn.relu(R.matmul(x, w))
            loss = R.sum(h)
            g = R.matmul(R.permute_dims(x), h)
            wn = R.call_tir_inplace(cls.sgd, (R.reshape(w, (64,)), R.reshape(g, (64,))),
                                    inplace_indices=[0], out_ty=R.Tensor((64,), "float32"))
            out = (loss, wn)
            R.output(out)
        return out


def scheduled():
    with LLVM:
        return tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                         relax.transform.FuseOps(), relax.transform.FuseTIR()])(SgdStep)


def lowered():
    with LLVM:
        return tvm.transform.Sequential([relax.transform.RewriteDataflowReshape(), relax.transform.ToNonDataflow(),
                                         relax.transform.RemovePurityChecking(),
                                         relax.transform.CallTIRRewrite()])(scheduled())


@pytest.mark.parametrize("level", ["call_tir", "lowered"])
def test_update_waits_for_every_reader_of_the_parameter(level):
    mod = scheduled() if level == "call_tir" else lowered()
    g = extract_graph(mod["main"], mod, param_kinds={"w": "param", "x": "input"}).graph
    update = next(op.id for op in g.ops if op.kind == "update")
    w = next(t.id for t in g.tensors if t.name == "w")
    # Versions of w made by the update (and views of them) may be read afterwards.
    new_versions = set(g.ops[update].outputs)
    for t in g.tensors:
        if t.alias_of in new_versions:
            new_versions.add(t.id)
    readers_of_w = {op.id for op in g.ops if op.id != update and any(
        g.roots[t] == w and t not in new_versions for t in op.inputs)}
    assert readers_of_w, "the forward matmul reads w"
    ancestors, stack = set(), [update]
    while stack:
        for p in g.predecessors[stack.pop()]:
            if p not in ancestors:
                ancestors.add(p)
                stack.append(p)
    assert readers_of_w <= ancestors
    assert g.tensors[w].kind == "param" and w in g.always_live


def test_lowered_and_call_tir_levels_agree_on_memory():
    a = scheduled()
    b = lowered()
    ga = extract_graph(a["main"], a).graph
    gb = extract_graph(b["main"], b).graph
    # Reshapes are views at both levels; the in-place update allocates nothing.
    assert ga.peak() == gb.peak()
    assert sorted(ga.tensors[t].size for t in ga.allocated) == sorted(gb.tensors[t].size for t in gb.allocated)


def test_planned_function_is_read_at_storage_level():
    b = lowered()
    with LLVM:
        planned = relax.transform.StaticPlanBlockMemory()(b)
    g = extract_graph(planned["main"], planned, planned=True).graph
    storages = [t for t in g.allocated if g.tensors[t].dtype == "uint8"]
    assert storages and g.peak() >= extract_graph(b["main"], b).graph.peak()
    with pytest.raises(ExtractError, match="already memory-planned"):
        extract_graph(planned["main"], planned)


def test_unbounded_dynamic_dim_names_the_variable():
    @I.ir_module
    class Dyn:
        @R.function
        def main(x: R.Tensor(("n",), "float32")):
            with R.dataflow():
                y = R.exp(x)
                R.output(y)
            return y

    with pytest.raises(ExtractError, match="n.*tir_var_upper_bound"):
        extract_graph(Dyn["main"], Dyn)
