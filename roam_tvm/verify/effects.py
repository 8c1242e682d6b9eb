"""Call effects for the plan checker: which arguments of a lowered call are written.

This is the checker's own reading of the callee, made apart from the planner:

* a PrimFunc: the buffer parameters it stores to (``BufferStore``, also through a ``decl_buffer`` that
  aliases a parameter's data) or hands to a call (``A.data`` given to ``call_extern`` etc. counts as a
  possible write). A PrimFunc with no store and no such call at all (``T.evaluate(0)`` bodies, as in
  TVM's planner tests) is *opaque*: it is taken to follow CallTIRRewrite's destination-passing form,
  so exactly its fresh arguments are outputs (:func:`dps_outputs`).
* an extern (``R.call_packed`` / ``ExternFunc`` / ``call_pure_packed``): ``vm.builtin.reshape`` is a
  view; any other extern returning a tensor may return a view of its arguments, so it is not modelled;
  an extern returning nothing follows the destination-passing rule, and must have a fresh argument.
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi

from .memory import Unmodelled

#: externs that return a view of their first argument (same bytes, new shape)
VIEW_EXTERNS = frozenset({"vm.builtin.reshape"})
# externs that return a view of an object's own memory (a KV cache's), given no tensor argument
OBJECT_VIEW_EXTERNS = frozenset({"vm.builtin.attention_kv_cache_view"})
# externs that only read their tensor arguments (they copy them into an object they are given or return)
READ_ONLY_EXTERNS = frozenset({"vm.builtin.attention_kv_cache_create", "vm.builtin.attention_kv_cache_append",
                               "vm.builtin.attention_kv_cache_update"})


@dataclass(frozen=True)
class PrimFuncEffect:
    """Written buffer parameters of one PrimFunc, by ordinal among its buffer parameters."""

    n_buffers: int
    written: frozenset
    opaque: bool  # no store and no pointer escape: use the destination-passing rule


_CACHE: dict = {}


def primfunc_effect(name: str, func: tvm.tirx.PrimFunc) -> PrimFuncEffect:
    """Effect of ``func`` (cached by object identity)."""
    key = (name, func.__hash__())
    hit = _CACHE.get(key)
    if hit is not None and hit[0].same_as(func):
        return hit[1]
    eff = _analyse(name, func)
    if len(_CACHE) > 4096:  # keep long sessions from holding every PrimFunc ever checked
        _CACHE.clear()
    _CACHE[key] = (func, eff)
    return eff


def _is_buffer_param(p) -> bool:
    return type(p.ty).__name__ == "BufferType"


def _fields(obj) -> list:
    names, info = [], getattr(type(obj), "__tvm_ffi_type_info__", None)
    while info is not None:
        names += [f.name for f in info.fields]
        info = info.parent_type_info
    return [n for n in names if n not in ("span", "ty")]


def _children(obj):
    if isinstance(obj, (tvm_ffi.Array, list, tuple)):
        return list(obj)
    if isinstance(obj, tvm_ffi.Map):
        return list(obj.values())
    if not hasattr(type(obj), "__tvm_ffi_type_info__"):
        return []
    return [getattr(obj, n, None) for n in _fields(obj)]


def _mentions(obj, params: dict) -> set:
    """Buffer params (by ordinal) that appear anywhere under ``obj``."""
    found, stack = set(), [obj]
    while stack:
        o = stack.pop()
        kind = type(o).__name__
        if kind == "Var" and o in params:
            found.add(params[o])
            continue
        # a load reads its buffer; only its indices can hide a pointer
        stack.extend(o.indices if kind in ("BufferLoad", "TensorLoad") else _children(o))
    return found


def _all_nodes(root) -> list:
    out, stack = [], [root]
    while stack:
        o = stack.pop()
        out.append(o)
        stack.extend(_children(o))
    return out


def _analyse(name: str, func) -> PrimFuncEffect:
    params = {}
    for p in func.params:
        if _is_buffer_param(p):
            params[p] = len(params)
    alias: dict = {}  # declared buffer var -> param ordinals it aliases
    local: set = set()
    nodes = _all_nodes(func.body)
    # Declarations first: a depth-first walk can meet a store before the
    # allocation that precedes it in the program (siblings come back reversed).
    for o in nodes:
        kind = type(o).__name__
        if kind == "DeclBuffer":
            alias[o.buffer] = _mentions(o.data, params)
        elif kind == "AllocBuffer":
            local.add(o.buffer)
        elif kind == "SBlock":
            local.update(o.alloc_buffers)
    for o in nodes:  # windows onto other buffers: writes go to their source
        if type(o).__name__ == "SBlock":
            for m in o.match_buffers:
                src = m.source.buffer
                alias[m.buffer] = {params[src]} if src in params else alias.get(src, set())
    written: set = set()
    touched = False
    for o in nodes:
        kind = type(o).__name__
        if kind == "BufferStore":
            touched = True
            buf = o.buffer
            if buf in params:
                written.add(params[buf])
            elif buf in alias:
                written |= alias[buf]
            elif buf not in local:
                raise Unmodelled(f"PrimFunc `{name}` stores to buffer `{buf.name}` whose link to its "
                                 "parameters is not modelled")
        elif kind == "Call":
            # a parameter (or its data pointer) handed to any call may be written through
            for a in o.args:
                hit = _mentions(a, params)
                if hit:
                    touched = True
                    written |= hit
    return PrimFuncEffect(len(params), frozenset(written), opaque=not touched)
