"""Session 17's outside models (benchmarks/outside/kinds_s17_nn.py, kinds_s17.py) train as PyTorch does: one
roam-planned step on llvm against PyTorch's (test_outside_kinds_more.check_outside_step); all slow. The first
group covers this session's frontend fixes: no_grad blocks, buffers updated in the forward (spectral norm, an EMA
codebook), cumprod / logcumsumexp / nn.Bilinear / cdist decompositions, value checks in a loss, wav2vec2's
CTC on masked_select targets; the second
Qwen3-Next's traced triangular solve, ProphetNet's Linear on 4-D streams, PatchTST's unfold and SEW-D's
in-place custom softmax."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("tvm")

from roam_tvm.frontend import SGD  # noqa: E402

from test_outside_hf_more import OUTSIDE, _module  # noqa: E402
from test_outside_kinds_more import check_outside_step  # noqa: E402
FAST = [("kinds_s17_nn.py", n) for n in ("spectral_norm_disc", "simsiam_no_grad", "ema_vq_codebook",
                                         "cumulative_ops", "glu_bilinear_prelu", "gaussian_poisson_nll",
                                         "wav2vec2_ctc")]
SLOW = [("kinds_s17.py", n) for n in ("qwen3_next", "prophetnet", "patchtst_cls", "sew_d")]


def _check(path: str, name: str, monkeypatch) -> None:
    made = getattr(_module(os.path.join(OUTSIDE, path)), name)()
    if isinstance(made, dict):
        made = (made["model"], made["example_inputs"], made["targets"], made.get("loss"))
    model, inputs, targets = made[:3]
    loss = made[3] if len(made) > 3 and made[3] is not None else (
        "mse" if targets[0].is_floating_point() else "cross_entropy")
    check_outside_step(model, inputs, targets, loss, SGD(lr=0.1), monkeypatch)


@pytest.mark.slow  # each fix has its own fast test (test_no_grad_regions, test_mutated_buffers, ...)
@pytest.mark.parametrize("path,name", FAST)
def test_s17_tiny(path, name, monkeypatch):
    _check(path, name, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("path,name", SLOW)
def test_s17_tiny_slow(path, name, monkeypatch):
    _check(path, name, monkeypatch)
