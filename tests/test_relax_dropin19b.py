"""The roam pipeline as a drop-in for TVM's on modules as TVM users produce them.

Modules exported by ``tvm.relax.frontend.nn`` (MLP, a LLaMA-style block with RMSNorm,
rotary embedding, softmax attention and a SiLU-gated MLP, a conv net, prefill/decode
methods with a symbolic sequence length and ``tir_var_upper_bound``, a KV cache with
``effect_mode="packed"``, ``debug=True`` with ``op.print_``), imported from PyTorch by
``from_exported_program`` (transformer encoder layer, LSTM), built by ``relax.training``
(``SetupTrainer``), and handwritten kernels with ``T.sblock_alloc_buffer`` scratch and
``vm.builtin`` externs. Each is compiled with ``pipeline("llvm", order=False,
layout=False)`` (roam's ``tvm-default``) and with ``pipeline("llvm")``; outputs (and
inputs after the call) must be bit-identical, the measured peak no higher, and every
function roam leaves to StaticPlanBlockMemory must be named in a warning. A few modules are
also planned with ``Sequential([RoamOrder(), RoamLayout()])`` in StaticPlanBlockMemory's
place. CUDA builds are compiled (not run).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import tvm
from tvm import relax

from relax_fuzz import harness as H

from roam_tvm.passes import RoamLayout, RoamOrder
from roam_tvm.runtime import pipeline

nn = pytest.importorskip("tvm.relax.frontend.nn")
from tvm.relax.frontend.nn import op, spec  # noqa: E402
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

LLVM = tvm.target.Target("llvm")
PLAIN = {"param_mode": "plain", "effect_mode": "none"}


def _rng(seed=19):
    return np.random.default_rng(seed)


def _arr(rng, shape, dtype="float32"):
    if dtype.startswith("int"):
        return rng.integers(0, 64, size=shape).astype(dtype)
    return (rng.standard_normal(shape) * 0.5).astype(dtype)


def _flatten(out):
    if hasattr(out, "numpy"):
        return [out.numpy()]
    if isinstance(out, (int, float, bool)) or out is None:
        return [np.array(out)]
    return [x for o in out for x in _flatten(o)]


def _run(ex, calls):
    vm = relax.VirtualMachine(ex, tvm.cpu())
    if callable(calls):
        return calls(vm)
    res = []
    for fname, inputs in calls:
        args = [tvm.runtime.tensor(a) if isinstance(a, np.ndarray) else a for a in inputs]
        res.append(_flatten(vm[fname](*args)) + [a.numpy() for a in args if hasattr(a, "numpy")])
    return res


def _compile(mod, pl):
    with warnings.catch_warnings(record=True) as caught, LLVM:
        warnings.simplefilter("always")
        final = pl(mod)
    ex = tvm.compile(final, target="llvm", relax_pipeline=None)
    return ex, [str(w.message) for w in caught if str(w.message).startswith("Roam")]


def e2e(mod, calls, measure=None):
    """Default vs roam pipeline: bit-identical values; measured peak (``measure``) no higher."""
    ex_d, _ = _compile(mod, pipeline("llvm", order=False, layout=False))
    ex_r, warns = _compile(mod, pipeline("llvm"))
    ref, got = _run(ex_d, calls), _run(ex_r, calls)
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert not H.differences(a, b, len(a)), H.differences(a, b, len(a))
    if measure is not None:
        from roam_tvm.runtime.cpu_measure import measure_cpu_step
        peak_d = measure_cpu_step(ex_d, measure[1], func=measure[0]).peak_bytes
        peak_r = measure_cpu_step(ex_r, measure[1], func=measure[0]).peak_bytes
        assert peak_r <= peak_d, (peak_r, peak_d)
    return warns


def dropin(mod, calls):
    """StaticPlanBlockMemory vs Sequential([RoamOrder(), RoamLayout()]) at its place."""
    low = H.lower(mod)
    linker = H.Linker()
    values = []
    for plan in (relax.transform.StaticPlanBlockMemory(),
                 tvm.transform.Sequential([RoamOrder(time_limit=2.0, jobs=1, progress=False),
                                           RoamLayout(time_limit=2.0)])):
        with LLVM, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            planned = plan(low)
            final = tvm.transform.Sequential(H._finalize())(planned)  # pylint: disable=protected-access
        values.append(_run(linker.build(final), calls))
    for a, b in zip(*values):
        assert not H.differences(a, b, len(a))


def _pshape(p, env):
    return [int(d) if isinstance(d, int) else env[str(d)] for d in p.shape]


def _export(model, spec_, env, inputs, bound=None, debug=False, seed=19):
    rng = _rng(seed)
    model.to("float32")
    mod, params = model.export_tvm(spec=spec_, debug=debug)[:2]
    pvals = [_arr(rng, _pshape(p, env)) for _, p in params]
    if bound:
        for gv, f in list(mod.functions.items()):
            if isinstance(f, relax.Function) and gv.name_hint in spec_:
                mod[gv] = f.with_attr("tir_var_upper_bound", bound)
    calls = [(fname, inputs(rng, fname) + pvals) for fname in spec_]
    return mod, calls


# ----------------------------------------------------------------------------- nn models
class MLP(nn.Module):
    def __init__(self, d=64, h=128, o=10):
        self.l1, self.l2, self.l3 = nn.Linear(d, h), nn.Linear(h, h), nn.Linear(h, o)

    def forward(self, x):
        return self.l3(op.relu(self.l2(op.relu(self.l1(x)))))


def _rope(x, cos, sin):
    x1, x2 = op.split(x, 2, axis=-1)
    return x * cos + op.concat([op.negative(x2), x1], dim=-1) * sin


class Block(nn.Module):
    def __init__(self, d=64, nh=4, ff=128):
        self.nh, self.hd = nh, d // nh
        self.n1 = nn.RMSNorm(d, axes=-1, bias=False)
        self.n2 = nn.RMSNorm(d, axes=-1, bias=False)
        self.q, self.k = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        y = self.n1(x)
        q, k, v = (op.reshape(f(y), (b, s, self.nh, self.hd)) for f in (self.q, self.k, self.v))
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        sc = op.matmul(op.permute_dims(q, [0, 2, 1, 3]), op.permute_dims(k, [0, 2, 3, 1])) * (self.hd ** -0.5)
        o = op.matmul(op.softmax(sc, axis=-1), op.permute_dims(v, [0, 2, 1, 3]))
        h = x + self.o(op.reshape(op.permute_dims(o, [0, 2, 1, 3]), (b, s, d)))
        y = self.n2(h)
        return h + self.down(op.silu(self.gate(y)) * self.up(y))


class LM(nn.Module):
    def __init__(self, v=256, d=64, layers=1):
        self.emb = nn.Embedding(v, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(layers)])
        self.norm = nn.RMSNorm(d, axes=-1, bias=False)
        self.head = nn.Linear(d, v, bias=False)

    def forward(self, ids, cos, sin):
        h = self.emb(ids)
        for blk in self.blocks:
            h = blk(h, cos, sin)
        return self.head(self.norm(h))

    def prefill(self, ids, cos, sin):
        return self.forward(ids, cos, sin)

    def decode(self, ids, cos, sin):
        return self.forward(ids, cos, sin)


class ConvNet(nn.Module):
    def __init__(self):
        self.c1 = nn.Conv2D(3, 8, 3, padding=1)
        self.c2 = nn.Conv2D(8, 16, 3, stride=2, padding=1)
        self.c3 = nn.Conv2D(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        h = op.relu(self.c2(op.relu(self.c1(x))))
        h = h + op.relu(self.c3(h))
        return self.fc(op.reshape(h, (h.shape[0], 16 * 8 * 8)))


def _lm_spec(s):
    return {"ids": spec.Tensor([1, s], "int32"), "cos": spec.Tensor([s, 1, 16], "float32"),
            "sin": spec.Tensor([s, 1, 16], "float32"), "$": PLAIN}


def test_nn_mlp_symbolic_batch_with_upper_bound():
    mod, calls = _export(MLP(), {"forward": {"x": spec.Tensor(["n", 64], "float32"), "$": PLAIN}}, {"n": 5},
                         lambda r, f: [_arr(r, (5, 64))], bound={"n": 16})
    assert not e2e(mod, calls)


def test_nn_mlp_unbounded_batch_falls_back_with_a_warning_naming_the_fix():
    mod, calls = _export(MLP(), {"forward": {"x": spec.Tensor(["n", 64], "float32"), "$": PLAIN}}, {"n": 5},
                         lambda r, f: [_arr(r, (5, 64))])
    warns = e2e(mod, calls)
    assert any("'forward' left to StaticPlanBlockMemory" in w and "tir_var_upper_bound" in w for w in warns), warns


def test_nn_llama_prefill_and_decode_in_one_module():
    sp = {"prefill": _lm_spec("seq_len"), "decode": _lm_spec(1)}

    def inputs(r, f):
        s = 12 if f == "prefill" else 1
        return [_arr(r, (1, s), "int32"), _arr(r, (s, 1, 16)), _arr(r, (s, 1, 16))]

    mod, calls = _export(LM(), sp, {"seq_len": 12}, inputs, bound={"seq_len": 64})
    assert not e2e(mod, calls)


def test_nn_llama_static_as_stock_planner_drop_in():
    mod, calls = _export(LM(), {"forward": _lm_spec(12)}, {},
                         lambda r, f: [_arr(r, (1, 12), "int32"), _arr(r, (12, 1, 16)), _arr(r, (12, 1, 16))])
    dropin(mod, calls)


def test_nn_conv_net_static_measured_peak_not_above_default():
    mod, calls = _export(ConvNet(), {"forward": {"x": spec.Tensor([2, 3, 16, 16], "float32"), "$": PLAIN}}, {},
                         lambda r, f: [_arr(r, (2, 3, 16, 16))])
    assert not e2e(mod, calls, measure=calls[0])


def test_nn_block_debug_export():
    sp = {"forward": {"x": spec.Tensor([2, 12, 64], "float32"), "cos": spec.Tensor([12, 1, 16], "float32"),
                      "sin": spec.Tensor([12, 1, 16], "float32"), "$": PLAIN}}
    mod, calls = _export(Block(), sp, {}, lambda r, f: [_arr(r, (2, 12, 64)), _arr(r, (12, 1, 16)),
                                                         _arr(r, (12, 1, 16))], debug=True)
    assert not e2e(mod, calls)


class KVAttn(nn.Module):
    def __init__(self, d=64):
        self.k, self.v, self.q = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.kc, self.vc = nn.KVCache(16, [d]), nn.KVCache(16, [d])

    def forward(self, x, total):
        self.kc.append(self.k(x))
        self.vc.append(self.v(x))
        sc = op.matmul(self.q(x), op.permute_dims(self.kc.view(total), [1, 0]))
        return op.matmul(op.softmax(sc, axis=-1), self.vc.view(total))


def test_nn_kv_cache_effects_packed_decode_steps():
    """vm.builtin.attention_kv_cache_{create,append,view}: views into cache storage, effects threaded."""
    rng = _rng(3)
    model = KVAttn()
    model.to("float32")
    sp = {"forward": {"x": spec.Tensor([1, 64], "float32"), "total": int,
                      "$": {"param_mode": "packed", "effect_mode": "packed"}}}
    mod, params = model.export_tvm(spec=sp)[:2]
    mod["forward"] = mod["forward"].with_attr("tir_var_upper_bound", {"total": 16})
    pvals = [_arr(rng, _pshape(p, {})) for _, p in params]
    xs = [_arr(rng, (1, 64)) for _ in range(3)]

    def steps(vm):
        eff = vm["_initialize_effect"]()
        ps = [tvm.runtime.tensor(p) for p in pvals]
        outs = []
        for t, x in enumerate(xs, 1):
            r = vm["forward"](tvm.runtime.tensor(x), tvm.runtime.ShapeTuple([t]), eff, ps)
            outs.append(r[0].numpy())
            eff = r[1]
        return [outs]

    e2e(mod, steps)


def test_nn_print_effect_falls_back_with_a_warning():
    class M(nn.Module):
        def __init__(self):
            self.l1 = nn.Linear(16, 16)

        def forward(self, x):
            h = op.relu(self.l1(x))
            op.print_(h)
            return self.l1(h)

    model = M()
    model.to("float32")
    sp = {"forward": {"x": spec.Tensor([2, 16], "float32"), "$": {"param_mode": "packed", "effect_mode": "packed"}}}
    mod, params = model.export_tvm(spec=sp, debug=True)[:2]
    rng = _rng(4)
    pvals, x = [_arr(rng, _pshape(p, {})) for _, p in params], _arr(rng, (2, 16))

    def call(vm):
        eff = vm["_initialize_effect"]()
        r = vm["forward"](tvm.runtime.tensor(x), eff, [tvm.runtime.tensor(p) for p in pvals])
        return [[r[0].numpy()]]

    warns = e2e(mod, call)
    assert any("'forward'" in w and "invoke_debug_func" in w for w in warns), warns


# ----------------------------------------------------------------------------- PyTorch importer
def _from_torch(model, xs, dynamic_shapes=None):
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program
    model.eval()
    with torch.no_grad():
        ep = torch.export.export(model, tuple(torch.from_numpy(x) for x in xs), dynamic_shapes=dynamic_shapes)
        mod = from_exported_program(ep, keep_params_as_input=True)
    mod, params = relax.frontend.detach_params(mod)
    return mod, [("main", list(xs) + [p.numpy() for p in params["main"]])]


def test_torch_transformer_encoder_layer_symbolic_seq():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    x = _arr(_rng(5), (2, 12, 64))
    mod, calls = _from_torch(m, [x], dynamic_shapes=({1: torch.export.Dim("s", min=2, max=64)},))
    assert not e2e(mod, calls)


def test_torch_lstm_measured_peak_not_above_default():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class LSTMm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l, self.fc = torch.nn.LSTM(32, 48, batch_first=True), torch.nn.Linear(48, 5)

        def forward(self, x):
            return self.fc(self.l(x)[0][:, 5])  # not [:, -1]: TVM imports it as take(-1, mode="fast")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod, calls = _from_torch(LSTMm(), [_arr(_rng(6), (2, 6, 32))])
    assert not e2e(mod, calls, measure=calls[0])


# ----------------------------------------------------------------------------- relax.training
def test_relax_training_setup_trainer_cross_entropy_momentum():
    from tvm.relax.training import SetupTrainer
    from tvm.relax.training.loss import CrossEntropyLoss
    from tvm.relax.training.optimizer import MomentumSGD

    batch, dims = 4, (32, 64, 10)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, dims[0]), "float32"))
    params = []
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        params += [relax.Var(f"w{i}", relax.TensorType((a, b), "float32")),
                   relax.Var(f"b{i}", relax.TensorType((b,), "float32"))]
    with bb.function("backbone", [x, *params]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.add(relax.op.matmul(x, params[0]), params[1])))
            h = bb.emit(relax.op.nn.log_softmax(relax.op.add(relax.op.matmul(h, params[2]), params[3])))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    mod = bb.get().with_attr("param_num", len(params)).with_attr("state_num", 0)
    train = SetupTrainer(CrossEntropyLoss(reduction="sum"), MomentumSGD(0.01, 0.9),
                         [relax.TensorType((batch, dims[-1]), "float32"), relax.TensorType((batch,), "int64")])(mod)
    rng = _rng(7)
    xv = _arr(rng, (batch, dims[0]))
    pv = [_arr(rng, [int(d) for d in p.ty.shape]) for p in params]
    tv = rng.integers(0, dims[-1], size=(batch,)).astype("int64")
    state = [np.zeros([int(d) for d in f.shape], str(f.dtype)) for f in train["optimizer"].params[2].ty.fields]

    def step(vm):
        t = tvm.runtime.tensor
        r = vm["backbone_loss_adjoint"](t(xv), *[t(p) for p in pv], t(tv))
        o = vm["optimizer"](tuple(t(p) for p in pv), tuple(r[1]), tuple(t(s) for s in state))
        return [[r[0].numpy()] + [g.numpy() for g in r[1]] + _flatten(o)]

    assert not e2e(train, step)


# ----------------------------------------------------------------------------- kernels and externs
@I.ir_module
class KernelScratch:
    @T.prim_func(private=True, s_tir=True)
    def mm(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        acc = T.sblock_alloc_buffer((16, 16), "float32", scope="local")
        big = T.sblock_alloc_buffer((4096,), "float32")
        for i in range(4096):
            with T.sblock("fill"):
                vi = T.axis.remap("S", [i])
                big[vi] = T.float32(1)
        for i, j, k in T.grid(16, 16, 16):
            with T.sblock("mm"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    acc[vi, vj] = T.float32(0)
                acc[vi, vj] = acc[vi, vj] + A[vi, vk] * B[vk, vj] * big[vi * 256 + vj * 16 + vk]
        for i, j in T.grid(16, 16):
            with T.sblock("w"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = acc[vi, vj]

    @R.function
    def main(x: R.Tensor((16, 16), "float32")):
        cls = KernelScratch
        with R.dataflow():
            a = R.call_tir(cls.mm, (x, x), R.Tensor((16, 16), "float32"))
            b = R.call_tir(cls.mm, (a, x), R.Tensor((16, 16), "float32"))
            c = R.call_tir(cls.mm, (b, a), R.Tensor((16, 16), "float32"))
            R.output(c)
        return c

    @R.function
    def second(x: R.Tensor((16, 16), "float32")):
        cls = KernelScratch
        with R.dataflow():
            a = R.call_tir(cls.mm, (x, x), R.Tensor((16, 16), "float32"))
            b = R.call_tir(cls.mm, (a, a), R.Tensor((16, 16), "float32"))
            R.output(b)
        return b


def test_call_tir_kernel_scratch_shared_by_two_functions():
    # (mm followed by an elementwise op crashes TVM's own FuseTIR on int32 buffer shapes: not roam's)
    x = _arr(_rng(8), (16, 16)) * 0.2
    assert not e2e(KernelScratch, [("main", [x]), ("second", [x])], measure=("main", [x]))
    dropin(KernelScratch, [("main", [x]), ("second", [x])])


@I.ir_module
class VmBuiltins:
    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w: R.Tensor((16, 16), "float32")):
        with R.dataflow():
            b = R.exp(R.matmul(x, w))
            v = R.call_pure_packed("vm.builtin.reshape", b, R.shape([8, 8]), ty_args=R.Tensor((8, 8), "float32"))
            e = R.reshape(R.add(R.matmul(x, w), R.const(1.0, "float32")), R.shape([8, 8]))
            f = R.add(v, e)
            g = R.call_pure_packed("vm.builtin.copy", f, ty_args=R.Tensor((8, 8), "float32"))
            i = R.add(R.multiply(g, R.const(2.0, "float32")), f)
            R.output(i)
        return i


def test_vm_builtin_reshape_view_and_copy_identity():
    rng = _rng(9)
    calls = [("main", [_arr(rng, (4, 16)), _arr(rng, (16, 16))])]
    warns = e2e(VmBuiltins, calls)
    assert any("vm.builtin.copy" in w for w in warns), warns  # an identity extern: falls back, and says why
    dropin(VmBuiltins, calls)


# ----------------------------------------------------------------------------- CUDA (build only)
@I.ir_module
class SymbolicCuda:
    @R.function
    def main(x: R.Tensor(("n", 32), "float32")):
        n = T.int64()
        R.func_attr({"tir_var_upper_bound": {"n": 64}})
        with R.dataflow():
            y = R.reshape(R.exp(x), R.shape([n * 32]))
            z = R.add(y, y)
            R.output(z)
        return z


def _cuda():
    if tvm.get_global_func("target.build.cuda", allow_missing=True) is None:
        pytest.skip("TVM built without CUDA codegen")
    from roam_tvm.runtime import cuda_target
    return cuda_target()


def test_cuda_build_static_nn_block():
    tgt = _cuda()
    mod, _ = _export(Block(), {"forward": {"x": spec.Tensor([2, 12, 64], "float32"),
                                           "cos": spec.Tensor([12, 1, 16], "float32"),
                                           "sin": spec.Tensor([12, 1, 16], "float32"), "$": PLAIN}},
                     {}, lambda r, f: [])
    tvm.compile(mod, target=tgt, relax_pipeline=pipeline(tgt))


def test_cuda_symbolic_shape_builds_with_stock_pipeline():
    tgt = _cuda()
    tvm.compile(SymbolicCuda, target=tgt, relax_pipeline=relax.get_default_pipeline(tgt))


@pytest.mark.parametrize("order", [False, True], ids=["tvm-default", "roam"])
def test_cuda_symbolic_shape_builds_with_roam_pipeline(order):
    tgt = _cuda()
    tvm.compile(SymbolicCuda, target=tgt, relax_pipeline=pipeline(tgt, order=order, layout=order))


# ----------------------------------------------------------------------------- warning quality / missed plans
def test_each_fallback_is_warned_once_per_function():
    mod, _ = _export(MLP(), {"forward": {"x": spec.Tensor(["n", 64], "float32"), "$": PLAIN}}, {"n": 5},
                     lambda r, f: [])
    with warnings.catch_warnings(record=True) as caught, LLVM:
        warnings.simplefilter("always")
        pipeline("llvm")(mod)
    layout = [str(w.message) for w in caught if str(w.message).startswith("RoamLayout")]
    assert len(layout) == 1, layout


def test_nn_kv_cache_decode_function_is_planned_by_roam():
    model = KVAttn()
    model.to("float32")
    sp = {"forward": {"x": spec.Tensor([1, 64], "float32"), "total": int,
                      "$": {"param_mode": "packed", "effect_mode": "packed"}}}
    mod = model.export_tvm(spec=sp)[0]
    mod["forward"] = mod["forward"].with_attr("tir_var_upper_bound", {"total": 16})
    with warnings.catch_warnings(record=True) as caught, LLVM:
        warnings.simplefilter("always")
        pipeline("llvm")(mod)
    assert not [str(w.message) for w in caught if "'forward' left to StaticPlanBlockMemory" in str(w.message)]
