"""One training step in TVM (llvm, CPU) against PyTorch's own step, same optimizer.

What is compared: the loss, every parameter's update ``p_new - p_old``, every optimizer
state, and BatchNorm running statistics.

Tolerances (justified, not tuned to pass):

* Both sides compute the same math; they differ by reduction order only (matmul, conv and
  sum kernels accumulate in a different order). In fp32 a length-n reduction has a typical
  relative error ~ sqrt(n) * 6e-8 and a worst case ~ n * 6e-8 relative to the *largest*
  summand. Our small models reduce over at most a few thousand terms, so gradient-linear
  quantities (SGD updates, momentum buffers, Adam's exp_avg / exp_avg_sq, BN statistics) are
  compared elementwise with ``|a - b| <= RT * |b| + RT * max|b|``, RT = 2e-4 in fp32
  (~ 4096 * 6e-8 with margin). In float64 the same bound is used with RT = 1e-9, which
  separates reduction-order noise (then ~1e-15) from real errors (which do not shrink with
  the precision).
* Adam's first step is ``-lr * g / (|g| + eps)`` (bias-corrected): it maps a gradient error
  ``d`` to an update error of at most ``lr * d / (|g| + eps)``. So each element of an Adam
  parameter update gets the tolerance ``lr * (dg / (|g| + eps) + RT)``, with ``dg`` the
  gradient tolerance above and ``g`` torch's gradient, recovered from its ``exp_avg``.
* Exactly vanishing gradients. Some gradient elements are mathematically 0: attention's key
  bias (softmax is invariant to adding the same q.b_k to every logit of a row: BERT's
  ``key.bias``, the key third of a fused qkv bias), a conv bias right before BatchNorm,
  embedding rows no token uses. In fp32 they hold cancellation noise of the size
  ``eps * (gradients flowing through the layer)``, and Adam's first step maps that noise to
  ``+-lr`` (``g / (|g| + eps)``), a different sign on each side. An element whose float64
  gradient is below ``ZERO_GRAD = 1e-9`` of the step's largest (fp32 cannot represent a
  relative 1e-9 anyway; float64's noise on a true 0 is ~1e-16) is therefore compared on
  the *gradient* (TVM's recovered from its ``exp_avg``, ``exp_avg_sq`` in gradient units
  ``sqrt(v / (1 - beta2))``) with the absolute tolerance ``RT * |g| + RT * max|G|``, ``G``
  every gradient of the step; its Adam update is only required to be a step of size
  ``<= lr`` (plus AdamW's decay). SGD needs no special case: its update is linear in the
  gradient, and each tensor's scale is floored at 1% of the step's largest update.
* float64 arbiter. fp32 rounding can also move a *pre-activation* across a kink (ReLU,
  ReLU6's 0 and 6, max-pool ties): one whole term then enters or leaves a gradient sum, an
  O(1/n) change that no reduction-order tolerance covers — and it can happen on the torch
  side. The reference is the exact math, so torch's step is also computed in float64 and a
  float32 tensor that misses torch's float32 step passes only if it meets the *same* bound
  against the float64 step (listed in ``stats["arbitrated"]``). Measured case: the small
  MobileNetV2 (seed 0) has one pre-activation of ``features.2.conv.0`` (ReLU6 input, index
  (0, 5, 13, 7)) at -1.50e-7 in float64 and +4.17e-8 in torch fp32 (fp32 forward error up
  to 1.2e-6 there). Torch fp32 passes that element's gradient, float64 and TVM fp32 do not,
  so every gradient upstream (``features.0`` .. ``features.2.conv.0``) is 1-3.5% off *in
  torch fp32* (``features.0.0.weight`` 1.7e-2 of its max vs float64) while TVM fp32 is
  2.7e-4 off; TVM float64 matches torch float64 to 1e-11 (of each tensor's max) on every
  parameter whose gradient is not exactly 0.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402

from roam_tvm.frontend import SGD, Adam, AdamW, from_torch  # noqa: E402
from roam_tvm.frontend.optim import as_optimizer  # noqa: E402

RT = {"float32": 2e-4, "float64": 1e-9}
# an element whose float64 gradient is below this fraction of the largest one is exactly 0
ZERO_GRAD = 1e-9


# ------------------------------------------------------------------------------------------
# helpers


def _torch_opt(opt, params):
    if isinstance(opt, AdamW):
        return torch.optim.AdamW(params, lr=opt.lr, betas=opt.betas, eps=opt.eps,
                                 weight_decay=opt.weight_decay, foreach=False)
    if isinstance(opt, Adam):
        return torch.optim.Adam(params, lr=opt.lr, betas=opt.betas, eps=opt.eps,
                                weight_decay=opt.weight_decay, foreach=False)
    return torch.optim.SGD(params, lr=opt.lr, momentum=opt.momentum,
                           weight_decay=opt.weight_decay, nesterov=opt.nesterov, foreach=False)


_STATE_KEY = {"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq",
              "momentum_buffer": "momentum_buffer"}


def _loss(kind, out, *targets):
    if callable(kind):  # as the frontend calls a loss callable: the whole output, else its first tensor
        try:
            return kind(out, *targets)
        except Exception:  # noqa: BLE001
            pass
    if hasattr(out, "logits"):
        out = out.logits
    elif hasattr(out, "last_hidden_state"):
        out = out.last_hidden_state
    elif isinstance(out, (tuple, list)):
        out = out[0]
    if callable(kind):  # a reference loss written in the test itself
        return kind(out, *targets)
    if kind == "mse":
        return sum(torch.nn.functional.mse_loss(out, t) for t in targets)
    return sum(_cross_entropy(out, t) for t in targets)


def _cross_entropy(out, target):
    """F.cross_entropy's convention (classes in dim 1), except language-model logits [B, T, V] with [B, T]
    targets, whose classes are last; written here apart from the frontend's own choice."""
    if out.dim() > 2 and tuple(target.shape) == tuple(out.shape[:-1]) \
            and tuple(target.shape) != tuple(out.shape[:1] + out.shape[2:]):
        return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return torch.nn.functional.cross_entropy(out, target)


def torch_step(model, inputs, targets, loss, opt):
    """PyTorch's own step on a copy of ``model``: loss, params, states, buffers (numpy)."""
    m = copy.deepcopy(model)
    if not m.training:  # in train mode, each module keeps its own flag (an eval-mode BatchNorm), as handed over
        m.train()
    o = _torch_opt(opt, m.parameters())
    o.zero_grad()
    lv = _loss(loss, m(*inputs), *targets)
    lv.backward()
    grads = {n: p.grad.detach().clone().numpy() for n, p in m.named_parameters()
             if p.grad is not None}  # None: frozen, or never read by the forward
    o.step()
    out = {n: p.detach().numpy().copy() for n, p in m.named_parameters()}
    for n, p in m.named_parameters():
        for suf, key in _STATE_KEY.items():
            if key in o.state[p]:
                out[f"{n}.{suf}"] = o.state[p][key].detach().numpy().copy()
    for n, b in m.named_buffers():
        out[n] = b.detach().numpy().copy()
    return float(lv.detach()), out, grads


_BUILD_CACHE = {}


def tvm_step(ts, inputs, targets):
    ex = tvm.compile(ts.mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    state = ts.initial_values()
    before = {k: v.copy() for k, v in state.items()}
    loss = ts.run(vm, [t.numpy() for t in inputs], [t.numpy() for t in targets], state)
    return loss, before, state


def _close(a, b, rt, what, floor=0.0):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(float(np.abs(b).max()) if b.size else 0.0, floor)
    err = np.abs(a - b)
    tol = rt * np.abs(b) + rt * scale + 1e-30
    bad = err > tol
    assert not bad.any(), (
        f"{what}: {int(bad.sum())}/{b.size} elements off; max err {err.max():.3e}, "
        f"scale {scale:.3e}, max rel-to-scale {err.max() / max(scale, 1e-30):.3e}")
    return float(err.max() / max(scale, 1e-30))


def _double(model, tensors):
    return copy.deepcopy(model).double(), tuple(
        t.double() if torch.is_floating_point(t) else t for t in tensors)


def _check_param(n, d_tvm, before, after, r, gr, z, opt, rt, floor, gmax):
    """Update of parameter ``n`` against one reference (``r`` step, ``gr`` gradients).

    ``z``: mask of the elements whose exact (float64) gradient vanishes. Returns
    ``(message or None, worst error)``."""
    d_ref = r[n] - before[n].astype(np.float64)
    err = np.abs(d_tvm - d_ref)
    if not isinstance(opt, Adam):
        scale = max(float(np.abs(d_ref).max()), floor)
        bad = err > rt * np.abs(d_ref) + rt * scale + 1e-30
        msg = (f"update of {n}: {int(bad.sum())}/{bad.size} elements off; max err "
               f"{err.max():.3e}, scale {scale:.3e}") if bad.any() else None
        return msg, float(err.max() / max(scale, 1e-30))
    g = gr[n].astype(np.float64)
    if not isinstance(opt, AdamW) and opt.weight_decay:
        g = g + opt.weight_decay * before[n]
    dg = rt * np.abs(g) + rt * np.abs(g).max()
    tol = opt.lr * (dg / (np.abs(g) + opt.eps) + rt) + rt * np.abs(d_ref)
    bad = (err > tol) & ~z
    msgs = []
    if bad.any():
        msgs.append(f"{n}: {int(bad.sum())} Adam update elements off, max {err[bad].max():.3e}")
    if z.any():
        # vanishing exact gradient: compare the gradient itself (recovered from exp_avg),
        # absolutely, on the scale of the step's gradients; the update is only bounded
        g_tvm = after[f"{n}.exp_avg"].astype(np.float64) / (1 - opt.betas[0])
        gerr = np.abs(g_tvm - g)
        gbad = z & (gerr > rt * np.abs(g) + rt * gmax)
        decay = -opt.lr * opt.weight_decay * before[n] if isinstance(opt, AdamW) else 0.0
        ubad = z & (np.abs(d_tvm - decay) > opt.lr * (1 + rt))
        if gbad.any():
            msgs.append(f"{n}: {int(gbad.sum())} zero-gradient elements off, max "
                        f"{gerr[gbad].max():.3e} vs gradient scale {gmax:.3e}")
        if ubad.any():
            msgs.append(f"{n}: {int(ubad.sum())} zero-gradient updates larger than lr")
    return ("; ".join(msgs) or None), float(err[~z].max() / opt.lr) if (~z).any() else 0.0


def _check_state(sn, n, after, r, gr, z, opt, rt, fl, gmax):
    """Optimizer state ``sn`` of parameter ``n`` (``None`` for BN statistics)."""
    a = after[sn].astype(np.float64)
    b = r[sn].astype(np.float64)
    scale = max(float(np.abs(b).max()) if b.size else 0.0, fl)
    err = np.abs(a - b)
    bad = err > rt * np.abs(b) + rt * scale + 1e-30
    if z is not None and z.any():
        g = gr[n].astype(np.float64)
        if sn.endswith("exp_avg_sq"):  # in gradient units: sqrt(v / (1 - b2)) = |g|
            c = 1 - opt.betas[1]
            err = np.where(z, np.abs(np.sqrt(a / c) - np.sqrt(b / c)), err)
            bad = np.where(z, err > rt * np.abs(g) + rt * gmax, bad)
        elif sn.endswith("exp_avg"):
            c = 1 - opt.betas[0]
            bad = np.where(z, err > c * (rt * np.abs(g) + rt * gmax), bad)
    msg = (f"state {sn}: {int(bad.sum())}/{b.size} elements off; max err {err.max():.3e}, "
           f"scale {scale:.3e}") if bad.any() else None
    return msg, float(err.max() / max(scale, 1e-30))


def compare_step(model, inputs, targets, loss, opt, dtype="float32", ts=None, arbiter=True):
    """Build + run one step in TVM and in torch; assert everything matches. Returns stats.

    Besides torch's step in ``dtype``, torch's step in float64 (the exact math) is computed:
    it says which gradient elements vanish exactly, and with ``arbiter`` a float32 tensor
    that misses torch's float32 step still passes if it meets the same bound against the
    float64 step (torch's float32 was then the one off); such tensors are listed in
    ``stats["arbitrated"]``.
    """
    opt = as_optimizer(opt)
    if ts is None:
        ts = from_torch(model, inputs, targets, loss=loss, optimizer=opt)
    t_loss, ref, grads = torch_step(model, inputs, targets, loss, opt)
    if dtype == "float64":
        ref64, grads64 = ref, grads
    else:
        m64, ins64 = _double(model, inputs)
        _, ref64, grads64 = torch_step(m64, ins64, targets, loss, opt)
    v_loss, before, after = tvm_step(ts, inputs, targets)
    rt = RT[dtype]
    stats = {"arbitrated": []}
    assert abs(v_loss - t_loss) <= rt * max(1.0, abs(t_loss)), (v_loss, t_loss)
    stats["loss"] = abs(v_loss - t_loss) / max(1.0, abs(t_loss))
    # exactly vanishing gradient elements (see the module docstring)
    g64max = max(float(np.abs(grads64[n]).max()) for n in ts.param_names)
    zero = {n: np.abs(grads64[n]) <= ZERO_GRAD * g64max for n in ts.param_names}
    stats["zero_grad"] = {n: int(z.sum()) for n, z in zero.items() if z.any()}
    refs = [(ref, grads)]
    if arbiter and dtype != "float64":
        refs.append((ref64, grads64))
    # per reference: gradient scale and update floor
    scales = []
    for r, gr in refs:
        gmax = max(float(np.abs(gr[n]).max()) for n in ts.param_names)
        # A tensor whose exact gradient vanishes (a conv bias right before BatchNorm) holds
        # only cancellation noise, whose size is set by the gradients flowing through the
        # layer, not by the tensor itself: floor each tensor's scale at 1% of the largest
        # update in the step.
        floor = 0.01 * max(float(np.abs(r[n] - before[n]).max()) for n in ts.param_names)
        scales.append((gmax, floor))

    def check(n, fn):
        msgs = []
        for k, ((r, gr), (gmax, floor)) in enumerate(zip(refs, scales)):
            msg, w = fn(r, gr, gmax, floor)
            if msg is None:
                if k:
                    stats["arbitrated"].append(n)
                return w
            msgs.append(("vs float64 step: " if k else "") + msg)
        raise AssertionError(" | ".join(msgs))

    worst = 0.0
    for n in ts.param_names:
        d_tvm = (after[n] - before[n]).astype(np.float64)
        worst = max(worst, check(n, lambda r, gr, gmax, floor: _check_param(
            n, d_tvm, before, after, r, gr, zero[n], opt, rt, floor, gmax)))
    stats["update"] = worst
    owner = {f"{n}.{suf}": n for n in ts.param_names for suf in opt.state_suffixes}
    worst = 0.0
    for sn in ts.state_names:
        if sn.endswith("num_batches_tracked"):
            assert int(after[sn]) == int(ref[sn]), sn
            continue
        n = owner.get(sn)
        z = zero[n] if n is not None else None

        def fl(r, floor):
            if n is not None:
                return floor / opt.lr
            # A batch mean's rounding error is relative to the spread of the values it
            # averages, not to the mean (which is exactly 0 after a BN-normalised, bias-free
            # linear layer): floor running_mean's scale at the running std.
            if sn.endswith("running_mean") and sn[:-4] + "var" in r:
                return float(np.sqrt(np.abs(r[sn[:-4] + "var"]).max()))
            return 0.0
        worst = max(worst, check(sn, lambda r, gr, gmax, floor: _check_state(
            sn, n, after, r, gr, z, opt, rt, fl(r, floor), gmax)))
    stats["state"] = worst
    return stats


# ------------------------------------------------------------------------------------------
# hand-made models (independent of the zoo)


class MLP(torch.nn.Module):
    def __init__(self, d=16, h=32, c=5):
        super().__init__()
        self.l1 = torch.nn.Linear(d, h)
        self.l2 = torch.nn.Linear(h, h)
        self.l3 = torch.nn.Linear(h, c)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


class CNN(torch.nn.Module):
    """conv stride 2 / pad 1, BatchNorm, ReLU, maxpool 3x3/2 pad 1 (ResNet stem), linear."""

    def __init__(self, c=4, classes=3, image=12):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, c, 3, stride=2, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(c)
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(c)
        self.fc = torch.nn.Linear(c * (image // 4) ** 2, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.flatten(1))


def _mlp_case(dtype):
    torch.manual_seed(0)
    tdt = getattr(torch, dtype)
    m = MLP().to(tdt)
    x = torch.randn(8, 16, dtype=tdt)
    y = torch.randint(0, 5, (8,))
    return m, (x,), (y,)


OPTS = [
    SGD(lr=0.1),
    SGD(lr=0.1, momentum=0.9, weight_decay=1e-2, nesterov=True),
    Adam(lr=1e-2, weight_decay=1e-2),
    AdamW(lr=1e-2, weight_decay=0.1),
]


@pytest.mark.parametrize("opt", OPTS, ids=["sgd", "sgd-nesterov-wd", "adam-l2", "adamw"])
def test_mlp_optimizers(opt):
    m, ins, tgs = _mlp_case("float32")
    s = compare_step(m, ins, tgs, "cross_entropy", opt)
    assert s["update"] < RT["float32"] * 10


@pytest.mark.parametrize("opt", [pytest.param(SGD(lr=0.1, momentum=0.9), marks=pytest.mark.slow),
                                 Adam(lr=1e-2)], ids=["momentum", "adam"])
def test_mlp_float64(opt):
    m, ins, tgs = _mlp_case("float64")
    compare_step(m, ins, tgs, "cross_entropy", opt, dtype="float64")


def test_mse_loss():
    torch.manual_seed(1)
    m = MLP(c=4)
    x = torch.randn(6, 16)
    y = torch.randn(6, 4)
    compare_step(m, (x,), (y,), "mse", SGD(lr=0.05, momentum=0.5))


# float32 BN is covered by test_zoo_small[cnn]; float64 pins exactness of the conv/pool grads
@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_cnn_batchnorm_maxpool(dtype):
    """BN running stats (momentum 0.1, unbiased var), conv stride/pad, maxpool with padding."""
    torch.manual_seed(0)
    tdt = getattr(torch, dtype)
    m = CNN().to(tdt)
    x = torch.randn(4, 3, 12, 12, dtype=tdt)
    y = torch.randint(0, 3, (4,))
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=0.1, momentum=0.9, weight_decay=1e-4),
                 dtype=dtype)


class _KeyBiasAttention(torch.nn.Module):
    """One attention head: ``k.bias`` has an exactly-zero gradient (softmax row shift)."""

    def __init__(self, d=8, c=3):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.fc = torch.nn.Linear(d, c)

    def forward(self, x):
        att = torch.softmax(self.q(x) @ self.k(x).transpose(-2, -1), dim=-1)
        return self.fc((att @ self.v(x)).mean(1))


def test_adam_zero_gradient_key_bias():
    """Adam maps k.bias's rounding noise to +-lr; it is compared on the gradient instead."""
    torch.manual_seed(0)
    m = _KeyBiasAttention()
    x = torch.randn(4, 6, 8)
    y = torch.randint(0, 3, (4,))
    s = compare_step(m, (x,), (y,), "cross_entropy", AdamW(lr=1e-2, weight_decay=0.1))
    assert s["zero_grad"] == {"k.bias": 8}, s["zero_grad"]


@pytest.mark.slow  # test_zoo_small[gpt2-small] covers the tied GPT2LMHeadModel by default
def test_tiny_gpt2_tied_adamw():
    """Tied wte/lm_head: one param, gradient summed; bool cumsum mask; gelu_tanh."""
    from roam_tvm.frontend._demo import tiny_gpt2

    m = tiny_gpt2(vocab=32, n_embd=16, n_layer=1, n_head=2, n_positions=16)
    torch.manual_seed(0)
    ids = torch.randint(0, 32, (2, 8))
    tgt = torch.randint(0, 32, (2, 8))
    ts = from_torch(m, (ids,), (tgt,), optimizer=AdamW(lr=1e-3))
    assert "lm_head.weight" not in ts.param_names and "transformer.wte.weight" in ts.param_names
    compare_step(m, (ids,), (tgt,), "cross_entropy", AdamW(lr=1e-3), ts=ts)


# ------------------------------------------------------------------------------------------
# The ResNet-18 "gradient gap" of docs/tvm-notes (median rel. err 1.2e-2 vs float64).
#
# Finding (measured here, see the frontend report):
# * No Relax gradient is wrong. In float64, TVM's train_step for a ResNet-18 with the
#   ImageNet stem (conv 7x7/2 pad 3, BN, ReLU, maxpool 3x3/2 pad 1, stride-2 convs, 1x1
#   downsample) matches torch's float64 autograd to 1.7e-14 (max over params of
#   max|dg|/max|g|): conv2d backward (stride/padding/output_padding), max_pool2d_backward
#   (padding, ReLU ties) and the BatchNorm decomposition are exact.
# * The gap is fp32 *reduction order*: TVM legalizes sum/mean/collapse_sum_to as one
#   sequential fp32 accumulation loop, error ~ n * eps. BatchNorm backward sums over N*H*W
#   (4*112*112 = 50k terms in the stem at 224x224): one conv+BN+ReLU block at 112x112 had
#   bn.bias off by 3.3e-4 and conv.weight by 1.2e-3 (torch fp32: 1e-5, 4.5e-5); through
#   ResNet-18 at 224x224, batch 4, this compounds to median 5.0e-3, max 3.3e-2 (torch fp32:
#   2.0e-6 / 1.2e-5). At 64x64 it is invisible (n small), which is why float64 tests and small
#   images pass.
# * Fix: ``step.blocked_reduction`` rewrites every float multi-axis sum / mean /
#   collapse_sum_to of the step into one-axis reductions (error ~ sum of extents * eps).
#   The same 112x112 block then gives bn.bias 1.3e-6, conv.weight 1.4e-5 (better than torch).
#   ``test_blocked_reductions_fix_bn_precision`` pins it; the fp32 tolerance is unchanged.
# * Not yet closed: the full ResNet-18 at 224x224 fp32 still shows median 4.5e-3 after the
#   fix (max 3.3e-2, on layers.7.conv2.weight), while float64 at 224x224 is exact (1.7e-14),
#   so it is fp32 rounding, not a wrong op. It is not the reduction length either: layers.7
#   reduces only 4*7*7 = 196 terms, its bn2.weight gradient is fine (5e-6) while bn2.bias is
#   off by 2.5e-3 ~ 1/196, the signature of a ReLU mask flip (a pre-activation within fp32
#   forward error of 0 changes sign, moving one whole term between in and out of the sum).
#   Leading suspect: larger fp32 forward error in TVM's unscheduled conv kernels (a
#   sequential accumulation over C*K*K), amplified by such flips. Next step: compare TVM's
#   forward activations per block against float64 torch.


class _BigBNBlock(torch.nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(c)
        self.fc = torch.nn.Linear(c, 10)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)) + x)
        return self.fc(h.mean((2, 3)))


def _grad_err_vs_float64(ts, m, x, y):
    vm = relax.VirtualMachine(tvm.compile(ts.mod, target="llvm"), tvm.cpu())
    st = ts.initial_values()
    p0 = {k: v.copy() for k, v in st.items()}
    ts.run(vm, [x.numpy()], [y.numpy()], st)  # SGD lr=1: update = -grad
    m64 = copy.deepcopy(m).double()
    torch.nn.functional.cross_entropy(m64(x.double()), y).backward()
    return {n: float(np.abs((p0[n] - st[n]) - p.grad.numpy()).max() / np.abs(p.grad.numpy()).max())
            for n, p in m64.named_parameters()}


@pytest.mark.slow
def test_blocked_reductions_fix_bn_precision():
    """fp32 conv+BN block at 112x112 (50k-term BN sums): error vs float64 with and without."""
    torch.manual_seed(0)
    m = _BigBNBlock()
    x = torch.relu(torch.randn(4, 8, 112, 112))
    y = torch.randint(0, 10, (4,))
    good = _grad_err_vs_float64(from_torch(m, (x,), (y,), optimizer=SGD(lr=1.0)), m, x, y)
    bad = _grad_err_vs_float64(from_torch(m, (x,), (y,), optimizer=SGD(lr=1.0),
                                          precise_reductions=False), m, x, y)
    # fp32 with O(sqrt(n)) growth: a few 1e-6..1e-5; the sequential sums were 1e-4..1e-3
    assert good["bn.bias"] < 2e-5 and good["conv.weight"] < 1e-4, good
    assert bad["bn.bias"] > 10 * good["bn.bias"], (bad, good)


@pytest.mark.slow
def test_resnet18_imagenet_stem_float64():
    from roam_tvm.zoo.vision import ResNet18

    torch.manual_seed(0)
    m = ResNet18(10, 8, small_stem=False).double()
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    y = torch.randint(0, 10, (2,))
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=0.1, momentum=0.9, weight_decay=1e-4),
                 dtype="float64")


# ------------------------------------------------------------------------------------------
# zoo models at their small test size

ZOO_FAST = ["mlp", "cnn", "gpt2-small"]
ZOO_SLOW = ["resnet18", "vgg11", "mobilenet_v2", "vit-tiny", "vit-b16", "bert-base", "gpt2-medium",
            "gpt2-xl", "gpt2-xl-paper"]


def _zoo(name):
    zoo = pytest.importorskip("roam_tvm.zoo")
    return zoo.get_model(name, small=True)


@pytest.mark.parametrize("name", ZOO_FAST)
def test_zoo_small(name):
    spec = _zoo(name)
    compare_step(spec.model, spec.example_inputs, spec.targets, spec.loss, spec.optimizer)


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO_SLOW)
def test_zoo_small_slow(name):
    spec = _zoo(name)
    if name in ZOO_FP32_CHAOTIC:
        _chaotic_fp32(spec)
        return
    compare_step(spec.model, spec.example_inputs, spec.targets, spec.loss, spec.optimizer)


# Models whose fp32 gradients at the small size are not a function of the math to fp32
# tolerances (see _chaotic_fp32): their step is checked exactly in float64 instead.
ZOO_FP32_CHAOTIC = {"mobilenet_v2"}


def _chaotic_fp32(spec):
    """MobileNetV2 small (width 0.25, batch 2, 64x64): float64 step exact, fp32 loss.

    Measured (seed 0), gradients vs torch float64, max error / max |g| per tensor:
    * torch fp32 is 1.7e-2 off on ``features.0.0.weight`` (up to 3.7e-2 on
      ``features.2.conv.0.1.bias``): one ReLU6 pre-activation of ``features.2.conv.0``
      is -1.5e-7 in float64 and +4.2e-8 in fp32 (the module docstring's kink flip). Other
      sizes flip elsewhere (batch 4 at 96x96: 8e-2 on ``features.12``), and so does TVM's
      fp32 step as soon as any rounding changes (a blocked BN variance moved TVM's flips to
      ``features.13``, 6.7e-2), so no fp32 tolerance can compare such steps elementwise.
    * Without flips the errors still compound through 19 BatchNorm backward passes, several
      over 8 values (2x2 maps, batch 2): torch fp32 median 7.8e-5, TVM fp32 up to 2.7e-4
      (``features.0.0.weight``), above the single-reduction bound RT.
    * TVM float64 matches torch float64 to 1e-11 on every tensor with a non-zero gradient:
      depthwise (groups=C) and strided convs, padding, BatchNorm's decomposition and ReLU6
      are exact. That is what this test pins, with the float64 tolerances, plus the fp32
      loss.
    """
    m64, ins64 = _double(spec.model, spec.example_inputs)
    compare_step(m64, ins64, spec.targets, spec.loss, spec.optimizer, dtype="float64")
    opt = as_optimizer(spec.optimizer)
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss, optimizer=opt)
    t_loss, _, _ = torch_step(spec.model, spec.example_inputs, spec.targets, spec.loss, opt)
    v_loss, _, _ = tvm_step(ts, spec.example_inputs, spec.targets)
    assert abs(v_loss - t_loss) <= RT["float32"] * max(1.0, abs(t_loss)), (v_loss, t_loss)
