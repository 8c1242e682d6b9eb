"""Second breadth probe (issue 13): what architectures outside the repo needed, each at a
tiny size. Partial rotary embeddings that rotate the whole head (Phi-3's default)
concatenate an empty tensor, which broke the gradient's legalization."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from roam_tvm.frontend import SGD, from_torch  # noqa: E402
from test_numerics import compare_step  # noqa: E402


class EmptyTailConcat(torch.nn.Module):
    """``cat([f(x[..., :rot]), x[..., rot:]])`` with ``rot`` the whole last dim (an empty tail)."""

    def __init__(self, width=4):
        super().__init__()
        self.l1 = torch.nn.Linear(3, width)
        self.l2 = torch.nn.Linear(width, 3)
        self.rot = width

    def forward(self, x):
        h = self.l1(x)
        h = torch.cat([torch.sin(h[..., :self.rot]), h[..., self.rot:]], dim=-1)
        return self.l2(h)


def test_concat_of_an_empty_tensor_float64():
    torch.manual_seed(0)
    m = EmptyTailConcat().double()
    x = torch.randn(2, 3, dtype=torch.float64)
    ts = from_torch(m, (x,), (torch.tensor([0, 2]),), loss="cross_entropy", optimizer=SGD(lr=1.0),
                    quiet=True)
    text = ts.mod.script()
    assert ", 0)" not in text and ", 0," not in text, "a zero-size tensor is left in the step"
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64",
                 ts=ts)


class IndexesNone(torch.nn.Module):
    """Like HF's Switch encoder without an attention mask: it indexes ``None`` while traced."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 3)

    def forward(self, x, mask=None):
        return self.l1(x) * mask[:, None]  # the line the error must name


def test_trace_error_names_the_model_line():
    from roam_tvm.frontend.errors import TraceError

    with pytest.raises(TraceError) as info:
        from_torch(IndexesNone(), (torch.randn(2, 3),), (torch.tensor([0, 1]),), quiet=True)
    msg = str(info.value)
    assert "not subscriptable" in msg and "test_breadth_probe2.py:" in msg, msg
    assert "in forward (return self.l1(x) * mask[:, None]" in msg, msg


class CastsItsRouter(torch.nn.Module):
    """Casts a submodule to its own dtype inside forward (HF Switch Transformers' router)."""

    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(3, 3)
        self.dtype = torch.float64

    def forward(self, x):
        self.router = self.router.to(self.dtype)
        return self.router(x)


def test_noop_module_cast_in_forward_float64():
    torch.manual_seed(0)
    m = CastsItsRouter().double()
    x = torch.randn(2, 3, dtype=torch.float64)
    original = torch.nn.Module.to
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")
    assert torch.nn.Module.to is original  # the export's patch is gone afterwards


class LoopsOverPickedExperts(torch.nn.Module):
    """A hand-written top-1 MoE that loops over the experts its router picked."""

    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(3, 2)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(2))

    def forward(self, x):
        pick = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e in pick.unique():
            rows = torch.nonzero(pick == e)[:, 0]
            out = out.index_add(0, rows, self.experts[int(e)](x[rows]))
        return out


def test_data_dependent_expert_loop_gets_the_way_out():
    from roam_tvm.frontend.errors import TraceError

    with pytest.raises(TraceError) as info:
        from_torch(LoopsOverPickedExperts(), (torch.randn(4, 3),), (torch.tensor([0, 1, 2, 0]),),
                   quiet=True)
    msg = str(info.value)
    assert "test_breadth_probe2.py:" in msg and "run every expert on all tokens" in msg, msg


class HasAnUnusedModule(torch.nn.Module):
    """A module built in ``__init__`` that ``forward`` never calls (a variant that drops a
    block, or a head for another task): PyTorch gives it no gradient and Adam skips it."""

    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(3, 3)
        self.unused = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.used(x)


def test_unused_parameters_are_left_out_with_adam():
    from roam_tvm.frontend import Adam

    torch.manual_seed(0)
    m = HasAnUnusedModule()
    x = torch.randn(4, 3)
    y = torch.tensor([0, 1, 2, 0])
    ts = from_torch(m, (x,), (y,), loss="cross_entropy", optimizer=Adam(lr=1e-2), quiet=True)
    assert sorted(ts.param_names) == ["used.bias", "used.weight"], ts.signature
    assert not any(n.startswith("unused") for n, _ in ts.signature)
    # builds (FuseTIR failed on an Adam update of an all-zero gradient) and matches torch
    compare_step(m, (x,), (y,), "cross_entropy", Adam(lr=1e-2), ts=ts)


class IntToFloat(torch.nn.Module):
    """Float results of integer tensors, as DeBERTa-v2's log-bucketed relative positions:
    ``torch.log(abs_pos / mid)``, ``int * 0.5``, ``int + 0.25``, ``sqrt(int)``."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(5, 5)

    def forward(self, x):
        pos = torch.arange(1, 6)                  # int64
        bias = torch.log(pos / 2) + pos * 0.5 + (pos + 0.25) * torch.sqrt(pos) - (pos - 0.5)
        return self.l1(x) + bias.to(x.dtype)


def test_integer_to_float_promotion_float64():
    torch.manual_seed(0)
    m = IntToFloat().double()
    x = torch.randn(2, 5, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 4]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


class Tiles(torch.nn.Module):
    """``repeat`` (Relax ``tile``) with more repeats than dims and with as many."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 4)
        self.l2 = torch.nn.Linear(4, 3)

    def forward(self, x):  # x: (2, 3)
        h = self.l1(x)                                  # (2, 4)
        a = h.repeat(3, 1, 2)                           # (3, 2, 8)
        b = h.repeat(1, 2)                              # (2, 8)
        y = (a * torch.linspace(0.5, 2.0, 8, dtype=x.dtype)).sum(0) + b
        return self.l2(y[:, :4] * y[:, 4:])


def test_tile_gradient_float64():
    torch.manual_seed(0)
    m = Tiles().double()
    x = torch.randn(2, 3, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


class InstanceNormNet(torch.nn.Module):
    """InstanceNorm2d (nnU-Net, style transfer) and BatchNorm2d without running statistics:
    both reach TVM as ``relax.nn.instance_norm``, which has no gradient in TVM 0.27."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.inorm = torch.nn.InstanceNorm2d(4, affine=True)
        self.bn = torch.nn.BatchNorm2d(4, track_running_stats=False)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = torch.relu(self.inorm(self.c(x)))
        return self.fc((self.bn(h) * h).mean((2, 3)))


def test_instance_norm_gradient():
    # float32: TVM's instance_norm kernel (topi) builds for float32 and float16 only
    torch.manual_seed(0)
    m = InstanceNormNet()
    with torch.no_grad():  # non-trivial affine parameters
        m.inorm.weight.uniform_(0.5, 1.5), m.inorm.bias.uniform_(-0.5, 0.5)
        m.bn.weight.uniform_(0.5, 1.5), m.bn.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 2, 5, 5)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0))


class LoopExperts(torch.nn.ModuleDict):
    """The ModuleDict experts layer of HF Switch Transformers / NLLB-MoE: it loops over the
    experts that ``nonzero`` finds (data-dependent, so torch.export cannot trace it)."""

    def __init__(self, experts=3, width=4):
        super().__init__()
        for i in range(experts):
            self[f"expert_{i}"] = torch.nn.Sequential(torch.nn.Linear(width, 6), torch.nn.ReLU(),
                                                      torch.nn.Linear(6, width))

    def forward(self, hidden_states, mask, weights):
        out = torch.zeros_like(hidden_states)
        onehot = mask if mask.dim() == 3 else torch.nn.functional.one_hot(mask, len(self))
        expert_mask = onehot.permute(2, 1, 0)
        for e in torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero():
            idx, top_x = torch.where(expert_mask[e].squeeze(0))
            y = self[f"expert_{e[0]}"](hidden_states[top_x]) * weights[top_x, idx, None]
            out.index_add_(0, top_x, y)
        return out


class Top2Router(torch.nn.Module):
    def __init__(self, as_indices: bool, width=4, experts=3):
        super().__init__()
        self.gate = torch.nn.Linear(width, experts)
        self.experts = LoopExperts(experts, width)
        self.head = torch.nn.Linear(width, 3)
        self.as_indices = as_indices

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        w, idx = probs.topk(2, dim=-1)
        mask = idx if self.as_indices else torch.nn.functional.one_hot(idx, 3)
        return self.head(self.experts(x, mask, w))


@pytest.mark.parametrize("as_indices", [False, True], ids=["one-hot", "indices"])
def test_moduledict_experts_run_densely_float64(as_indices):
    torch.manual_seed(0)
    m = Top2Router(as_indices).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    compare_step(m, (x,), (y,), "cross_entropy", SGD(lr=1.0), dtype="float64")
    assert "forward" not in vars(m.experts)  # the dense forward is gone after the export


class ClampedSlots(torch.nn.Module):
    """Integer clamps with one bound (a capacity-limited MoE's slot index:
    ``pos.long().clamp(max=cap - 1)``), which TVM's importer filled with an infinity."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 4)

    def forward(self, x):
        pos = torch.arange(6).view(6, 1)
        slot = pos.clamp(max=3) + pos.clamp(min=2) + torch.clamp_max(pos, 4) + torch.clamp_min(pos, 1)
        return self.l1(x) * slot.to(x.dtype)


def test_integer_clamp_with_one_bound_float64():
    torch.manual_seed(0)
    m = ClampedSlots().double()
    x = torch.randn(6, 4, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 1, 2, 3, 0, 1]),), "cross_entropy", SGD(lr=0.1),
                 dtype="float64")


class Upsample1d(torch.nn.Module):
    """ConvTranspose1d (a 1-D U-Net / audio decoder's learned upsampling), with output padding."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1)
        self.c2 = torch.nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1)
        self.o = torch.nn.Linear(2, 3)

    def forward(self, x):
        return self.o(torch.tanh(self.c2(torch.relu(self.c(x)))).mean(-1))


def test_conv1d_transpose_gradient_float64():
    torch.manual_seed(0)
    m = Upsample1d().double()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


class WritesASlice(torch.nn.Module):
    """``q[..., a:b] = f(q[..., a:b])`` (functionalized to ``slice_scatter``), as DeepSeek's
    attention writes the rotary half of each head, with a step too."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 8)
        self.l2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        q = self.l1(x)
        out = q * 1.5
        out[:, 2:6] = torch.sin(q[:, 2:6])
        out[:, 0:8:3] = torch.tanh(q[:, 1:8:3])
        return self.l2(out)


def test_slice_scatter_gradient_float64():
    torch.manual_seed(0)
    m = WritesASlice().double()
    x = torch.randn(2, 3, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


class UnsortedTopk(torch.nn.Module):
    """A router's ``topk(..., sorted=False)`` (DeepSeek-V3), which TVM's importer refused."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(4, 5)
        self.out = torch.nn.Linear(5, 3)

    def forward(self, x):
        logits = self.gate(x)
        w, idx = torch.topk(logits.softmax(-1), 2, dim=-1, sorted=False)
        routed = torch.zeros_like(logits).scatter(-1, idx, w)
        return self.out(routed)


def test_unsorted_topk_float64():
    torch.manual_seed(0)
    m = UnsortedTopk().double()
    x = torch.randn(3, 4, dtype=torch.float64)
    compare_step(m, (x,), (torch.tensor([0, 1, 2]),), "cross_entropy", SGD(lr=1.0), dtype="float64")


class DropsOut(torch.nn.Module):
    def __init__(self, drop_path: bool):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.1)
        self.drop_path = drop_path

    def forward(self, x):
        h = self.drop(self.l1(x))
        if self.drop_path:  # stochastic depth, as BEiT / timm write it
            keep = (torch.rand(x.shape[0], 1) > 0.1).to(x.dtype)
            h = h * keep / 0.9
        return h


def test_dropout_is_said_and_random_draws_are_refused():
    from roam_tvm.frontend.errors import UnsupportedError

    x, y = torch.randn(2, 3), torch.tensor([0, 1])
    with pytest.warns(RuntimeWarning, match=r"dropout op\(s\) \(p=\[0.1\]\) are imported as the identity"):
        from_torch(DropsOut(False), (x,), (y,), quiet=True)
    with pytest.raises(UnsupportedError, match=r"draws random numbers .*aten.rand.*drop_path_rate=0.0"):
        from_torch(DropsOut(True), (x,), (y,), quiet=True)


class AttentionDropout(torch.nn.Module):
    """Only SDPA's own ``dropout_p`` (no nn.Dropout): TVM imports the attention without it."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.2 if self.training else 0.0)
        return a.mean((1, 2))


def test_attention_dropout_is_said():
    x, y = torch.randn(2, 5, 8), torch.tensor([0, 3])
    with pytest.warns(RuntimeWarning, match=r"1 dropout op\(s\) \(p=\[0.2\]\) are imported as the identity"):
        from_torch(AttentionDropout(), (x,), (y,), quiet=True)


class StackedRNN(torch.nn.Module):
    """nn.LSTM / nn.GRU(num_layers=2, dropout=p): dropout between the layers, inside one aten op."""

    def __init__(self, cell, dropout):
        super().__init__()
        self.rnn = getattr(torch.nn, cell)(4, 6, num_layers=2, dropout=dropout, batch_first=True)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_rnn_dropout_between_layers_is_said(cell):
    import warnings

    x, y = torch.randn(2, 5, 4), torch.tensor([0, 2])
    with pytest.warns(RuntimeWarning, match=r"1 dropout op\(s\) \(p=\[0.3\]\) are imported as the identity"):
        from_torch(StackedRNN(cell, 0.3), (x,), (y,), quiet=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_torch(StackedRNN(cell, 0.0), (x,), (y,), quiet=True)
    assert not [w for w in caught if "dropout op(s)" in str(w.message)]
