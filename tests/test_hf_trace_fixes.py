"""Hugging Face forwards that only trace with the frontend's help: dynamic-NTK RoPE (hf_rope.py) and
T5-style encoder stacks that skip their default mask while tracing (hf_default_mask.py). Each model
exports, and the exported step's loss is the eager model's."""
from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from roam_tvm.frontend.export import export_with_loss  # noqa: E402
from roam_tvm.frontend.hf_default_mask import _skips_default_mask  # noqa: E402
from roam_tvm.frontend.hf_rope import dynamic_rope_modules  # noqa: E402

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "outside",
                    "kinds_more.py")


def _factory(name):
    spec = importlib.util.spec_from_file_location("benchmarks_outside_kinds_more", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)()


def _loss(out, tgt):
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt.reshape(-1))


def _exported_loss_is_eager(model, ins, tgt):
    ep = export_with_loss(model, ins, tgt, _loss)
    traced = ep.module()(*ins, *tgt)
    traced = traced[0] if isinstance(traced, (tuple, list)) else traced
    with torch.no_grad():
        eager = _loss(model(*ins), *tgt)
    torch.testing.assert_close(traced.detach(), eager, rtol=1e-5, atol=1e-5)
    return ep


def test_dynamic_rope_traces_with_the_eager_frequencies():
    """12 tokens over 8 original positions: the eager forward grows the frequencies (scaled base); the
    trace uses those, not the initial ones (the loss would differ), and the update is restored after."""
    model, ins, tgt = _factory("llama_rope_dynamic")
    (rope,) = dynamic_rope_modules(model)
    before = rope.inv_freq.clone()
    ep = _exported_loss_is_eager(model, ins, tgt)  # random tiny weights: the loss barely sees RoPE
    assert not torch.equal(rope.inv_freq, before)  # grown for 12 > 8 positions, as eagerly
    (traced,) = [v for k, v in ep.constants.items() if k.endswith("rotary_emb.inv_freq")]
    torch.testing.assert_close(traced, rope.inv_freq, rtol=0, atol=0)  # the trace's are the grown ones
    assert rope.rope_type == "dynamic"


@pytest.mark.parametrize("name", ["longt5_local", "longt5_tglobal", "switch"])
def test_encoder_stack_without_mask_traces_as_eager(name):
    """Called without attention_mask, the encoder gets the all-ones mask its eager forward builds."""
    model, ins, tgt = _factory(name)
    stacks = [m for m in model.modules() if _skips_default_mask(m)]
    assert len(stacks) == 1 and stacks[0].is_decoder is False  # the encoder only
    _exported_loss_is_eager(model, ins, tgt)
    assert not any(m._forward_pre_hooks for m in model.modules())  # the hooks are removed
