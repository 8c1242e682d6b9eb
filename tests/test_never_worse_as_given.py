"""Never worse than StaticPlanBlockMemory on the module *as given*, whatever RoamOrder did first.

The module is TVM's own training route: ``relax.training.SetupTrainer`` on an
MLP backbone with SGD (the shape of TVM's training tests), lowered to where
memory planning runs. ``Sequential([RoamOrder(), RoamLayout()])`` must allocate
no more storage and reach no higher simulated peak than StaticPlanBlockMemory
on the input order, in every function, and compute the same bits.
"""
import numpy as np
import pytest
import tvm
from tvm import relax

from roam_tvm.passes import RoamLayout, RoamOrder
from roam_tvm.passes.roam_layout import plan_cost

LLVM = tvm.target.Target("llvm")
FINALIZE = [relax.transform.LowerAllocTensor(), relax.transform.KillAfterLastUse(),
            relax.transform.LowerRuntimeBuiltin(), relax.transform.ComputePrimValue(),
            relax.transform.VMShapeLower(), relax.transform.AttachGlobalSymbol()]


def trainer_module(batch: int, dims: tuple[int, ...]) -> tvm.IRModule:
    """SetupTrainer(MSELoss, SGD) on an MLP backbone, lowered to memory planning."""
    from tvm.relax.training import SetupTrainer
    from tvm.relax.training.loss import MSELoss
    from tvm.relax.training.optimizer import SGD

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, dims[0]), "float32"))
    params = []
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        params += [relax.Var(f"w{i}", relax.TensorType((a, b), "float32")),
                   relax.Var(f"b{i}", relax.TensorType((b,), "float32"))]
    with bb.function("backbone", [x, *params]):
        with bb.dataflow():
            h = x
            for i in range(len(dims) - 1):
                h = bb.emit(relax.op.add(relax.op.matmul(h, params[2 * i]), params[2 * i + 1]))
                if i < len(dims) - 2:
                    h = bb.emit(relax.op.nn.relu(h))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    mod = bb.get().with_attr("param_num", len(params)).with_attr("state_num", 0)
    pred = relax.TensorType((batch, dims[-1]), "float32")
    train = SetupTrainer(MSELoss(reduction="sum"), SGD(0.001), [pred, pred])(mod)
    with LLVM:
        return tvm.transform.Sequential([
            relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
            relax.transform.FuseOps(), relax.transform.FuseTIR(), relax.transform.RewriteDataflowReshape(),
            relax.transform.ToNonDataflow(), relax.transform.RemovePurityChecking(),
            relax.transform.CallTIRRewrite()])(train)


@pytest.mark.parametrize("batch,dims", [(4, (64, 128, 16)), (8, (32, 256, 64, 10)), (16, (784, 128, 10))])
def test_order_then_layout_is_never_worse_than_tvm_on_the_input_order(batch, dims):
    low = trainer_module(batch, dims)
    with LLVM:
        tvm_plan = relax.transform.StaticPlanBlockMemory()(low)
        roam = tvm.transform.Sequential([RoamOrder(time_limit=5), RoamLayout()])(low)
    total_tvm = total_roam = 0
    for gv, func in low.functions.items():
        if not isinstance(func, relax.Function):
            continue
        ours, theirs = plan_cost(roam[gv], roam), plan_cost(tvm_plan[gv], tvm_plan)
        assert ours.no_worse_than(theirs), (gv.name_hint, ours, theirs)
        total_tvm += theirs.storage_bytes
        total_roam += ours.storage_bytes
    assert total_roam <= total_tvm


def test_adjoint_is_bit_identical_to_tvm():
    low = trainer_module(4, (64, 128, 16))
    with LLVM:
        tvm_plan = relax.transform.StaticPlanBlockMemory()(low)
        roam = tvm.transform.Sequential([RoamOrder(time_limit=5), RoamLayout(never_worse=False)])(low)
    func = low["backbone_loss_adjoint"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d) for d in p.ty.shape]).astype("float32") for p in func.params]
    outs = []
    for mod in (roam, tvm_plan):
        with LLVM:
            ex = tvm.compile(tvm.transform.Sequential(FINALIZE)(mod), target=LLVM, relax_pipeline=None)
        res = relax.VirtualMachine(ex, tvm.cpu())["backbone_loss_adjoint"](*[tvm.runtime.tensor(a) for a in args])
        outs.append(_flat(res))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def _flat(v):
    if hasattr(v, "numpy"):
        return [v.numpy()]
    return [x for item in v for x in _flat(item)]
