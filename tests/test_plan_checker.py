"""The independent plan checker (roam_tvm.verify): TVM's own plans pass, hand-made bad plans are caught.

Each bad plan below is the reference with one planning mistake; every test also checks that the
correct plan of the same program passes, so a checker that rejects everything fails here too.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from plan_checker_lib import Lib, add, add1, inc, mul2, neg
from tvm import relax
from tvm.script import relax as R

from roam_tvm.verify import check_module, check_plan

PEER = Path(__file__).resolve().parents[1] / ".." / "shared" / "peer" / "tvm" / \
    "test_transform_static_plan_block_memory.py"
# modules of TVM's planner tests that the checker cannot model, and why (none so far)
UNMODELLED: dict[str, str] = {}


_PEER_MODULE: list = []


def _load_peer():
    if _PEER_MODULE:
        return _PEER_MODULE[0]
    if not PEER.exists():
        pytest.skip(f"TVM's planner tests not found at {PEER} (they live in ../shared beside the repo)")
    spec = importlib.util.spec_from_file_location("peer_static_plan_block_memory", PEER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    _PEER_MODULE.append(mod)
    return mod


def _peer_tests():
    if not PEER.exists():
        return ["(absent)"]
    return sorted(line.split("(")[0][9:] for line in PEER.read_text().splitlines()
                  if line.startswith("def test_"))


@pytest.mark.parametrize("name", _peer_tests())
def test_tvm_planner_output_passes(name, monkeypatch):
    """StaticPlanBlockMemory's output (and, where the test lowers further, the VM-lowered module)
    passes against the module it was given, on every test of TVM's planner test file."""
    peer = _load_peer()
    real_plan, real_lower = relax.transform.StaticPlanBlockMemory, relax.transform.LowerRuntimeBuiltin
    given, found = [], {}

    def plan():
        inner = real_plan()

        def run(mod, ctx=None):
            out = inner(mod)
            given.append(mod)
            found.update({f"planned {k}": v for k, v in check_module(mod, out).items() if v})
            return out
        return run

    def lower():
        inner = real_lower()

        def run(mod, ctx=None):
            out = inner(mod)
            found.update({f"lowered {k}": v for k, v in check_module(given[0], out).items() if v})
            return out
        return run

    monkeypatch.setattr(relax.transform, "StaticPlanBlockMemory", plan)
    monkeypatch.setattr(relax.transform, "LowerRuntimeBuiltin", lower)
    if name in UNMODELLED:
        pytest.skip(UNMODELLED[name])
    try:
        getattr(peer, f"test_{name}")()
    finally:
        assert found == {}, found
    if "invalid" not in name:
        assert given, "the test never ran the planner"


def _check(ref, plan):
    return check_plan(ref, plan, Lib)


def _one(ref, good, bad, *words):
    assert _check(ref, ref) == []
    assert _check(ref, good) == []
    found = _check(ref, bad)
    assert found, "bad plan passed"
    text = " ".join(found)
    assert not text.startswith("cannot verify"), found
    for w in words:
        assert w in text, found
    return found


# ---- reference programs (fresh allocation everywhere) --------------------------------------------
@R.function
def two_live(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def two_live_good(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    b = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def two_live_same_slot(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def two_live_off_by_4(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    b = R.memory.alloc_tensor(s, 12, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def two_live_small_storage(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([28]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    b = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


def test_two_live_tensors_in_one_slot():
    _one(two_live, two_live_good, two_live_same_slot, "add(a, b, c)", "arg 0 `a`", "add1(x, b)")


def test_offset_off_by_some_bytes():
    _one(two_live, two_live_good, two_live_off_by_4, "mixed bytes", "[12,16)")


def test_storage_too_small():
    _one(two_live, two_live_good, two_live_small_storage, "outside storage", "(28 B)")


# ---- a view whose storage is reused while the view is read (apache/tvm#20134) ---------------------
@R.function
def view_ref(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    r = R.call_packed("vm.builtin.reshape", a, R.shape([4]), ty_args=R.Tensor((4,), "float32"))
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(r, b, c)
    return c


@R.function
def view_good(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    r = R.call_packed("vm.builtin.reshape", a, R.shape([4]), ty_args=R.Tensor((4,), "float32"))
    s1 = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    b = R.memory.alloc_tensor(s1, 0, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(r, b, c)
    return c


@R.function
def view_bad(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    r = R.call_packed("vm.builtin.reshape", a, R.shape([4]), ty_args=R.Tensor((4,), "float32"))
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(r, b, c)
    return c


@R.function
def view_bad_relax_reshape(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    r = R.reshape(a, R.shape([4]))
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(r, b, c)
    return c


def test_builtin_reshape_view_storage_reused_while_read():
    _one(view_ref, view_good, view_bad, "arg 0 `r`", "add1(x, b)")


def test_relax_reshape_view_storage_reused_while_read():
    assert _check(view_ref, view_bad_relax_reshape)


# ---- nested tuples: nt = ((a1, a2), a3); z = nt[1] is a3 ----------------------------------------
@R.function
def nested_ref(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a1 = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a1)
    a2 = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(x, a2)
    a3 = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    mul2(x, a3)
    nt = ((a1, a2), a3)
    z = nt[1]
    w = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(nt[0][0], nt[0][1], w)
    out = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(z, w, out)
    return out


@R.function
def nested_good(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([64]), 0, "global", "float32")
    a1 = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a1)
    a2 = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    add1(x, a2)
    a3 = R.memory.alloc_tensor(s, 32, R.shape([4]), "float32")
    mul2(x, a3)
    nt = ((a1, a2), a3)
    z = nt[1]
    w = R.memory.alloc_tensor(s, 48, R.shape([4]), "float32")
    add(nt[0][0], nt[0][1], w)
    out = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(z, w, out)
    return out


@R.function
def nested_bad(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([64]), 0, "global", "float32")
    a1 = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a1)
    a2 = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    add1(x, a2)
    a3 = R.memory.alloc_tensor(s, 32, R.shape([4]), "float32")
    mul2(x, a3)
    nt = ((a1, a2), a3)
    z = nt[1]
    w = R.memory.alloc_tensor(s, 32, R.shape([4]), "float32")  # a3 is still live as z
    add(nt[0][0], nt[0][1], w)
    out = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(z, w, out)
    return out


def test_nested_tuple_item_overwritten_while_live():
    _one(nested_ref, nested_good, nested_bad, "arg 0 `z`")


# ---- a reorder that moves an in-place update before a reader of the old value ------------------------
@R.function
def inplace_ref(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(a, b)
    inc(a)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def inplace_good(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    neg(x, a)
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(a, b)
    inc(a)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def inplace_bad(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    neg(x, a)
    inc(a)
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(a, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


def test_reorder_in_place_update_before_reader():
    _one(inplace_ref, inplace_good, inplace_bad, "add1(a, b)", "output arg 0 of `_")


# ---- a read of bytes nothing ever wrote ------------------------------------------------------------------
@R.function
def unwritten_bad(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    a_slot = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    b = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a_slot, b, c)
    return c


def test_read_of_never_written_bytes():
    _one(two_live, two_live_good, unwritten_bad, "uninitialised", "arg 0 `a_slot`")
