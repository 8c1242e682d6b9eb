"""RoamPlan: RoamOrder, dataflow lowering and RoamLayout, never worse than TVM's default.

``RoamOrder`` guarantees that its order is no worse than the program order
*with perfect packing*, and ``RoamLayout`` that its arena is no worse than
StaticPlanBlockMemory *on the order it is given*. Neither alone guarantees
that order + layout beats StaticPlanBlockMemory on the *original* order: a new
order can pack differently. So this pass plans two candidates per function,

* A: RoamOrder, then lowering, then RoamLayout;
* B: lowering, then RoamLayout (which itself keeps StaticPlanBlockMemory's plan
  of the original order wherever that is lower),

simulates both, and keeps the lower peak. B is never above TVM's default, so
neither is the result. RoamLayout's ``min_saving`` (replace TVM's plan only for
a page saved) applies to B, the plan of the step as given; in A it runs with
``min_saving=0``, since A is kept only where it beats B anyway. With the
threshold, a reordered step whose own TVM plan is close to roam's fell back to
TVM's plan of the new order, which can be worse than B, though roam's plan of
it beats both (a 2-layer RNN: 31,096 B, at `cut`, lost to 32,312). The
dataflow-lowering passes are given by the caller (``roam_tvm.runtime.pipeline``),
so this module does not reach into the runtime.
"""
from __future__ import annotations

import copy
import warnings
from typing import Sequence

import tvm
from tvm import relax

from ..graph import GraphError
from .extract import ExtractError
from .records import OrderRecord, latest_layout, latest_order, record_layout, record_order
from .roam_layout import RoamLayout, simulated_peak
from .roam_order import RoamOrder


def _peak_or_inf(func: relax.Function, mod: tvm.IRModule) -> float:
    """The simulated peak, or infinity for a function roam cannot analyse (both candidates then tie, and
    program order, where RoamLayout left the function to TVM, is kept)."""
    try:
        return simulated_peak(func, mod)
    except (ExtractError, GraphError):
        return float("inf")


@tvm.transform.module_pass(opt_level=0, name="RoamPlan")
class RoamPlan:
    """Order and lay out every Relax function, keeping the better of (ordered, program order).

    Parameters
    ----------
    lower : sequence of Pass
        The dataflow-lowering passes that run between RoamOrder and RoamLayout
        (``RewriteDataflowReshape`` ... ``CallTIRRewrite``).
    order_options, layout_options : dict
        Passed to ``RoamOrder`` and ``RoamLayout``.
    """

    def __init__(self, lower: Sequence[tvm.transform.Pass], order_options: dict | None = None,
                 layout_options: dict | None = None):
        self.lower = list(lower)
        self.order_options = dict(order_options or {})
        self.layout_options = dict(layout_options or {})

    def transform_module(self, mod: tvm.IRModule, _ctx: tvm.transform.PassContext) -> tvm.IRModule:
        lower = tvm.transform.Sequential(self.lower)
        names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function)]
        with warnings.catch_warnings(record=True) as caught:  # both candidates warn about the same fallbacks
            warnings.simplefilter("always")
            ordered = RoamLayout(**{**self.layout_options, "min_saving": 0})(
                lower(RoamOrder(**self.order_options)(mod)))
            order_recs = {n: latest_order(n) for n in names}
            ordered_layout = {n: latest_layout(n) for n in names}
            program = RoamLayout(**self.layout_options)(lower(mod))
            program_layout = {n: latest_layout(n) for n in names}
        for message, category in dict.fromkeys((str(w.message), w.category) for w in caught):
            warnings.warn(message, category, stacklevel=2)
        out = program.clone()
        for gv, func in ordered.functions.items():
            if not isinstance(func, relax.Function):
                continue
            name = gv.name_hint
            peak_a = _peak_or_inf(func, ordered)
            peak_b = _peak_or_inf(program[name], program)
            rec = copy.copy(order_recs.get(name)) or OrderRecord(function=name)
            if peak_a < peak_b:
                out[name] = func
                rec.status = f"{rec.status}; kept (peak {peak_a} < {peak_b} in program order)"
                chosen = ordered_layout.get(name)
            else:
                rec.status = (f"{rec.status}; program order kept (planned peak {peak_b} <= {peak_a} "
                              f"with the new order)")
                rec.order = []
                chosen = program_layout.get(name)
            record_order(rec)
            if chosen is not None:
                record_layout(copy.copy(chosen))
        return out
