"""More outside CNNs, written in plain torch.nn (no torchvision/timm) at tiny sizes.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/cnns_more.py:<name>``:
it returns ``(model, example_inputs, targets)`` and, where cross-entropy over dim 1 is not the
loss, a loss callable as fourth element. Batch 2, 16x16 to 32x32 images, 8-32 channels.
Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

from roam_tvm.zoo.families import _gen  # seeded weights and data, as the families

F = nn.functional
B = 2


def _img(g, c=3, s=32):
    return torch.randn(B, c, s, s, generator=g)


def _cls(g, n=10):
    return torch.randint(0, n, (B,), generator=g)


def _cbr(cin, cout, k=3, s=1, groups=1, act=nn.ReLU):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), act())


class _Head(nn.Module):
    """Global average pool + linear classifier."""

    def __init__(self, c, n=10):
        super().__init__()
        self.fc = nn.Linear(c, n)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


# --- EfficientNet-B0-like -------------------------------------------------------------------
class _SE(nn.Module):
    def __init__(self, c, r):
        super().__init__()
        self.a, self.b = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.b(F.silu(self.a(F.adaptive_avg_pool2d(x, 1)))))


class _MBConv(nn.Module):
    def __init__(self, cin, cout, exp, k, s):
        super().__init__()
        m = cin * exp
        self.f = nn.Sequential(_cbr(cin, m, 1, act=nn.SiLU), _cbr(m, m, k, s, groups=m, act=nn.SiLU),
                               _SE(m, max(2, cin // 4)), nn.Conv2d(m, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.res = s == 1 and cin == cout

    def forward(self, x):
        return x + self.f(x) if self.res else self.f(x)


def effnet():
    """EfficientNet-B0-like: SiLU, squeeze-excitation (sigmoid gate, global pool), depthwise convs, BN."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16, 3, 2, act=nn.SiLU), _MBConv(16, 16, 1, 3, 1), _MBConv(16, 24, 4, 3, 2),
                      _MBConv(24, 24, 4, 5, 1), _MBConv(24, 32, 4, 5, 2), _Head(32))
    return m, (_img(g),), (_cls(g),)


# --- ResNeXt -----------------------------------------------------------------------------
class _NeXt(nn.Module):
    def __init__(self, cin, cout, s, groups=4):
        super().__init__()
        self.f = nn.Sequential(_cbr(cin, cout, 1), _cbr(cout, cout, 3, s, groups=groups),
                               nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.sc = nn.Identity() if s == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, s, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.f(x) + self.sc(x))


def resnext():
    """ResNeXt: bottlenecks with grouped 3x3 convs (4 groups)."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16), _NeXt(16, 16, 1), _NeXt(16, 32, 2), _NeXt(32, 32, 1), _Head(32))
    return m, (_img(g),), (_cls(g),)


# --- ShuffleNet-V2 -------------------------------------------------------------------------
def _shuffle(x, groups=2):
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


class _Shuffle(nn.Module):
    def __init__(self, cin, cout, s):
        super().__init__()
        self.s = s
        b = cout // 2
        if s == 2:
            self.left = nn.Sequential(nn.Conv2d(cin, cin, 3, 2, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                                      _cbr(cin, b, 1))
        bin_ = cin if s == 2 else b
        self.right = nn.Sequential(_cbr(bin_, b, 1), nn.Conv2d(b, b, 3, s, 1, groups=b, bias=False),
                                   nn.BatchNorm2d(b), _cbr(b, b, 1))

    def forward(self, x):
        if self.s == 1:
            a, c = x.chunk(2, dim=1)
            out = torch.cat((a, self.right(c)), 1)
        else:
            out = torch.cat((self.left(x), self.right(x)), 1)
        return _shuffle(out)


def shufflenet():
    """ShuffleNet-V2: channel split (chunk), channel shuffle (view/transpose/contiguous), concat."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16), _Shuffle(16, 32, 2), _Shuffle(32, 32, 1), _Shuffle(32, 32, 1), _Head(32))
    return m, (_img(g),), (_cls(g),)


# --- SqueezeNet ----------------------------------------------------------------------------
class _Fire(nn.Module):
    def __init__(self, cin, sq, ex):
        super().__init__()
        self.sq, self.e1, self.e3 = nn.Conv2d(cin, sq, 1), nn.Conv2d(sq, ex, 1), nn.Conv2d(sq, ex, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.sq(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


def squeezenet():
    """SqueezeNet: fire modules (squeeze 1x1, expand 1x1 + 3x3 concatenated), ceil_mode max pools."""
    g = _gen()
    m = nn.Sequential(nn.Conv2d(3, 16, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True), _Fire(16, 8, 16),
                      _Fire(32, 8, 16), nn.MaxPool2d(3, 2, ceil_mode=True), _Fire(32, 8, 16),
                      nn.Dropout(0.5), nn.Conv2d(32, 10, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return m, (_img(g),), (_cls(g),)


# --- Inception-like ------------------------------------------------------------------------
class _Incep(nn.Module):
    def __init__(self, cin, c):
        super().__init__()
        self.b1 = _cbr(cin, c, 1)
        self.b3 = nn.Sequential(_cbr(cin, c, 1), _cbr(c, c, 3))
        self.b5 = nn.Sequential(_cbr(cin, c // 2, 1), _cbr(c // 2, c, 5))
        self.bp = _cbr(cin, c, 1)

    def forward(self, x):
        p = F.avg_pool2d(x, 3, 1, 1)
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(p)], 1)


def inception():
    """Inception-like: four-branch concat, 3x3 stride-1 pad-1 average pool, ceil_mode max pools."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16, 3, 2), nn.MaxPool2d(3, 2, ceil_mode=True), _Incep(16, 8),
                      nn.MaxPool2d(3, 2, ceil_mode=True), _Incep(32, 8), _Head(32))
    return m, (_img(g),), (_cls(g),)


# --- ConvNeXt block ------------------------------------------------------------------------
class _NeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c, eps=1e-6)
        self.p1, self.p2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(1e-1 * torch.ones(c))

    def forward(self, x):
        y = self.ln(self.dw(x).permute(0, 2, 3, 1))
        y = self.gamma * self.p2(F.gelu(self.p1(y)))
        return x + y.permute(0, 3, 1, 2)


def convnext():
    """ConvNeXt blocks: depthwise 7x7, channels-last LayerNorm via permute, GELU MLP, layer scale."""
    g = _gen()
    m = nn.Sequential(nn.Conv2d(3, 16, 4, 4), _NeXtBlock(16), _NeXtBlock(16), _Head(16))
    return m, (_img(g),), (_cls(g),)


# --- pre-activation ResNet -----------------------------------------------------------------
class _PreAct(nn.Module):
    def __init__(self, cin, cout, s):
        super().__init__()
        self.bn1, self.c1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, s, 1, bias=False)
        self.bn2, self.c2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.sc = None if s == 1 and cin == cout else nn.Conv2d(cin, cout, 1, s, bias=False)

    def forward(self, x):
        o = F.relu(self.bn1(x))
        sc = x if self.sc is None else self.sc(o)
        return self.c2(F.relu(self.bn2(self.c1(o)))) + sc


def preact_resnet():
    """Pre-activation ResNet: BN-ReLU-conv blocks, shortcut from the pre-activated input."""
    g = _gen()
    m = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), _PreAct(16, 16, 1), _PreAct(16, 32, 2),
                      nn.BatchNorm2d(32), nn.ReLU(), _Head(32))
    return m, (_img(g),), (_cls(g),)


def vgg_dropout():
    """VGG-like: conv stacks, max pools, classifier with Dropout(0.5) in train mode."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16), _cbr(16, 16), nn.MaxPool2d(2), _cbr(16, 32), _cbr(32, 32), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 10))
    return m, (_img(g),), (_cls(g),)


class _IR(nn.Module):
    def __init__(self, cin, cout, s, t=4):
        super().__init__()
        m = cin * t
        self.f = nn.Sequential(_cbr(cin, m, 1, act=nn.ReLU6), _cbr(m, m, 3, s, groups=m, act=nn.ReLU6),
                               nn.Conv2d(m, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.res = s == 1 and cin == cout

    def forward(self, x):
        return x + self.f(x) if self.res else self.f(x)


def mobilenetv2():
    """MobileNetV2: inverted residuals with ReLU6, linear bottlenecks."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16, 3, 2, act=nn.ReLU6), _IR(16, 16, 1), _IR(16, 24, 2), _IR(24, 24, 1),
                      _cbr(24, 32, 1, act=nn.ReLU6), _Head(32))
    return m, (_img(g),), (_cls(g),)


# --- dense prediction ----------------------------------------------------------------------
class _UNet(nn.Module):
    def __init__(self, c=8, classes=4):
        super().__init__()
        self.e1, self.e2, self.e3 = _cbr(3, c), _cbr(c, 2 * c), _cbr(2 * c, 4 * c)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, 2)
        self.d2, self.d1, self.d0 = _cbr(4 * c, 2 * c), _cbr(3 * c, c), _cbr(2 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(F.max_pool2d(a, 2))
        c = self.e3(F.max_pool2d(b, 2))
        d = self.d2(torch.cat([self.up2(c), b], 1))
        u = F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False)
        e = self.d1(torch.cat([u, a], 1))
        # a second pass at full size through both other interpolations
        f = F.interpolate(F.max_pool2d(e, 2), size=a.shape[-2:], mode="bilinear", align_corners=True)
        g = F.interpolate(F.avg_pool2d(a, 2), scale_factor=2, mode="nearest")
        return self.out(self.d0(torch.cat([f + e, g], 1)))


def unet():
    """U-Net: ConvTranspose2d, F.interpolate (bilinear both align_corners, nearest), per-pixel cross_entropy."""
    g = _gen()
    return _UNet(), (_img(g, s=16),), (torch.randint(0, 4, (B, 16, 16), generator=g),)


class _FPN(nn.Module):
    def __init__(self, c=16, classes=10):
        super().__init__()
        self.s1, self.s2, self.s3 = _cbr(3, c, 3, 2), _cbr(c, 2 * c, 3, 2), _cbr(2 * c, 2 * c, 3, 2)
        self.l1, self.l2, self.l3 = nn.Conv2d(c, c, 1), nn.Conv2d(2 * c, c, 1), nn.Conv2d(2 * c, c, 1)
        self.sm = nn.Conv2d(c, c, 3, padding=1)
        self.fc = nn.Linear(3 * c, classes)

    def forward(self, x):
        a = self.s1(x)
        b = self.s2(a)
        c = self.s3(b)
        p3 = self.l3(c)
        p2 = self.l2(b) + F.interpolate(p3, scale_factor=2, mode="nearest")
        p1 = self.l1(a) + F.interpolate(p2, size=a.shape[-2:], mode="nearest")
        feats = [F.adaptive_avg_pool2d(self.sm(p), 1).flatten(1) for p in (p1, p2, p3)]
        return self.fc(torch.cat(feats, 1))


def fpn():
    """FPN-like: bottom-up stages, lateral 1x1 convs, nearest-upsampled top-down sums, shared smoothing conv."""
    g = _gen()
    return _FPN(), (_img(g),), (_cls(g),)


class _Norms(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True)
        self.c2, self.n2 = nn.Conv2d(c, c, 3, 2, 1), nn.GroupNorm(4, c)
        self.c3, self.n3 = nn.Conv2d(c, c, 3, 2, 1), nn.LayerNorm([c, 8, 8])
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(4 * c, 10)

    def forward(self, x):
        x = F.relu(self.n1(self.c1(x)))
        x = F.relu(self.n2(self.c2(x)))
        x = F.relu(self.n3(self.c3(x)))
        return self.fc(self.pool(x).flatten(1))


def norms():
    """InstanceNorm2d (affine), GroupNorm and LayerNorm over [C, H, W]; AdaptiveAvgPool2d to (2, 2)."""
    g = _gen()
    return _Norms(), (_img(g),), (_cls(g),)


def adaptive_pool():
    """AdaptiveAvgPool2d((2, 2)) and AdaptiveMaxPool2d((2, 2)) over a 15x15 map (uneven windows)."""
    g = _gen()

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(_cbr(3, 16, 3, 2), _cbr(16, 16))
            self.fc = nn.Linear(16 * 8, 10)

        def forward(self, x):
            y = self.f(x)
            return self.fc(torch.cat([F.adaptive_avg_pool2d(y, 2), F.adaptive_max_pool2d(y, 2)], 1).flatten(1))
    return M(), (_img(g, s=30),), (_cls(g),)


class _Unpool(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.enc, self.dec = _cbr(3, c), _cbr(c, c)
        self.pool, self.unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
        self.out = nn.Conv2d(c, 4, 1)

    def forward(self, x):
        y, idx = self.pool(self.enc(x))
        return self.out(self.dec(self.unpool(y, idx)))


def unpool():
    """SegNet-style: MaxPool2d(return_indices=True) then MaxUnpool2d, per-pixel cross_entropy."""
    g = _gen()
    return _Unpool(), (_img(g, s=16),), (torch.randint(0, 4, (B, 16, 16), generator=g),)


# --- other dimensions ----------------------------------------------------------------------
def audio1d():
    """Conv1d audio classifier: strided Conv1d + BatchNorm1d + ReLU + MaxPool1d, 2 clips of 1024 samples."""
    g = _gen()

    def blk(i, o, k, s):
        return nn.Sequential(nn.Conv1d(i, o, k, s, k // 2, bias=False), nn.BatchNorm1d(o), nn.ReLU())
    m = nn.Sequential(blk(1, 16, 9, 4), nn.MaxPool1d(2), blk(16, 32, 5, 2), blk(32, 32, 3, 1),
                      nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 10))
    return m, (torch.randn(B, 1, 1024, generator=g),), (_cls(g),)


def video3d():
    """Tiny Conv3d video net: Conv3d + BatchNorm3d + ReLU + MaxPool3d, 2 clips of 4x16x16."""
    g = _gen()

    def blk(i, o, s):
        return nn.Sequential(nn.Conv3d(i, o, 3, s, 1, bias=False), nn.BatchNorm3d(o), nn.ReLU())
    m = nn.Sequential(blk(3, 8, 1), nn.MaxPool3d((1, 2, 2)), blk(8, 16, 2), nn.AdaptiveAvgPool3d(1),
                      nn.Flatten(), nn.Linear(16, 10))
    return m, (torch.randn(B, 3, 4, 16, 16, generator=g),), (_cls(g),)


def pixelshuffle():
    """ESPCN-like super-resolution: convs then PixelShuffle(2), mse loss against 2x targets."""
    g = _gen()
    m = nn.Sequential(nn.Conv2d(3, 32, 5, padding=2), nn.Tanh(), nn.Conv2d(32, 16, 3, padding=1), nn.Tanh(),
                      nn.Conv2d(16, 3 * 4, 3, padding=1), nn.PixelShuffle(2))
    return m, (_img(g, s=16),), (_img(g, s=32),), F.mse_loss


# --- losses, frozen parts, precision, layout -----------------------------------------------
def _small_cnn(c=16):
    return nn.Sequential(_cbr(3, c), nn.MaxPool2d(2), _cbr(c, 2 * c), nn.MaxPool2d(2), _cbr(2 * c, 2 * c), _Head(2 * c))


def _smooth_ce(logits, target):
    return F.cross_entropy(logits, target, label_smoothing=0.1)


def label_smoothing():
    """Small CNN trained with F.cross_entropy(label_smoothing=0.1) as the factory's loss callable."""
    g = _gen()
    return _small_cnn(), (_img(g),), (_cls(g),), _smooth_ce


_W = torch.linspace(0.5, 2.0, 10)


def _weighted_ce(logits, target):
    return F.cross_entropy(logits, target, weight=_W.to(logits.device, logits.dtype))


def weighted_ce():
    """Small CNN trained with a class-weighted F.cross_entropy loss callable."""
    g = _gen()
    return _small_cnn(), (_img(g),), (_cls(g),), _weighted_ce


class _FrozenBackbone(nn.Module):
    """Backbone with requires_grad=False and BN kept in eval mode (running stats), trainable head."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(_cbr(3, 16), nn.MaxPool2d(2), _cbr(16, 32), nn.MaxPool2d(2), _cbr(32, 32))
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.head = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), _Head(32))

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.eval()  # the usual fine-tuning recipe: frozen BN statistics
        return self

    def forward(self, x):
        return self.head(self.backbone(x))


def frozen_bn():
    """Frozen backbone (requires_grad=False, eval-mode BN) with a trainable conv + linear head."""
    g = _gen()
    m = _FrozenBackbone()
    with torch.no_grad():  # non-trivial running statistics, as a pretrained backbone has
        for mod in m.backbone.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
    return m, (_img(g),), (_cls(g),)


def bf16_cnn():
    """Small CNN for --precision bf16-amp (fp32 master weights, bf16 activations)."""
    g = _gen()
    return _small_cnn(), (_img(g),), (_cls(g),)


def channels_last():
    """Small CNN with model and input in torch.channels_last memory format."""
    g = _gen()
    m = _small_cnn().to(memory_format=torch.channels_last)
    return m, (_img(g).contiguous(memory_format=torch.channels_last),), (_cls(g),)


# --- less common layers --------------------------------------------------------------------
def alexnet():
    """AlexNet-like: LocalResponseNorm, overlapping max pools, Dropout in the classifier."""
    g = _gen()
    m = nn.Sequential(nn.Conv2d(3, 16, 5, 2, 2), nn.ReLU(), nn.LocalResponseNorm(5), nn.MaxPool2d(3, 2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.LocalResponseNorm(5), nn.MaxPool2d(3, 2),
                      nn.Flatten(), nn.Dropout(0.5), nn.Linear(32 * 3 * 3, 64), nn.ReLU(), nn.Linear(64, 10))
    return m, (_img(g),), (_cls(g),)


class _ResGen(nn.Module):
    """CycleGAN-style generator: ReflectionPad2d, InstanceNorm, reflect-padded residual convs,
    ConvTranspose2d with output_padding, replicate padding, tanh output."""

    def __init__(self, c=8):
        super().__init__()
        self.inp = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(3, c, 7), nn.InstanceNorm2d(c), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 2, 1), nn.InstanceNorm2d(2 * c), nn.ReLU())
        self.res = nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, padding=1, padding_mode="reflect"),
                                 nn.InstanceNorm2d(2 * c), nn.ReLU(),
                                 nn.Conv2d(2 * c, 2 * c, 3, padding=1, padding_mode="replicate"),
                                 nn.InstanceNorm2d(2 * c))
        self.up = nn.Sequential(nn.ConvTranspose2d(2 * c, c, 3, 2, 1, output_padding=1), nn.InstanceNorm2d(c),
                                nn.ReLU())
        self.out = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(c, 3, 7), nn.Tanh())

    def forward(self, x):
        y = self.down(self.inp(x))
        return self.out(self.up(y + self.res(y)))


def cyclegan():
    """CycleGAN-style generator (reflection/replicate padding, InstanceNorm, output_padding), L1 loss."""
    g = _gen()
    return _ResGen(), (_img(g, s=16),), (_img(g, s=16),), F.l1_loss


class _ASPP(nn.Module):
    def __init__(self, cin, c):
        super().__init__()
        self.b = nn.ModuleList([_cbr(cin, c, 1)] + [nn.Sequential(
            nn.Conv2d(cin, c, 3, padding=d, dilation=d, bias=False), nn.BatchNorm2d(c), nn.ReLU()) for d in (2, 4)])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, c, 1), nn.ReLU())
        self.proj = _cbr(4 * c, c, 1)

    def forward(self, x):
        p = F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.proj(torch.cat([b(x) for b in self.b] + [p], 1))


def deeplab():
    """DeepLabV3-like: dilated convs, ASPP with image pooling, bilinear upsampling, per-pixel cross_entropy."""
    g = _gen()
    m = nn.Sequential(_cbr(3, 16, 3, 2), _cbr(16, 16), _ASPP(16, 8), nn.Conv2d(8, 4, 1),
                      nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False))
    return m, (_img(g, s=16),), (torch.randint(0, 4, (B, 16, 16), generator=g),)


class _DropPath(nn.Module):
    """Stochastic depth: drops a residual branch per sample (torch.rand in the forward)."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:  # no draw at probability 0 (the usual way out)
            return x
        keep = (torch.rand(x.shape[0], 1, 1, 1, dtype=x.dtype) >= self.p).to(x.dtype)
        return x * keep / (1 - self.p)


class _ActBlock(nn.Module):
    def __init__(self, c, act, drop_path=0.0):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), act, nn.Dropout2d(0.1),
                               nn.Conv2d(c, c, 3, padding=1))
        self.dp = _DropPath(drop_path)

    def forward(self, x):
        return x + self.dp(self.f(x))


def _act_net(drop_path):
    acts = [nn.PReLU(16), nn.LeakyReLU(0.1), nn.ELU(), nn.Mish(), nn.Softplus(), nn.Hardtanh()]
    return nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), *[_ActBlock(16, a, drop_path) for a in acts], _Head(16))


def activations():
    """PReLU, LeakyReLU, ELU, Mish, Softplus, Hardtanh residual blocks with Dropout2d (drop-path rate 0)."""
    g = _gen()
    return _act_net(0.0), (_img(g),), (_cls(g),)


def drop_path():
    """activations() with stochastic depth 0.2 (torch.rand in the forward): refused with the way out."""
    g = _gen()
    return _act_net(0.2), (_img(g),), (_cls(g),)


def bf16_model():
    """Small CNN whose weights and input are bfloat16 (model.bfloat16(), no AMP)."""
    g = _gen()
    return _small_cnn().bfloat16(), (_img(g).bfloat16(),), (_cls(g),)


def pools():
    """avg_pool2d with ceil_mode / count_include_pad=False, dilated max pool, ZeroPad2d, flip and roll."""
    g = _gen()

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = _cbr(3, 16), _cbr(16, 16)
            self.pad = nn.ZeroPad2d((1, 0, 1, 0))
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = F.avg_pool2d(self.a(x), 3, 2, 1, ceil_mode=True, count_include_pad=False)
            y = F.max_pool2d(self.pad(y), 3, 1, dilation=2)
            y = self.b(y) + torch.roll(torch.flip(y, (3,)), 1, 2)
            return self.fc(y.mean((2, 3)))
    return M(), (_img(g),), (_cls(g),)


def frozen_bn_bf16():
    """frozen_bn for --precision bf16-amp (eval-mode BN under autocast)."""
    return frozen_bn()
