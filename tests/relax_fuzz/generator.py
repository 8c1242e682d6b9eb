"""Seeded generator of random high-level Relax functions for the memory-planner fuzzer.

The functions are written at the high level (``R.add``, ``R.reshape``,
``R.call_tir_inplace``, ``R.call_dps_packed``, ``If``, ``R.to_vdevice``, ...)
and lowered by TVM's own passes (``lower`` in ``harness.py``) to the point
where StaticPlanBlockMemory runs, so every construct appears there in the form
TVM itself produces.

Every value the generator keeps carries the *storage groups* it may share
bytes with. An in-place update of a value retires every value of its groups,
so the program never reads a value after it was overwritten: the unplanned
program is well defined, and any difference between planners is the planner's.
A view that no planner can see (``roam_fuzz.view``) is read only by the very
next op, together with its source, so its source outlives it in every plan.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, fields, replace

import numpy as np
import tvm
from tvm import relax, tirx

from .kernels import inplace_kernel

DTYPES = ("float32", "float16", "int32", "int8")
SAME_SIZE = {"float32": "int32", "int32": "float32", "float16": "int16", "int16": "float16",
             "int8": "uint8", "uint8": "int8"}
LAYOUTS = ("2d", "1d", "3d", "2d32")  # shapes of `rows * 64` elements
COLS = 64
DEV1_DTYPE = "float64"  # the only dtype on the second device (see _Gen.op_device)


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
class Val:
    """A value the program may still read: a tensor, or a tuple of ``fields``."""

    var: relax.Expr
    groups: frozenset
    rows: int | str = 0        # tensor: rows of 64 elements ("n": symbolic)
    layout: str = "2d"
    dtype: str = "float32"
    dev: int = 0
    fields: list | None = None  # tuple: the field Vals (metadata only)

    @property
    def is_tuple(self) -> bool:
        return self.fields is not None

    def key(self) -> tuple:
        return (self.rows, self.layout, self.dtype, self.dev)


@dataclass
class Case:
    """One generated function and what is needed to run it."""

    seed: int
    mod: tvm.IRModule
    inputs: list[np.ndarray]
    used: set = field(default_factory=set)  # constructs that made it into the function


def kernel_dims(rows, layout: str) -> list[str]:
    """The TVMScript shape of the in-place kernel for ``dims(rows, layout)``.

    Symbolic kernels take their first dimension as a free ``n`` of their own
    (TIR cannot bind ``n`` from a buffer of ``n * 64``); they are elementwise,
    so any first dimension is right.
    """
    c = lambda v: f"T.int64({v})"  # noqa: E731
    if rows == "n":
        return {"2d": ["n", c(COLS)], "1d": ["n"], "3d": ["n", c(8), c(8)], "2d32": ["n", c(32)]}[layout]
    return {"2d": [c(rows), c(COLS)], "1d": [c(rows * COLS)], "3d": [c(rows), c(8), c(8)],
            "2d32": [c(rows * 2), c(32)]}[layout]


class _Gen:
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

    # ------------------------------------------------------------ helpers
    def group(self) -> frozenset:
        self.next_group += 1
        return frozenset([self.next_group])

    def dims(self, rows, layout: str) -> list:
        r = self.n if rows == "n" else tirx.IntImm("int64", rows)
        c = lambda v: tirx.IntImm("int64", v)  # noqa: E731
        return {"2d": [r, c(COLS)], "1d": [r * COLS], "3d": [r, c(8), c(8)], "2d32": [r * 2, c(32)]}[layout]

    def ty(self, rows, layout: str, dtype: str, dev: int) -> relax.TensorType:
        vdev = self.vdevs[dev] if self.two_dev else None
        return relax.TensorType(self.dims(rows, layout), dtype, vdev)

    def emit(self, expr: relax.Expr, name: str) -> relax.Var:
        return self.bb.emit(expr, name_hint=name)

    def tensors(self, pred=lambda v: True) -> list[Val]:
        return [v for v in self.pool if not v.is_tuple and pred(v)]

    def some_tensor(self) -> Val:
        """A readable tensor; taken out of a tuple if only tuples are left."""
        while not self.tensors():
            self.op_getitem(self.pick([v for v in self.pool if v.is_tuple]))
        return self.pick(self.tensors())

    def pick(self, vals: list[Val]) -> Val:
        # Prefer recent values, but keep old ones alive now and then (long lifetimes).
        k = len(vals)
        return vals[min(k - 1, int(k * self.rng.random() ** 0.5))]

    def outlive(self, src: Val, view: Val) -> Val:
        """Half the time, ``src`` is read no more: only ``view`` keeps its bytes alive."""
        if self.rng.random() < 0.5 and src in self.pool:
            self.pool.remove(src)
        return view

    def retire(self, groups: frozenset) -> None:
        self.pool = [v for v in self.pool if not (v.groups & groups)]

    def tensor_val(self, var, groups, like: Val, **over) -> Val:
        v = Val(var, groups, like.rows, like.layout, like.dtype, like.dev)
        for k, x in over.items():
            setattr(v, k, x)
        self.pool.append(v)
        return v

    # ------------------------------------------------------------ ops
    @staticmethod
    def binary_ops(dtype: str) -> list:
        ops = [relax.op.add, relax.op.multiply, relax.op.maximum]
        return ops if dtype.startswith("uint") else ops + [relax.op.subtract]

    def op_unary(self, a: Val) -> Val:
        ops = [relax.op.abs] if a.dtype.startswith("uint") else [relax.op.negative, relax.op.abs]
        if a.dtype.startswith("float"):
            ops.append(relax.op.sin)
        fn = self.rng.choice(ops)
        return self.tensor_val(self.emit(fn(a.var), "u"), self.group(), a)

    def op_binary(self, a: Val) -> Val:
        partners = self.tensors(lambda v: (v.rows, v.dtype, v.dev) == (a.rows, a.dtype, a.dev)
                                and (v.layout == a.layout or self.f.views))
        b = self.pick(partners)
        bvar = b.var
        if b.layout != a.layout:
            bvar = self.emit(relax.op.reshape(b.var, self.dims(a.rows, a.layout)), "rb")
            self.used.add("reshape")
        fn = self.rng.choice(self.binary_ops(a.dtype))
        return self.tensor_val(self.emit(fn(a.var, bvar), "b"), self.group(), a)

    def op_cast(self, a: Val) -> Val:
        if a.dev == 1:  # device 1 keeps one dtype
            return self.op_unary(a)
        dtype = self.rng.choice([d for d in DTYPES if d != a.dtype])
        self.used.add("astype")
        return self.tensor_val(self.emit(relax.op.astype(a.var, dtype), "cast"), self.group(), a, dtype=dtype)

    def op_reshape(self, a: Val) -> Val:
        layout = self.rng.choice([x for x in LAYOUTS if x != a.layout])
        shape = self.dims(a.rows, layout)
        if self.f.builtin_reshape and (not self.f.views or self.rng.random() < 0.5):
            call = relax.op.call_pure_packed("vm.builtin.reshape", a.var, relax.ShapeExpr(shape),
                                             ty_args=self.ty(a.rows, layout, a.dtype, a.dev))
            self.used.add("vm.builtin.reshape")
        else:
            call = relax.op.reshape(a.var, shape)
            self.used.add("reshape")
        return self.outlive(a, self.tensor_val(self.emit(call, "rs"), a.groups, a, layout=layout))

    def op_view(self, a: Val) -> Val:
        halves = isinstance(a.rows, int) and a.rows % 2 == 0 and self.rng.random() < 0.5
        if halves:  # the first or second half, as 1-D, then made zero-offset
            rows = a.rows // 2
            nbytes = rows * COLS * tvm.runtime.DataType(a.dtype).bits // 8
            offset = self.rng.choice([0, nbytes])
            raw = self.emit(relax.op.memory.view(a.var, self.dims(rows, "1d"), a.dtype, relax.prim_value(
                tirx.IntImm("int64", offset))), "half")
            var = self.emit(relax.op.memory.ensure_zero_offset(raw), "hz")
            self.used.update(["memory.view(offset)", "ensure_zero_offset"])
            return self.outlive(a, self.tensor_val(var, a.groups, a, rows=rows, layout="1d"))
        dtype = SAME_SIZE[a.dtype] if self.f.dtypes and a.dev == 0 else a.dtype
        var = self.emit(relax.op.memory.view(a.var, self.dims(a.rows, a.layout), dtype), "view")
        self.used.add("memory.view")
        return self.outlive(a, self.tensor_val(var, a.groups, a, dtype=dtype))

    def op_tuple(self, a: Val) -> Val:
        others = [v for v in self.pool if v is not a]
        members = [a] + self.rng.sample(others, min(len(others), self.rng.randint(1, 2)))
        self.rng.shuffle(members)
        var = self.emit(relax.Tuple([m.var for m in members]), "tup")
        groups = frozenset().union(*(m.groups for m in members))
        self.used.add("nested tuple" if any(m.is_tuple for m in members) else "tuple")
        val = Val(var, groups, fields=members)
        self.pool.append(val)
        return val

    def op_getitem(self, t: Val) -> Val:
        i = self.rng.randrange(len(t.fields))
        src = t.fields[i]
        var = self.emit(relax.TupleGetItem(t.var, i), "gi")
        self.used.add("TupleGetItem")
        val = replace(src, var=var)
        self.pool.append(val)
        return self.outlive(t, val)

    def op_inplace(self, a: Val) -> Val:
        partners = self.tensors(lambda v: v.key() == a.key())
        b = self.pick(partners)
        two = self.rng.random() < 0.4
        key = (a.rows, a.layout, a.dtype, two)
        if key not in self.kernels:
            func = inplace_kernel(tuple(kernel_dims(a.rows, a.layout)), a.dtype, two)
            self.kernels[key] = self.bb.add_func(func, "inplace")
        ty = self.ty(a.rows, a.layout, a.dtype, a.dev)
        out_ty = [ty, ty] if two else ty
        call = relax.op.call_tir_inplace(self.kernels[key], relax.Tuple([a.var, b.var]),
                                         [0, -1] if two else [0], out_ty)
        var = self.emit(call, "ip")
        self.used.add("call_tir_inplace" + (" (2 outputs)" if two else ""))
        self.retire(a.groups)  # every value that may share a's bytes is stale now
        updated = Val(var, a.groups, a.rows, a.layout, a.dtype, a.dev)
        if not two:
            self.pool.append(updated)
            return updated
        fresh = Val(None, self.group(), a.rows, a.layout, a.dtype, a.dev)
        val = Val(var, updated.groups | fresh.groups, fields=[updated, fresh])
        self.pool.append(val)
        return val

    def op_extern(self, a: Val) -> Val:
        ty = self.ty(a.rows, a.layout, a.dtype, a.dev)
        if self.rng.random() < 0.5:
            var = self.emit(relax.op.call_dps_packed("roam_fuzz.copy", relax.Tuple([a.var]), ty), "copy")
            self.used.add("call_dps_packed")
            return self.tensor_val(var, self.group(), a)
        # A view the planners cannot see: read at once, with its source.
        view = self.emit(relax.op.call_pure_packed("roam_fuzz.view", a.var, ty_args=ty), "xview")
        self.used.add("call_pure_packed view")
        return self.tensor_val(self.emit(relax.op.add(view, a.var), "xsum"), self.group(), a)

    def op_device(self, a: Val) -> Val:
        """Copy to the other device, and cast at once: device 1 holds ``DEV1_DTYPE`` only.

        StaticPlanBlockMemory (TVM 0.27) reuses a storage of one device for a
        tensor of another when their dtypes match (the kernel then fails its
        device check), so the generator keeps the devices' dtypes apart.
        """
        dev = 1 - a.dev
        moved = self.emit(relax.op.to_vdevice(a.var, self.vdevs[dev]), "todev")
        dtype = DEV1_DTYPE if dev == 1 else self.rng.choice(DTYPES if self.f.dtypes else ("float32",))
        var = self.emit(relax.op.astype(moved, dtype), "cast")
        self.used.add("to_vdevice")
        return self.tensor_val(var, self.group(), a, dev=dev, dtype=dtype)

    def op_check_device(self, a: Val) -> None:
        self.emit(relax.op.call_pure_packed("roam_fuzz.expect_device", a.var,
                                            relax.prim_value(tirx.IntImm("int64", a.dev)),
                                            ty_args=relax.TupleType([])), "devcheck")
        self.used.add("expect_device")

    def op_if(self, flag: relax.Var, a: Val) -> Val:
        """``r = a op u`` in one branch; the other returns an outer value or computes too.

        Each branch is one op, whose result is the branch's value: a tensor that
        dies inside a branch makes StaticPlanBlockMemory (TVM 0.27) reuse a
        storage allocated in that branch after the If, where the other branch
        never allocated it (a segfault), so the generator does not make one.
        """
        groups = frozenset()

        def branch(outer: bool):
            nonlocal groups
            u = self.pick(self.tensors(lambda v: v.key() == a.key()))
            if outer:
                groups = groups | u.groups  # the result may be u itself
                return relax.SeqExpr([], u.var)
            fn = self.rng.choice(self.binary_ops(a.dtype))
            call = self.bb.normalize(fn(a.var, u.var))
            var = relax.Var("br", call.ty)
            return relax.SeqExpr([relax.BindingBlock([relax.VarBinding(var, call)])], var)

        outer = self.rng.random() < 0.5
        then, other = branch(False), branch(outer)
        if self.rng.random() < 0.5:
            then, other = other, then
        var = self.emit(relax.If(flag, then, other), "sel")
        self.used.add("If")
        if var.ty.shape is None:  # the join of symbolic branches can lose the shape
            var = self.bb.match_cast(var, self.ty(a.rows, a.layout, a.dtype, a.dev), name_hint="mc")
            self.used.add("match_cast")
        return self.tensor_val(var, groups | self.group(), a)

    def op_match_cast(self, a: Val) -> Val:
        var = self.bb.match_cast(a.var, self.ty(a.rows, a.layout, a.dtype, a.dev), name_hint="mc")
        self.used.add("match_cast")
        return self.outlive(a, self.tensor_val(var, a.groups, a))

    # ------------------------------------------------------------ driver
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
        cands = [v for v in self.pool if self.f.alias_outputs or not (v.groups & param_groups)]
        if not cands:
            self.op_unary(self.some_tensor())
            cands = [self.pool[-1]]
        outs = [cands[-1]] + self.rng.sample(cands, min(len(cands), self.rng.randint(0, 2)))
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
