"""Runtime truth for the plan checker: where it rejects a hand-made plan, the llvm build of that plan
really computes something else; where it accepts one, the build computes the reference's numbers.

Only plans whose tensors sit at offset 0 are run: a tensor at another offset needs
``ensure_zero_offset``, which copies at unaligned offsets and would hide the overlap at run time.
"""
from __future__ import annotations

import numpy as np
import pytest
import test_plan_checker as cases
import tvm
from plan_checker_lib import Lib
from tvm import relax

from roam_tvm.verify import check_plan

_AFTER_PLANNING = [
    relax.transform.LowerAllocTensor(),
    relax.transform.KillAfterLastUse(),
    relax.transform.LowerRuntimeBuiltin(),
    relax.transform.ComputePrimValue(),
    relax.transform.VMShapeLower(),
    relax.transform.AttachGlobalSymbol(),
]


def _run(func: relax.Function, x: np.ndarray) -> np.ndarray:
    mod = tvm.IRModule(dict(Lib.functions.items()))
    mod["main"] = func.with_attr("global_symbol", "main")
    exe = tvm.compile(mod, target="llvm", relax_pipeline=tvm.transform.Sequential(_AFTER_PLANNING))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("ref,plan", [
    (cases.view_ref, cases.view_good),
    (cases.view_ref, cases.view_bad),
    (cases.view_ref, cases.view_bad_relax_reshape),
    (cases.two_live, cases.two_live_same_slot),
], ids=["view-good", "view-bad", "relax-reshape-bad", "same-slot-bad"])
def test_verdict_matches_llvm_run(ref, plan):
    x = np.random.default_rng(0).standard_normal(4).astype("float32")
    rejected = bool(check_plan(ref, plan, Lib))
    differs = not np.array_equal(_run(ref, x), _run(plan, x))
    assert rejected == differs, (rejected, differs)
