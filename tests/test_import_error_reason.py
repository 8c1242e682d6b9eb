"""The reason an import error names (frontend/relax_import._reason): TVM's errors end with it, torch's start
with it and end with a tlparse hint that said nothing (a GPT-2 failure read "ValueError: Use tlparse to see
full graph")."""
from __future__ import annotations

import pytest

pytest.importorskip("tvm")

from roam_tvm.frontend.relax_import import _reason  # noqa: E402

TORCH_ERROR = """Cannot view a tensor with shape torch.Size([2, 12, 64]) and strides (64, 128, 1) as a tensor with shape (24, 64)!
While executing %view_7 : [num_users=1] = call_function[target=torch.ops.aten.view.default](args = (%reshape_1, [-1, 64]), kwargs = {})
Original traceback:
File "/site/roam_tvm/frontend/export.py", line 36, in forward
    out = self.model(*args[:n_inputs])
  File "/site/transformers/pytorch_utils.py", line 119, in forward
    x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
Use tlparse to see full graph. (https://github.com/pytorch/tlparse?tab=readme-ov-file#tlparse-parse-structured-pt2-logs)"""


def test_torch_error_names_its_first_line_node_and_model_line():
    got = _reason(ValueError(TORCH_ERROR))
    assert got.startswith("Cannot view a tensor with shape torch.Size([2, 12, 64])")
    assert "node %view_7, torch.ops.aten.view.default" in got
    assert "pytorch_utils.py\", line 119" in got and "x.view(-1, x.size(-1))" in got
    assert "tlparse" not in got


def test_tvm_error_names_its_last_line():
    err = ValueError("Traceback (most recent call last):\n  1: foo\n  0: bar\n"
                     "ValueError: Concat expects all input tensors to have same ndim\n")
    assert _reason(err) == "ValueError: Concat expects all input tensors to have same ndim"
    assert _reason(ValueError("")) == "ValueError"
