"""Vision models written from scratch (no torchvision): MLP, small CNN, ResNet-18/50, VGG-11, MobileNetV2, ViT.

They avoid ops that import badly into Relax: no adaptive pooling (global pooling is a ``mean`` over H, W),
no dropout, attention written with plain matmul/softmax.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_features: int, hidden: Sequence[int], num_classes: int):
        super().__init__()
        layers = []
        prev = in_features
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU()]
            prev = h
        layers.append(nn.Linear(prev, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    """conv-bn-relu-maxpool twice, then a linear classifier."""

    def __init__(self, image: int, channels: int = 3, width: int = 16, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(2 * width * (image // 4) ** 2, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + idt)


def _resnet_stem(width: int, small_stem: bool) -> nn.Sequential:
    """ImageNet stem (7x7 stride 2, max-pool) or CIFAR stem (3x3 stride 1, no pool)."""
    if small_stem:
        return nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
    return nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1))


class ResNet18(nn.Module):
    """ResNet-18 (basic blocks 2-2-2-2). ``small_stem`` uses a 3x3 stride-1 stem without max-pool (CIFAR style)."""

    def __init__(self, num_classes: int = 1000, width: int = 64, small_stem: bool = False):
        super().__init__()
        self.stem = _resnet_stem(width, small_stem)
        blocks = []
        cin = width
        for i, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            stride = 1 if i == 0 else 2
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        y = self.layers(self.stem(x))
        return self.fc(y.mean(dim=(2, 3)))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (stride here, as torchvision's v1.5), 1x1 expand by 4, each with batch norm."""

    def __init__(self, cin: int, mid: int, stride: int):
        super().__init__()
        cout = 4 * mid
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + idt)


class ResNet50(nn.Module):
    """ResNet-50 (bottleneck blocks 3-4-6-3, torchvision's v1.5 layout); ``small_stem`` as in :class:`ResNet18`."""

    def __init__(self, num_classes: int = 1000, width: int = 64, small_stem: bool = False):
        super().__init__()
        self.stem = _resnet_stem(width, small_stem)
        blocks = []
        cin = width
        for i, (n, mid) in enumerate(zip([3, 4, 6, 3], [width, 2 * width, 4 * width, 8 * width])):
            for j in range(n):
                blocks.append(Bottleneck(cin, mid, 2 if i > 0 and j == 0 else 1))
                cin = 4 * mid
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        y = self.layers(self.stem(x))
        return self.fc(y.mean(dim=(2, 3)))


VGG11_CFG = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


class VGG11(nn.Module):
    """VGG-11 (configuration "A", no batch norm, no dropout). The classifier reads the flattened
    ``512 * (image/32)^2`` features directly (at 224 this equals torchvision's 7x7 adaptive pool)."""

    def __init__(self, image: int, num_classes: int = 1000, width_div: int = 1, hidden: int = 4096):
        super().__init__()
        layers = []
        cin = 3
        for v in VGG11_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                cout = max(1, v // width_div)
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
                cin = cout
        self.features = nn.Sequential(*layers)
        flat = cin * (image // 32) ** 2
        self.classifier = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                        nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU6(nn.Sequential):
    def __init__(self, cin, cout, kernel=3, stride=1, groups=1):
        super().__init__(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers.append(ConvBNReLU6(cin, hidden, 1))
        layers += [ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (expansion 6, inverted residuals, ReLU6), no dropout, global mean pooling."""

    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0):
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        last = _make_divisible(1280 * max(1.0, width_mult))
        layers = [ConvBNReLU6(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(ConvBNReLU6(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"ViT width {dim} is not divisible by the number of heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        h = self.heads
        # split on the feature axis (integer indexing such as qkv[0] would become a 0-d ``take``)
        q, k, v = (t.reshape(b, n, h, d // h).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d // h)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, n, d)
        return self.proj(y)


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    """Vision transformer (pre-norm, class token, learned position embedding, GELU MLP, no dropout)."""

    def __init__(self, image: int, patch: int, dim: int, depth: int, heads: int, mlp: int, num_classes: int):
        super().__init__()
        if image % patch:
            raise ValueError(f"ViT image size {image} is not divisible by the patch size {patch}")
        n = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        y = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(y.shape[0], -1, -1)
        y = torch.cat([cls, y], dim=1) + self.pos_embed
        y = self.norm(self.blocks(y))
        # class token as a slice + flatten (not ``y[:, 0]``: a 0-d index becomes a ``take`` whose gradient
        # TVM 0.27 cannot legalize)
        return self.head(y[:, :1].flatten(1))
