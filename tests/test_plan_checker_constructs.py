"""The plan checker's model of single constructs: externs, If, devices, kills, in-place leftovers,
symbolic shapes, views with offsets, legal reorders; and that it never raises."""
from __future__ import annotations

from plan_checker_lib import Lib, add, add1, exp, inc, neg, opaque, sym_neg
from tvm.script import relax as R
from tvm.script import tirx as T

from roam_tvm.verify import PlanCheckError, check_plan, require_plan


def _check(ref, plan):
    return check_plan(ref, plan, Lib)


# ---- externs ------------------------------------------------------------------------------------------
@R.function(pure=False)
def extern_view(x: R.Tensor((4,), "float32")):
    y = R.call_packed("my_extern", x, ty_args=R.Tensor((4,), "float32"))
    return y


@R.function(pure=False)
def extern_inplace(x: R.Tensor((4,), "float32")):
    R.call_packed("my_extern", x, ty_args=R.Tuple())
    return x


@R.function(pure=False)
def extern_dps(x: R.Tensor((4,), "float32")):
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    R.call_packed("my_extern", x, a, ty_args=R.Tuple())
    return a


def test_unknown_extern_returning_tensor_cannot_verify():
    found = _check(extern_view, extern_view)
    assert len(found) == 1 and found[0].startswith("cannot verify:"), found
    assert "my_extern" in found[0] and "y = " in found[0], found


def test_extern_with_no_fresh_arg_cannot_verify():
    found = _check(extern_inplace, extern_inplace)
    assert found and found[0].startswith("cannot verify:") and "my_extern" in found[0], found


def test_dps_extern_is_modelled():
    assert _check(extern_dps, extern_dps) == []


@R.function(pure=False)
def two_externs(x: R.Tensor((4,), "float32")):
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    R.call_packed("ext_a", x, a, ty_args=R.Tuple())
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    R.call_packed("ext_b", x, b, ty_args=R.Tuple())
    return (a, b)


@R.function(pure=False)
def two_externs_swapped(x: R.Tensor((4,), "float32")):
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    R.call_packed("ext_b", x, b, ty_args=R.Tuple())
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    R.call_packed("ext_a", x, a, ty_args=R.Tuple())
    return (a, b)


def test_impure_calls_keep_their_order():
    found = _check(two_externs, two_externs_swapped)
    assert found and "order of R.call_packed calls changed" in found[0], found


def test_never_raises_on_odd_input():
    assert _check(extern_dps, None)[0].startswith("cannot verify:")
    assert check_plan(indep, indep, None)[0].startswith("cannot verify:")
    try:
        require_plan(extern_view, extern_view, Lib)
    except PlanCheckError as e:
        assert e.violations and "cannot verify" in str(e)
    else:
        raise AssertionError("require_plan accepted an unverifiable plan")


def test_opaque_primfunc_uses_fresh_args_as_outputs():
    @R.function
    def ref(x: R.Tensor((4,), "float32")):
        R.func_attr({"relax.force_pure": True})
        a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
        opaque(x, a)
        return a

    @R.function
    def no_fresh(x: R.Tensor((4,), "float32")):
        R.func_attr({"relax.force_pure": True})
        opaque(x, x)
        return x

    assert _check(ref, ref) == []
    assert _check(no_fresh, no_fresh)[0].startswith("cannot verify:")


# ---- a legal reorder passes, an illegal one does not ---------------------------------------------------
@R.function
def indep(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(x, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(a, b, c)
    return c


@R.function
def indep_swapped(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    q = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, q)
    p = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    neg(x, p)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(p, q, c)
    return c


@R.function
def indep_operands_swapped(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([32]), 0, "global", "float32")
    q = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, q)
    p = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    neg(x, p)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(q, p, c)
    return c


@R.function
def two_readers(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    exp(a, b)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(a, c)
    d = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(b, c, d)
    return d


@R.function
def two_readers_swapped(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([48]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    c = R.memory.alloc_tensor(s, 16, R.shape([4]), "float32")
    add1(a, c)
    b = R.memory.alloc_tensor(s, 32, R.shape([4]), "float32")
    exp(a, b)
    d = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(b, c, d)
    return d


def test_readers_of_one_tensor_may_swap():
    # a load inside an intrinsic call (T.exp(A[i])) is a read, not a write of A
    assert _check(two_readers, two_readers_swapped) == []


def test_reorder_and_renaming_are_accepted():
    assert _check(indep, indep_swapped) == []
    assert _check(indep, indep_operands_swapped)  # add(b, a) is another computation


# ---- If: every branch path is checked --------------------------------------------------------------------
@R.function
def branchy(c: R.Tensor((), "bool"), x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    if c:
        y = a
    else:
        b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
        add1(x, b)
        d = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
        add(a, b, d)
        y = d
    return y


@R.function
def branchy_bad_else(c: R.Tensor((), "bool"), x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    if c:
        y = a
    else:
        b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
        add1(x, b)
        d = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
        add(a, b, d)
        y = d
    return y


def test_if_each_branch_checked():
    assert _check(branchy, branchy) == []
    found = _check(branchy, branchy_bad_else)
    assert found and "add(a, b, d)" in found[0], found


# ---- devices ------------------------------------------------------------------------------------------------
@R.function
def on_dev1(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 1)
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 1)
    add1(a, b)
    return b


@R.function
def on_dev1_in_dev0_arena(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 1)
    add1(a, b)
    return b


@R.function
def on_dev1_in_dev1_arena(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 1, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32", 1)
    neg(x, a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 1)
    add1(a, b)
    return b


def test_device_of_storage_matters():
    assert _check(on_dev1, on_dev1_in_dev1_arena) == []
    found = _check(on_dev1, on_dev1_in_dev0_arena)
    assert found and "add1(a, b)" in found[0], found


# ---- kills, in-place leftovers, views with offsets -----------------------------------------------------------
@R.function
def killed_then_used(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    R.memory.kill_tensor(a)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(a, b)
    return b


def test_use_after_kill():
    found = _check(killed_then_used, killed_then_used)
    assert any("used after it was killed" in f for f in found), found


@R.function
def inplace_leftover(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    b = R.call_tir_inplace(inc, (a,), [0], out_ty=R.Tensor((4,), "float32"))
    return b


@R.function
def inplace_lowered(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    inc(a)
    return a


def test_call_tir_inplace_leftover_matches_lowered_call():
    assert _check(inplace_leftover, inplace_lowered) == []
    assert _check(inplace_leftover, indep)


@R.function
def halves(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([8]), "float32", 0)
    lo = R.memory.view(a, R.shape([4]), "float32", 0)
    hi = R.memory.view(a, R.shape([4]), "float32", 16)
    neg(x, lo)
    add1(x, hi)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(lo, R.memory.ensure_zero_offset(hi), c)
    return c


@R.function
def halves_overlap(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([8]), "float32", 0)
    lo = R.memory.view(a, R.shape([4]), "float32", 0)
    hi = R.memory.view(a, R.shape([4]), "float32", 8)
    neg(x, lo)
    add1(x, hi)
    c = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add(lo, R.memory.ensure_zero_offset(hi), c)
    return c


def test_views_with_offsets():
    assert _check(halves, halves) == []
    found = _check(halves, halves_overlap)
    assert found and "mixed bytes" in found[0], found


# ---- symbolic shapes: checked at the upper bound -----------------------------------------------------------
@R.function
def sym_ref(x: R.Tensor(("n",), "float32")):
    n = T.int64()
    R.func_attr({"relax.force_pure": True, "tir_var_upper_bound": {"n": 8}})
    a = R.builtin.alloc_tensor(R.shape([n]), "float32", 0)
    sym_neg(x, a)
    return a


def _sym_plan(size: int):
    @R.function
    def plan(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        R.func_attr({"relax.force_pure": True, "tir_var_upper_bound": {"n": 8}})
        s = R.memory.alloc_storage(R.shape([size]), 0, "global", "float32")
        a = R.memory.alloc_tensor(s, 0, R.shape([n]), "float32")
        sym_neg(x, a)
        return a
    return plan


def test_symbolic_shape_checked_at_upper_bound():
    assert check_plan(sym_ref, _sym_plan(32), Lib) == []
    found = check_plan(sym_ref, _sym_plan(28), Lib)
    assert found and "outside storage" in found[0] and "n=8" in found[0], found


# ---- in-place updates of inputs, outputs that alias inputs, match_cast ---------------------------------------
@R.function
def param_update(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    inc(x)
    m = T.int64()
    xx = R.match_cast(x, R.Tensor((m,), "float32"))
    return (xx, a)


@R.function
def param_update_reordered(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    inc(x)
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    m = T.int64()
    xx = R.match_cast(x, R.Tensor((m,), "float32"))
    return (xx, a)


@R.function
def param_update_dropped(x: R.Tensor((4,), "float32")):
    R.func_attr({"relax.force_pure": True})
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    m = T.int64()
    xx = R.match_cast(x, R.Tensor((m,), "float32"))
    return (xx, a)


def test_in_place_update_of_an_input():
    assert _check(param_update, param_update) == []
    found = _check(param_update, param_update_reordered)
    assert found and "neg(x, a)" in found[0] and "param `x`" in found[0], found
    found = _check(param_update, param_update_dropped)
    assert any("inc(x)" in f for f in found), found


def test_root_level_scratch_buffer_is_local_whatever_the_walk_order():
    # TVM's GPU cumsum declares `Tmp = T.alloc_buffer(...)` at the root and stores to it in
    # macros that come later in the body; a depth-first walk meets those stores first.
    from tvm.relax.backend.gpu_generic.cumsum import gpu_2d_continuous_cumsum

    from roam_tvm.verify.effects import primfunc_effect

    eff = primfunc_effect("cumsum", gpu_2d_continuous_cumsum(in_dtype="int64"))
    assert eff.written == frozenset({1}) and not eff.opaque


# ---- read-only externs (a KV cache's append copies its tensor in) ------------------------------------
@R.function(pure=False)
def kv_append(x: R.Tensor((4,), "float32"), cache: R.Object):
    a = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    neg(x, a)
    _c = R.call_packed("vm.builtin.attention_kv_cache_append", cache, a, ty_args=R.Object)
    b = R.builtin.alloc_tensor(R.shape([4]), "float32", 0)
    add1(x, b)
    return b


@R.function(pure=False)
def kv_append_reused(x: R.Tensor((4,), "float32"), cache: R.Object):
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    _c = R.call_packed("vm.builtin.attention_kv_cache_append", cache, a, ty_args=R.Object)
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, b)
    return b


@R.function(pure=False)
def kv_append_overwritten(x: R.Tensor((4,), "float32"), cache: R.Object):
    s = R.memory.alloc_storage(R.shape([16]), 0, "global", "float32")
    a = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    neg(x, a)
    b = R.memory.alloc_tensor(s, 0, R.shape([4]), "float32")
    add1(x, b)  # overwrites `a` before the cache reads it
    _c = R.call_packed("vm.builtin.attention_kv_cache_append", cache, a, ty_args=R.Object)
    return b


def test_read_only_extern_lets_its_argument_be_reused_after_it():
    assert _check(kv_append, kv_append_reused) == []


def test_read_only_extern_reading_an_overwritten_tensor_is_rejected():
    found = _check(kv_append, kv_append_overwritten)
    assert found and not found[0].startswith("cannot verify"), found
