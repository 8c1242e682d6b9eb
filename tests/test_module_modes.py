"""A model handed over in train mode keeps its modules' own train/eval flags: a BatchNorm the user put
in eval mode (frozen statistics) is planned and run with its running statistics, as PyTorch's step does,
and the model is not changed by the import (frontend/module_modes.py)."""
from __future__ import annotations

import copy
import os
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import test_numerics  # noqa: E402

from roam_tvm.frontend import SGD, from_torch  # noqa: E402


def _frozen_bn_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2.0)
    model.train()
    model[1].eval()
    return model


def test_eval_batch_norm_in_a_training_model_uses_running_statistics():
    model = _frozen_bn_model()
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 2])
    want = float(nn.functional.cross_entropy(copy.deepcopy(model)(x), y))  # eval BN: running statistics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = from_torch(model, (x,), (y,), loss="cross_entropy", optimizer=SGD(lr=0.1), quiet=True)
    assert model.training and not model[1].training  # the user's flags, untouched by the import
    got = test_numerics.tvm_step(ts, (x,), (y,))[0]
    assert abs(float(got) - want) <= 1e-5 * abs(want)


def test_eval_batch_norm_step_matches_pytorch():
    model = _frozen_bn_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test_numerics.compare_step(model, (torch.randn(2, 3, 8, 8),), (torch.tensor([0, 2]),), "cross_entropy",
                                   SGD(lr=0.1, momentum=0.9))


def test_eval_and_training_batch_norms_side_by_side():
    """A frozen (eval) BatchNorm before a training one: only the training one's running statistics are
    updated, as in PyTorch's step (the step's states matched against torch's buffers)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4),
                          nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2.0)
    model.train()
    model[1].eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test_numerics.compare_step(model, (torch.randn(2, 3, 8, 8),), (torch.tensor([0, 2]),), "cross_entropy",
                                   SGD(lr=0.1))
