"""The generator's values and ops: each op emits Relax and keeps the pool of readable values right.

Every value carries the *storage groups* it may share bytes with. An in-place
update of a value retires every value of its groups, so the program never
reads a value after it was overwritten: the unplanned program is well defined,
and any difference between planners is the planner's. A view that no planner
can see (``roam_fuzz.view``) is read only by the very next op, together with
its source, so its source outlives it in every plan.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import tvm
from tvm import relax, tirx

from .kernels import inplace_kernel

DTYPES = ("float32", "float16", "int32", "int8")
SAME_SIZE = {"float32": "int32", "int32": "float32", "float16": "int16", "int16": "float16",
             "int8": "uint8", "uint8": "int8"}
LAYOUTS = ("2d", "1d", "3d", "2d32")  # shapes of `rows * 64` elements
COLS = 64
DEV1_DTYPE = "float64"  # the only dtype on the second device (see Ops.op_device)


@dataclass(eq=False)  # values are compared by identity
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


class Ops:
    """Emits one op at a time into ``self.bb`` (set up by the generator)."""

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
        """A tuple of ``a`` and one or two other values; half the time nested one level more."""
        others = [v for v in self.pool if v is not a]
        members = [a] + self.rng.sample(others, min(len(others), self.rng.randint(1, 2)))
        self.rng.shuffle(members)
        if len(members) > 1 and self.rng.random() < 0.5:
            k = self.rng.randrange(len(members) - 1)
            inner = self.make_tuple(members[k:k + 2])
            members[k:k + 2] = [inner]
        val = self.make_tuple(members)
        self.pool.append(val)
        return val

    def make_tuple(self, members: list[Val]) -> Val:
        var = self.emit(relax.Tuple([m.var for m in members]), "tup")
        self.used.add("nested tuple" if any(m.is_tuple for m in members) else "tuple")
        return Val(var, frozenset().union(*(m.groups for m in members)), fields=members)

    def op_getitem(self, t: Val) -> Val:
        """``t[i]``; a tuple field is indexed again most of the time (``t[i][j]``)."""
        i = self.rng.randrange(len(t.fields))
        src = t.fields[i]
        var = self.emit(relax.TupleGetItem(t.var, i), "gi")
        self.used.add("TupleGetItem")
        val = replace(src, var=var)
        self.pool.append(val)
        self.outlive(t, val)
        if val.is_tuple and self.rng.random() < 0.7:
            self.used.add("nested TupleGetItem")
            return self.op_getitem(val)
        return val

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
        if var.ty.shape is None or any(not isinstance(d, tvm.tirx.IntImm) for d in var.ty.shape.values):
            # The join of symbolic branches can lose the shape, here or when TVM's
            # lowering re-normalises the If: pin it down.
            # (part of the If construct, not the `views` feature's match_cast)
            var = self.bb.match_cast(var, self.ty(a.rows, a.layout, a.dtype, a.dev), name_hint="mc")
        return self.tensor_val(var, groups | self.group(), a)

    def op_match_cast(self, a: Val) -> Val:
        var = self.bb.match_cast(a.var, self.ty(a.rows, a.layout, a.dtype, a.dev), name_hint="mc")
        self.used.add("match_cast")
        return self.outlive(a, self.tensor_val(var, a.groups, a))

    # ------------------------------------------------------------ driver
