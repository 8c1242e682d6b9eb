"""Stochastic-depth modules (roam_tvm/frontend/drop_path.py) are imported as the identity with a warning, as
dropout is; Hugging Face's Swin / ConvNeXt / BEiT default to drop_path_rate=0.1 and were refused."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from torch import nn  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402

from test_numerics import compare_step  # noqa: E402


class DropPath(nn.Module):
    """timm's way: a per-sample keep mask from torch.rand, skipped in eval mode or at probability 0."""

    def __init__(self, drop_prob: float):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1 - self.drop_prob
        mask = (keep + torch.rand(x.shape[0], 1, dtype=x.dtype)).floor()
        return x / keep * mask


class Residual(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.inp, self.f, self.out = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.drop_path = DropPath(p)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        return self.out(h + self.drop_path(torch.relu(self.f(h))))


def _data():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(5, 6, generator=g),), (torch.randint(0, 3, (5,), generator=g),)


def test_drop_path_module_is_the_identity_with_a_warning():
    torch.manual_seed(0)
    model = Residual(0.2)
    x, y = _data()
    with pytest.warns(RuntimeWarning, match=r"1 stochastic-depth module\(s\) \(DropPath; drop probability \[0.2\]\)"):
        ts = from_torch(model, x, y, optimizer=SGD(lr=0.5), quiet=True)
    assert model.drop_path.training  # put back
    model.drop_path.drop_prob = 0.0  # PyTorch's step without the draw: the step that was planned
    compare_step(model, x, y, "cross_entropy", SGD(lr=0.5), ts=ts)


def test_zero_drop_path_says_nothing(recwarn):
    torch.manual_seed(0)
    x, y = _data()
    from_torch(Residual(0.0), x, y, optimizer=SGD(lr=0.5), quiet=True)
    assert not [w for w in recwarn if "stochastic-depth" in str(w.message)]


def test_dinov3_rope_augmentation_is_the_identity_with_a_warning():
    """DINOv3's random RoPE coordinate rescale (on by default) is traced as the identity, as dropout is: the
    step equals the one built with the augmentation off in the config, and the import says so."""
    import warnings

    import transformers as tf
    import tvm

    conf = tf.DINOv3ViTConfig(image_size=16, patch_size=8, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                              num_attention_heads=2, num_register_tokens=1, attn_implementation="eager")
    assert conf.pos_embed_rescale is not None  # the default augments
    torch.manual_seed(0)
    model = tf.DINOv3ViTModel(conf)
    x = torch.randn(2, 3, 16, 16)
    target = (torch.randn(2, 6, 32),)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        augmented = from_torch(model, (x,), target, loss="mse", optimizer=SGD(lr=0.1), quiet=True)
    assert any("patch-coordinate augmentation (pos_embed_rescale=" in str(w.message) for w in caught)
    conf.pos_embed_rescale = None
    plain = from_torch(model, (x,), target, loss="mse", optimizer=SGD(lr=0.1), quiet=True)
    tvm.ir.assert_structural_equal(augmented.mod, plain.mod)
