"""The planner's model of aliasing, in one place: which Relax constructs share storage.

Every binding the extractor (``extract.py``) meets is classified here. The
model follows TVM's own planner (``StaticPlanBlockMemory``) and is conservative
where TVM assumes: a tensor whose storage may be kept by something we cannot
see *escapes* and is never placed in a roam arena (it stays an
``R.builtin.alloc_tensor``, planned by TVM's rules or allocated on its own).

================================================  =============================================
construct                                         model
================================================  =============================================
``R.builtin.alloc_tensor`` (global scope)         a new storage root, planned by RoamLayout
``R.builtin.alloc_tensor`` (other scopes)         a root that escapes (not planned)
``R.reshape``, ``R.memory.view``,                 a view: the result aliases argument 0
``R.memory.ensure_zero_offset``,
``R.builtin.stop_lift_params``
``R.call_packed("vm.builtin.reshape", x, s)``     a view of ``x`` (apache/tvm#20134); also the other
and the externs in :data:`VIEW_EXTERNS`           externs listed there
``R.call_tir`` of a reshape PrimFunc              a view (call_tir level only)
``y = x``, ``R.match_cast(x, ...)``               the same storage as ``x``
``(a, b)`` and ``t[i]``                           tuples keep their nesting: ``((a1, a2), a3)[1]``
                                                  is ``a3``; an index that the structure does not
                                                  have is an error (the function falls back)
``R.call_tir_inplace``                            outputs alias the arguments named by
                                                  ``inplace_indices`` (a new version of each)
lowered ``f(args..., out)`` (PrimFunc)            reads ``args``; writes ``out`` (the allocated
                                                  arguments, and those named by the binding that
                                                  follows, which ``CallTIRRewrite`` emits)
``R.vm.call_tir_dyn(f, (args..., shape))``        the same, with the arguments of the tuple
``R.call_packed`` / ``call_dps_packed`` extern    reads its arguments and writes the allocated ones
(returning nothing; also inside                   (TVM's rule: externs keep no reference)
``R.call_pure_packed``)
an extern not in :data:`VIEW_EXTERNS` that        its tensor arguments escape: the result may be a
returns tensors                                   view of any of them
a call of a Relax function, a closure, or an      its tensor arguments escape; its result is a
unknown op; ``If``                                fresh tensor allocated elsewhere
any other Relax op (``R.call_builtin_with_ctx``,  reads its arguments, which escape (TVM's rule:
``R.call_inplace_packed``, un-legalized ops)      the op may keep a reference); result fresh
function outputs                                  their roots stay outside the arena; an output
                                                  that is (a view of) a parameter is that parameter
================================================  =============================================

Nothing else is guessed: a binding outside this table is an ``ExtractError``
naming it, and the pass leaves that function to ``StaticPlanBlockMemory``.
"""
from __future__ import annotations

import tvm
from tvm import relax, tirx

#: Relax ops whose result is a view of argument 0.
VIEW_OPS = frozenset({"relax.reshape", "relax.memory.view", "relax.memory.ensure_zero_offset",
                      "relax.builtin.stop_lift_params"})

#: Extern (``R.call_packed``) functions whose result is a view of argument 0.
VIEW_EXTERNS = frozenset({"vm.builtin.reshape", "vm.builtin.attention_kv_cache_view"})

#: Call ops at the call_tir level that compute into fresh outputs.
DPS_OPS = frozenset({"relax.call_tir", "relax.call_tir_with_grad", "relax.call_dps_packed"})

#: Memory ops that only appear in an already planned function.
PLANNED_OPS = frozenset({"relax.memory.alloc_storage", "relax.memory.alloc_tensor",
                         "relax.memory.kill_tensor", "relax.memory.kill_storage",
                         "relax.vm.alloc_storage", "relax.vm.alloc_tensor", "relax.vm.kill_object"})


def callee_kind(call: relax.Call, mod: tvm.IRModule | None) -> str:
    """How the extractor treats a call whose ``op`` is not a ``tvm.ir.Op``.

    Returns one of ``"primfunc"`` (a PrimFunc of ``mod``: destination passing),
    ``"view_extern"`` (see :data:`VIEW_EXTERNS`), ``"extern"`` (an ``ExternFunc``),
    or ``"opaque"`` (a Relax function, a closure, a GlobalVar ``mod`` does not hold).
    """
    op = call.op
    if isinstance(op, relax.ExternFunc):
        return "view_extern" if str(op.global_symbol) in VIEW_EXTERNS else "extern"
    if isinstance(op, tvm.ir.GlobalVar) and mod is not None and op in mod.functions:
        if isinstance(mod[op], tirx.PrimFunc):
            return "primfunc"
    return "opaque"


def extern_name(call: relax.Call) -> str:
    op = call.op
    if isinstance(op, relax.ExternFunc):
        return str(op.global_symbol)
    if isinstance(op, tvm.ir.GlobalVar):
        return op.name_hint
    return type(op).__name__


def storage_scope(alloc: relax.Call) -> str:
    """The storage scope of an ``R.builtin.alloc_tensor`` call (``global`` when absent)."""
    if len(alloc.args) > 3 and hasattr(alloc.args[3], "value"):
        return str(alloc.args[3].value)
    return "global"


def device_index(alloc: relax.Call) -> int:
    """The ``runtime_device_index`` of an ``R.builtin.alloc_tensor`` call."""
    arg = alloc.args[2] if len(alloc.args) > 2 else None
    value = getattr(arg, "value", None)  # an IntImm (0.27), or a PrimValue around one
    if isinstance(value, tirx.IntImm):
        value = value.value
    return int(value) if isinstance(value, int) else 0
