"""Outside models whose activations export as chains of elementwise ops: MobileNetV3 (hardswish,
hardsigmoid), BLOOM (ALiBi attention, tanh GELU spelled out), TCN (weight_norm, dilated causal convs).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/activations.py:<name>``:
it returns ``(model, example_inputs, targets)`` at the sizes the keep-like-PyTorch probes measured.
Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from roam_tvm.zoo.families import CausalLM, _gen  # seeded weights and data, as the families

F = nn.functional


def _make_div(v: float, d: int = 8) -> int:
    return max(d, int(v + d / 2) // d * d)


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation with a hardsigmoid gate."""

    def __init__(self, c: int, squeeze: int):
        super().__init__()
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return F.hardsigmoid(self.fc2(F.relu(self.fc1(s)))) * x


class InvertedResidual(nn.Module):
    """MobileNetV3 block: expand 1x1, depthwise kxk, optional SE, project 1x1, residual."""

    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(SqueezeExcite(exp, _make_div(exp // 4)))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return y + x if self.res else y


# (in, kernel, expanded, out, squeeze-excite, hardswish, stride): MobileNetV3-small's blocks
_MBV3_SMALL = [(16, 3, 16, 16, True, False, 2), (16, 3, 72, 24, False, False, 2), (24, 3, 88, 24, False, False, 1),
               (24, 5, 96, 40, True, True, 2), (40, 5, 240, 40, True, True, 1), (40, 5, 120, 48, True, True, 1),
               (48, 5, 144, 48, True, True, 1), (48, 5, 288, 96, True, True, 2), (96, 5, 576, 96, True, True, 1)]


class MobileNetV3Small(nn.Module):
    """MobileNetV3-small-like, torchvision-style blocks written by hand."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.blocks = nn.Sequential(*[InvertedResidual(*c) for c in _MBV3_SMALL])
        self.last = nn.Sequential(nn.Conv2d(96, 576, 1, bias=False), nn.BatchNorm2d(576), nn.Hardswish())
        self.head = nn.Sequential(nn.Linear(576, 256), nn.Hardswish(), nn.Linear(256, classes))

    def forward(self, x):
        x = self.last(self.blocks(self.stem(x)))
        return self.head(x.mean((2, 3)))


def mbv3():
    """MobileNetV3-small-like (hardswish, SE with hardsigmoid), 8 images of 3x64x64."""
    g = _gen()
    return MobileNetV3Small(), (torch.randn(8, 3, 64, 64, generator=g),), (torch.randint(0, 10, (8,), generator=g),)


def bloom():
    """BLOOM-like (ALiBi, tanh GELU), transformers BloomConfig hidden 128, 2 layers, 4 heads, vocab 512,
    8 sequences of 128, eager attention."""
    import transformers as tf
    from transformers.utils import logging
    logging.set_verbosity_error()
    g = _gen()
    cfg = tf.BloomConfig(vocab_size=512, hidden_size=128, n_layer=2, n_head=4, hidden_dropout=0.0,
                         attention_dropout=0.0, use_cache=False, attn_implementation="eager")
    model = CausalLM(tf.BloomForCausalLM(cfg))
    ids = torch.randint(0, 512, (8, 128), generator=g)
    return model, (ids,), (torch.randint(0, 512, (8, 128), generator=g),)


class Chomp1d(nn.Module):
    """Drops the last ``p`` steps: what makes a padded convolution causal."""

    def __init__(self, p: int):
        super().__init__()
        self.p = p

    def forward(self, x):
        return x[:, :, :-self.p].contiguous()


class TemporalBlock(nn.Module):
    """Two weight-normed dilated causal Conv1d + ReLU, residual (1x1 conv where widths differ)."""

    def __init__(self, cin: int, cout: int, k: int, d: int):
        super().__init__()
        p = (k - 1) * d
        self.conv1 = weight_norm(nn.Conv1d(cin, cout, k, padding=p, dilation=d))
        self.conv2 = weight_norm(nn.Conv1d(cout, cout, k, padding=p, dilation=d))
        self.net = nn.Sequential(self.conv1, Chomp1d(p), nn.ReLU(), nn.Dropout(0.0),
                                 self.conv2, Chomp1d(p), nn.ReLU(), nn.Dropout(0.0))
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None
        self.relu = nn.ReLU()

    def forward(self, x):
        res = x if self.down is None else self.down(x)
        return self.relu(self.net(x) + res)


class TCN(nn.Module):
    """Temporal convolutional network (locuslab style): dilations 1, 2, 4, ..., classify the last step."""

    def __init__(self, cin: int = 16, ch: int = 64, levels: int = 4, k: int = 3, classes: int = 10):
        super().__init__()
        self.tcn = nn.Sequential(*[TemporalBlock(cin if i == 0 else ch, ch, k, 2 ** i) for i in range(levels)])
        self.fc = nn.Linear(ch, classes)

    def forward(self, x):
        return self.fc(self.tcn(x)[:, :, -1])


def tcn():
    """TCN, 64 channels, kernel 3, 4 levels, 8 sequences of 512 steps x 16 features."""
    g = _gen()
    return TCN(), (torch.randn(8, 16, 512, generator=g),), (torch.randint(0, 10, (8,), generator=g),)


def tcn_wide():
    """Wider TCN with longer kernels (weights matter more): 128 channels, kernel 7, 6 levels, 8 x 256 steps."""
    g = _gen()
    model = TCN(ch=128, levels=6, k=7)
    return model, (torch.randn(8, 16, 256, generator=g),), (torch.randint(0, 10, (8,), generator=g),)
