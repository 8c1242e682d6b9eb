"""Seeded generator of random high-level Relax functions for the memory-planner fuzzer.

The functions are written at the high level (``R.add``, ``R.reshape``,
``R.call_tir_inplace``, ``R.call_dps_packed``, ``If``, ``R.to_vdevice``, ...)
and lowered by TVM's own passes (``lower`` in ``harness.py``) to the point
where StaticPlanBlockMemory runs, so every construct appears there in the form
TVM itself produces.

The ops and the rules that keep the program well defined are in ``ops.py``;
this module decides the function's shape (parameters, blocks, ``If``s,
outputs), which features a case uses, and its inputs.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, fields, replace

import numpy as np
import tvm
from tvm import relax, tirx

from .ops import COLS, DTYPES, Ops, Val


@dataclass(frozen=True)
class Features:
    """Which constructs the generator may use (each one switchable)."""

    views: bool = True            # R.reshape, R.memory.view (+ ensure_zero_offset), match_cast
    builtin_reshape: bool = True  # R.call_pure_packed("vm.builtin.reshape", ...)
    tuples: bool = True           # tuples, nested tuples, TupleGetItem
    inplace: bool = True          # R.call_tir_inplace (one and two outputs)
    externs: bool = True          # call_dps_packed copy, call_pure_packed view
    control_flow: bool = True     # If on a bool parameter
    devices: bool = True          # two llvm virtual devices, R.to_vdevice
    symbolic: bool = True         # (n, 64) shapes with tir_var_upper_bound
    dtypes: bool = True           # float32, float16, int32, int8 (+ same-size reinterpretations)
    alias_outputs: bool = True    # outputs that are (views of) inputs

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def parse(cls, only: str | None = None, disable: str | None = None) -> "Features":
        """``only="views,tuples"`` keeps just those; ``disable="devices"`` drops some."""
        base = cls() if not only else cls(**{n: False for n in cls.names()})
        for key, value in ((only, True), (disable, False)):
            for name in filter(None, (s.strip() for s in (key or "").split(","))):
                if name not in cls.names():
                    raise ValueError(f"unknown feature {name!r}; choose from {', '.join(cls.names())}")
                base = replace(base, **{name: value})
        return base


@dataclass
class Case:
    """One generated function and what is needed to run it."""

    seed: int
    mod: tvm.IRModule
    inputs: list[np.ndarray]
    used: set = field(default_factory=set)  # constructs that made it into the function


class _Gen(Ops):
    def __init__(self, seed: int, feats: Features):
        self.seed = seed
        self.rng = random.Random(seed)
        r = self.rng
        on = [n for n in Features.names() if getattr(feats, n)]
        if len(on) > 2:  # each case uses a random part of the features, so that each one is dense somewhere
            feats = replace(feats, **{n: r.random() < 0.65 for n in on})
        self.f = feats
        self.sym = feats.symbolic and r.random() < 0.3
        self.two_dev = feats.devices and r.random() < 0.4
        self.use_if = feats.control_flow and r.random() < 0.4
        self.n = tirx.Var("n", "int64") if self.sym else None
        self.upper = r.choice([16, 32, 48])
        self.rows = r.choice([16, 24, 32]) if not self.sym else "n"
        self.vdevs = [relax.VDevice(tvm.target.Target("llvm"), i, "global") for i in range(2)]
        self.bb = relax.BlockBuilder()
        self.pool: list[Val] = []
        self.next_group = 0
        self.kernels: dict = {}
        self.used: set = set()
        self.capacity = r.randint(3, 7)

    def step(self) -> None:
        f, r = self.f, self.rng
        tensors = self.tensors()
        tuples = [v for v in self.pool if v.is_tuple]
        if not tensors:
            self.op_getitem(self.pick(tuples))
            return
        actions = {"unary": 2, "binary": 4}
        if f.dtypes:
            actions["cast"] = 1
        if f.views or f.builtin_reshape:
            actions["reshape"] = 2.5
        if f.views:
            actions["view"] = 1.5
            actions["match_cast"] = 0.5
        if f.tuples:
            actions["tuple"] = 1.5
            if tuples:
                actions["getitem"] = 2.5
        if f.inplace:
            actions["inplace"] = 1.5
        if f.externs:
            actions["extern"] = 1.5
        if self.two_dev:
            actions["device"] = 1.5
            if any(v.dev == 1 for v in tensors):
                actions["check"] = 1
        name = r.choices(list(actions), weights=list(actions.values()))[0]
        if name == "getitem":
            self.op_getitem(self.pick(tuples))
        elif name == "check":
            self.op_check_device(self.pick([v for v in tensors if v.dev == 1]))
        else:
            getattr(self, "op_" + name)(self.pick(tensors))
        self.forget()

    def forget(self) -> None:
        """Drop old values beyond the pool's capacity: they die at their last read so far.

        A small pool makes values die early, so storage is reused while views,
        tuples and in-place results of them are still read.
        """
        while len(self.pool) > self.capacity:
            self.pool.pop(self.rng.randrange(len(self.pool) - 1))

    def flush(self) -> None:
        """End a dataflow block: every value still readable becomes a block output."""
        for v in self.pool:
            if isinstance(v.var, relax.DataflowVar):
                v.var = self.bb.emit_output(v.var)

    def params(self) -> tuple[list[relax.Var], relax.Var | None]:
        params = []
        for i in range(self.rng.randint(2, 4)):
            dtype = self.rng.choice(DTYPES) if self.f.dtypes else "float32"
            var = relax.Var(f"x{i}", self.ty(self.rows, "2d", dtype, 0))
            params.append(var)
            self.pool.append(Val(var, self.group(), self.rows, "2d", dtype, 0))
        flag = None
        if self.use_if:
            flag = relax.Var("flag", relax.TensorType([], "bool", self.vdevs[0] if self.two_dev else None))
            params.append(flag)
        return params, flag

    def outputs(self, param_groups: frozenset) -> relax.Expr:
        """One to three readable values (a tuple, maybe nested); inputs among them only with alias_outputs."""
        cands = [v for v in self.pool if self.f.alias_outputs or not (v.groups & param_groups)]
        if not cands:
            self.op_unary(self.some_tensor())
            cands = [self.pool[-1]]
        outs = [cands[-1]] + self.rng.sample(cands, min(len(cands), self.rng.randint(0, 2)))
        if any(o.groups & param_groups for o in outs):
            self.used.add("output aliases input")
        if len(outs) == 1:
            return outs[0].var
        exprs = [o.var for o in outs]
        if len(exprs) == 3 and self.f.tuples and self.rng.random() < 0.5:
            return relax.Tuple([relax.Tuple(exprs[:2]), exprs[2]])
        return relax.Tuple(exprs)

    def build(self) -> tvm.IRModule:
        params, flag = self.params()
        param_groups = frozenset().union(*(v.groups for v in self.pool))
        attrs = {"tir_var_upper_bound": {"n": self.upper}} if self.sym else None
        with self.bb.function("main", params, attrs):
            for _ in range(self.rng.randint(1, 3)):
                with self.bb.dataflow():
                    for _ in range(self.rng.randint(3, 8)):
                        self.step()
                    self.flush()
                if flag is not None and self.rng.random() < 0.7:
                    self.op_if(flag, self.some_tensor())
            out = self.outputs(param_groups)
            self.bb.emit_func_output(out)
        mod = self.bb.get()
        if self.two_dev:
            mod.update_global_info("vdevice", self.vdevs)
        return mod

    def inputs(self, mod: tvm.IRModule) -> list[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        rows = self.rows if isinstance(self.rows, int) else int(rng.integers(self.upper // 2, self.upper + 1))
        arrays = []
        for p in mod["main"].params:
            dtype = str(p.ty.dtype)
            if dtype == "bool":
                arrays.append(np.array(rng.random() < 0.5))
                continue
            shape = (rows, COLS)
            if dtype.startswith("float"):
                arrays.append((rng.standard_normal(shape) * 2).astype(dtype))
            else:
                lo, hi = (-128, 128) if dtype == "int8" else (-1000, 1000)
                arrays.append(rng.integers(lo, hi, shape).astype(dtype))
        return arrays


def generate(seed: int, features: Features = Features()) -> Case:
    """The random function of ``seed`` (same seed and features: same function)."""
    gen = _Gen(seed, features)
    mod = gen.build()
    used = set(gen.used) | {k for k, on in (("symbolic", gen.sym), ("2 devices", gen.two_dev)) if on}
    return Case(seed, mod, gen.inputs(mod), used)
