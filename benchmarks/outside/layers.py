"""Outside models built on less common layers: CTC loss, nn.Transformer, a spatial transformer
(affine_grid + grid_sample), nn.Unfold patches.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/layers.py:<name>``:
it returns ``(model, example_inputs, targets)`` (and a loss where cross-entropy is not the one), at
the sizes the breadth probes measured. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

from roam_tvm.zoo.families import _gen  # seeded weights and data, as the families

F = nn.functional


def _ctc(log_probs, targets, input_lengths, target_lengths):
    """CTC loss over ``[T, N, C]`` log-probabilities."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)


def _own_loss(loss):
    """The model's output is its loss already."""
    return loss


class SpeechCTC(nn.Module):
    """Conv front end + bidirectional GRU + linear -> ``[T, N, C]`` log-probs (DeepSpeech-like, tiny)."""

    def __init__(self, feats: int = 16, hidden: int = 32, classes: int = 12):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(feats, hidden, 5, padding=2), nn.ReLU(),
                                  nn.Conv1d(hidden, hidden, 3, stride=2, padding=1), nn.ReLU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, classes)

    def forward(self, x):  # x [N, feats, T]
        h = self.conv(x).transpose(1, 2)  # [N, T/2, H]
        h, _ = self.gru(h)
        return self.out(h).log_softmax(-1).transpose(0, 1)  # [T/2, N, C]


def speech_ctc():
    """DeepSpeech-like speech model trained with F.ctc_loss: 4 utterances of 40 frames, 6-label targets."""
    g = _gen()
    x = torch.randn(4, 16, 40, generator=g)
    targets = torch.randint(1, 12, (4, 6), generator=g)
    input_lengths, target_lengths = torch.tensor([20, 20, 18, 15]), torch.tensor([6, 5, 4, 3])
    return SpeechCTC(), (x,), (targets, input_lengths, target_lengths), _ctc


class Seq2Seq(nn.Module):
    """nn.Transformer encoder-decoder (2 + 2 layers, width 32, dropout 0.1) with a causal target mask."""

    def __init__(self, vocab: int = 40, d: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.t = nn.Transformer(d, 4, 2, 2, 64, dropout=0.1, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.out(self.t(self.emb(src), self.emb(tgt), tgt_mask=mask))


def seq2seq():
    """nn.Transformer translation step: 4 sources of 12 tokens, 4 targets of 10, vocab 40."""
    g = _gen()
    src = torch.randint(0, 40, (4, 12), generator=g)
    tgt = torch.randint(0, 40, (4, 10), generator=g)
    return Seq2Seq(), (src, tgt), (torch.randint(0, 40, (4, 10), generator=g),)


class STNNet(nn.Module):
    """The PyTorch spatial transformer tutorial's classifier, small (28x28 MNIST-like)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
        self.fc1, self.fc2 = nn.Linear(320, 50), nn.Linear(50, 10)
        self.loc = nn.Sequential(nn.Conv2d(1, 8, 7), nn.MaxPool2d(2, 2), nn.ReLU(True),
                                 nn.Conv2d(8, 10, 5), nn.MaxPool2d(2, 2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
        self.fc_loc[2].weight.data.zero_()  # start at the identity transform, as the tutorial does
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        theta = self.fc_loc(self.loc(x).view(-1, 90)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        return self.fc2(F.relu(self.fc1(x.view(-1, 320))))


def stn():
    """Spatial transformer network (affine_grid + grid_sample), 8 images of 1x28x28."""
    g = _gen()
    return STNNet(), (torch.randn(8, 1, 28, 28, generator=g),), (torch.randint(0, 10, (8,), generator=g),)


class UnfoldPatches(nn.Module):
    """ViT-style patch extraction with nn.Unfold + a tiny transformer encoder."""

    def __init__(self, img: int = 32, patch: int = 4, d: int = 48, classes: int = 10):
        super().__init__()
        self.unfold = nn.Unfold(patch, stride=patch)
        self.proj = nn.Linear(3 * patch * patch, d)
        self.pos = nn.Parameter(torch.zeros(1, (img // patch) ** 2, d))
        layer = nn.TransformerEncoderLayer(d, 4, 96, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        p = self.unfold(x).transpose(1, 2)
        return self.head(self.enc(self.proj(p) + self.pos).mean(1))


def unfold_vit():
    """nn.Unfold 4x4 patches into a 2-layer encoder (width 48), 4 images of 3x32x32."""
    g = _gen()
    return UnfoldPatches(), (torch.randn(4, 3, 32, 32, generator=g),), (torch.randint(0, 10, (4,), generator=g),)


class CTCInside(nn.Module):
    """Returns its own loss: nn.CTCLoss(zero_infinity=True) inside forward, targets passed as inputs."""

    def __init__(self):
        super().__init__()
        self.net = SpeechCTC()
        self.ctc = nn.CTCLoss(zero_infinity=True)

    def forward(self, x, targets, input_lengths, target_lengths):
        return self.ctc(self.net(x), targets, input_lengths, target_lengths)


def ctc_inside():
    """speech_ctc with nn.CTCLoss inside the model's forward (the model returns the loss)."""
    _, (x,), (targets, input_lengths, target_lengths), _ = speech_ctc()
    torch.manual_seed(0)
    return CTCInside(), (x, targets, input_lengths, target_lengths), (), _own_loss
