"""Relax-level fuzzing of RoamLayout and RoamOrder+RoamLayout against StaticPlanBlockMemory.

Each seed is a random high-level Relax function (``relax_fuzz/generator.py``),
lowered by TVM's passes to where StaticPlanBlockMemory runs, planned four ways,
built for llvm and run (``relax_fuzz/harness.py``). Outputs and inputs updated
in place must be bit-identical to StaticPlanBlockMemory's build, which itself
must match an unplanned build. A failure prints the seed, the problems, the
one command that reproduces it and the Relax script.

Default suite: ``DEFAULT_COUNT`` seeds from 0. ``--runslow``: ROAM_FUZZ_COUNT
seeds (default 1000) from ROAM_FUZZ_SEED (default 0).
"""
import os
import time

import pytest
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from relax_fuzz import Features, generate, run_case
from relax_fuzz.report import describe, summary
from relax_fuzz.runner import run_many

DEFAULT_COUNT = 50
DEFAULT_SEEDS = range(DEFAULT_COUNT)


@pytest.fixture(scope="module")
def default_results():
    """The default seeds, run once in a child process (a crash is a result, not the end)."""
    start = time.perf_counter()
    results = {r.seed: r for r in run_many(DEFAULT_SEEDS, time_limit=1.0)}
    print("\n" + summary(list(results.values()), time.perf_counter() - start))
    return results


@pytest.mark.parametrize("seed", DEFAULT_SEEDS)
def test_fuzz_bit_identical(default_results, seed):
    res = default_results[seed]
    assert res.status == "ok", describe(res)


@pytest.mark.slow
def test_fuzz_many():
    count = int(os.environ.get("ROAM_FUZZ_COUNT", "1000"))
    first = int(os.environ.get("ROAM_FUZZ_SEED", "0"))
    print(f"\nrelax fuzz: {count} functions, seeds {first}..{first + count - 1} "
          f"(ROAM_FUZZ_COUNT / ROAM_FUZZ_SEED)")
    start = time.perf_counter()
    results = run_many(range(first, first + count), time_limit=1.0)
    text = summary(results, time.perf_counter() - start)
    print(text)
    bad = [r for r in results if r.status != "ok"]
    assert not bad, text + "\n\n" + "\n\n".join(describe(r, script=False) for r in bad[:20])


# --------------------------------------------------------------- the generator itself
REQUIRED = {"reshape", "memory.view", "memory.view(offset)", "ensure_zero_offset", "vm.builtin.reshape",
            "tuple", "nested tuple", "TupleGetItem", "call_tir_inplace", "call_tir_inplace (2 outputs)",
            "call_dps_packed", "call_pure_packed view", "If", "2 devices", "to_vdevice", "expect_device",
            "symbolic", "astype", "match_cast", "nested TupleGetItem",
            "output aliases input"}


def test_default_seeds_cover_every_construct():
    used = set().union(*(generate(s).used for s in DEFAULT_SEEDS))
    assert REQUIRED <= used, f"never generated in the default seeds: {sorted(REQUIRED - used)}"


def test_same_seed_same_function():
    a, b = generate(17), generate(17)
    assert a.mod.script() == b.mod.script()
    assert all((x == y).all() for x, y in zip(a.inputs, b.inputs))
    assert generate(18).mod.script() != a.mod.script()


@pytest.mark.parametrize("name", Features.names())
def test_each_feature_switches_off(name):
    marks = {"views": {"reshape", "memory.view", "memory.view(offset)", "match_cast"}, "builtin_reshape": {"vm.builtin.reshape"},
             "tuples": {"tuple", "nested tuple", "TupleGetItem", "nested TupleGetItem"},
             "inplace": {"call_tir_inplace", "call_tir_inplace (2 outputs)"},
             "externs": {"call_dps_packed", "call_pure_packed view"}, "control_flow": {"If"},
             "devices": {"2 devices", "to_vdevice"}, "symbolic": {"symbolic"}, "dtypes": {"astype"},
             "alias_outputs": {"output aliases input"}}
    feats = Features.parse(disable=name)
    used = set().union(*(generate(s, feats).used for s in range(15)))
    assert not used & marks.get(name, set())
    if name == "alias_outputs":  # no output may be a parameter or share its storage
        for s in range(15):
            mod = generate(s, feats).mod
            params = set(mod["main"].params)
            assert not _returns_param(mod["main"].body.body, params), mod.script()


def _returns_param(expr, params) -> bool:
    if isinstance(expr, relax.Tuple):
        return any(_returns_param(f, params) for f in expr.fields)
    return expr in params


def test_unknown_feature_is_named():
    with pytest.raises(ValueError, match="unknown feature 'view'.*views"):
        Features.parse(disable="view")


# --------------------------------------------------------------- the harness can fail
@mutator
class _OneStorage(PyExprMutator):
    """A wrong planner: every planned tensor at offset 0 of one shared storage."""

    def __init__(self, mod):
        super().__init__(mod)
        self.storage = None

    def visit_var_binding_(self, binding):
        call = binding.value
        if not (isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.builtin.alloc_tensor"):
            super().visit_var_binding_(binding)
            return
        if self.storage is None:
            self.storage = self.builder_.emit(relax.op.memory.alloc_storage(
                relax.ShapeExpr([1 << 20]), call.args[2], "global", "uint8"), name_hint="shared")
        new = self.builder_.emit(relax.op.memory.alloc_tensor(self.storage, 0, call.args[0], call.args[1]),
                                 name_hint=binding.var.name)
        self.set_var_remap(binding.var, new)


@tvm.transform.module_pass(opt_level=0, name="OneStorage")
def _one_storage(mod, _ctx):
    out = mod.clone()
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            out[gv] = _OneStorage(mod).visit_expr(func)
    return out


def test_harness_catches_a_wrong_plan():
    static = Features.parse(disable="symbolic,control_flow,devices")
    results = [run_case(generate(s, static), planners=("none", "static"), custom={"bad": lambda: _one_storage})
               for s in range(5)]
    assert [r.status for r in results].count("fail") >= 4, [r.problems for r in results]
    assert all("bad:" in p for r in results for p in r.problems)
