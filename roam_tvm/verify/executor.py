"""Abstract execution of one Relax function over the byte store (one path, one shape assignment)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import tvm
from tvm import relax

from .memory import Opaque, Root, Storage, StorageVal, TensorVal, Tokens, Unmodelled, overlaps, read_token


@dataclass
class Event:
    """One call that reads memory: its content key, its binding and what each argument saw."""

    callee: str
    key: tuple
    label: str
    args: list  # per argument: (name, description) of what it saw ("output" for a fresh output)
    extern: bool = False


@dataclass
class RunResult:
    events: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    result: object = None  # observed return value: nested tuples of (token, description)
    params: list = field(default_factory=list)
    path: tuple = ()  # ((condition token, branch taken), ...) in the order met


def _name(expr) -> str:
    if type(expr).__name__ in ("Var", "DataflowVar"):
        return expr.name
    if isinstance(expr, relax.GlobalVar):
        return expr.name_hint
    if isinstance(expr, relax.ExternFunc):
        return f'"{expr.global_symbol}"'
    text = str(expr).replace("\n", " ")
    return text if len(text) <= 40 else text[:37] + "..."


def label_of(var, value) -> str:
    """Short text of a binding for messages: ``lv = callee(a, b)``."""
    if isinstance(value, relax.Call):
        op = value.op
        callee = op.name if isinstance(op, tvm.ir.Op) else _name(op)
        return f"{var.name} = {callee}({', '.join(_name(a) for a in value.args)})"
    return f"{var.name} = {_name(value)}"


def nbytes_of(shape: tuple, dtype: str) -> int:
    dt = tvm.DataType(dtype)
    n = 1
    for d in shape:
        n *= d
    return n * ((dt.bits * dt.lanes + 7) // 8)


class Run:
    """Executes ``func`` abstractly; ``sym`` maps symbolic var names to the values of this assignment
    and ``choices`` fixes the branch of each ``If`` condition token met before (default: then)."""

    def __init__(self, func: relax.Function, mod: tvm.IRModule, tokens: Tokens, sym: dict, choices: dict,
                 who: str):
        from . import ops  # the op table lives apart; imported here to keep this module small

        self.func, self.mod, self.tok, self.who = func, mod, tokens, who
        self.ops = ops
        self.sym_names, self.choices = dict(sym), choices
        self.sym: dict = {}  # tir Var -> int
        self.ana = tvm.sym.Analyzer()
        self.env: dict = {}
        self.killed: set = set()
        self.out = RunResult()
        self.global_names = None  # names of mod's functions, filled on first use
        self.call_ty = None
        self._n = 0

    # ---- helpers -------------------------------------------------------------------------------
    def new_id(self) -> int:
        self._n += 1
        return self._n

    def violation(self, msg: str) -> None:
        self.out.violations.append(msg)

    def bind_sym(self, var, value: int) -> None:
        self.sym[var] = value
        self.ana.bind(var, tvm.tirx.IntImm("int64", value))

    def ev(self, e) -> int:
        """Concrete value of a PrimExpr under this assignment."""
        if isinstance(e, int):
            return e
        if isinstance(e, tvm.tirx.IntImm):
            return int(e.value)
        if type(e).__name__ == "Var" and e in self.sym:
            return self.sym[e]
        r = self.ana.simplify(e)
        if not isinstance(r, tvm.tirx.IntImm):
            raise Unmodelled(f"cannot evaluate `{e}` (a symbolic variable has no value)")
        return int(r.value)

    def storage(self, name: str, size, device: int, readonly=False) -> Storage:
        return Storage(self.new_id(), name, size, device, readonly)

    def fresh_tensor(self, name: str, shape: tuple, dtype: str, device: int, size=None) -> TensorVal:
        nb = nbytes_of(shape, dtype)
        st = self.storage(name, nb if size is None else size, device)
        return TensorVal(st, Root(self.new_id(), name), 0, nb, shape, dtype, self.new_id())

    def write(self, t: TensorVal, tok: int, label: str) -> None:
        if t.storage.readonly:
            self.violation(f"`{label}` writes into `{t.root.name}`, a constant")
        t.storage.write(t.offset, t.end, tok, label)
        t.root.mark(t.offset, t.end)

    def is_fresh(self, t: TensorVal) -> bool:
        return not t.root.is_written(t.offset, t.end)

    def read(self, t: TensorVal) -> tuple:
        tok, desc = read_token(self.tok, t)
        return (tok, t.dtype, t.shape), desc

    def ints_of_type(self, ty, what: str) -> tuple:
        shape = getattr(ty, "shape", None)
        if shape is None or not isinstance(shape, relax.ShapeExpr):
            raise Unmodelled(f"{what} has no known shape")
        return tuple(self.ev(d) for d in shape.values)

    # ---- values made from types ----------------------------------------------------------------
    def from_type(self, ty, key: tuple, name: str, desc: str, write: bool, device: int = -2):
        """A value of type ``ty`` whose tensors hold the token ``key`` (+ position)."""
        if isinstance(ty, relax.TensorType):
            if ty.dtype is None or str(ty.dtype) in ("", "void"):
                raise Unmodelled(f"{name}: tensor of unknown dtype")
            t = self.fresh_tensor(name, self.ints_of_type(ty, name), str(ty.dtype), device)
            if write:
                self.write(t, self.tok.get(key + (device,), desc), name)
            return t
        if isinstance(ty, relax.TupleType):
            return tuple(self.from_type(f, key + (i,), f"{name}[{i}]", f"{desc}[{i}]", write, device)
                         for i, f in enumerate(ty.fields))
        ints = None
        if isinstance(ty, relax.ShapeType) and getattr(ty, "values", None) is not None:
            ints = tuple(self.ev(v) for v in ty.values)
        return Opaque(self.tok.get(key + ("opaque", ints), desc), ints, self.new_id())

    # ---- driver ----------------------------------------------------------------------------------
    def run(self) -> RunResult:
        f = self.func
        free = {}
        for p in f.params:
            for v in relax.analysis.tir_vars_in_type(p.ty):
                free[v.name] = v
        for nm, v in free.items():
            if nm not in self.sym_names:
                raise Unmodelled(f"symbolic variable `{nm}` has no value")
            self.bind_sym(v, self.sym_names[nm])
        for i, p in enumerate(f.params):
            self.env[p] = self.from_type(p.ty, ("param", i), p.name, f"param `{p.name}`", True)
        value = self.seq(f.body)
        self.out.result = self.observe(value)
        self.out.params = [self.observe(self.env[p]) for p in f.params]
        return self.out

    def observe(self, v):
        if isinstance(v, TensorVal):
            (tok, dt, sh), desc = self.read(v)
            return (("t", tok, dt, sh), desc)
        if isinstance(v, tuple):
            return tuple(self.observe(x) for x in v)
        if isinstance(v, Opaque):
            return (("o", v.tok), self.tok.describe(v.tok))
        return (("s",), "a storage")

    def seq(self, seq):
        for block in seq.blocks:
            for b in block.bindings:
                self.binding(b)
        return self.expr(seq.body)

    def binding(self, b) -> None:
        label = label_of(b.var, b.value)
        if isinstance(b, relax.MatchCast):
            val = self.expr(b.value)
            self.match(val, b.ty, label)
        else:
            val = self.value(b.value, b.var, label)
        self.env[b.var] = val

    def match(self, val, ty, label: str) -> None:
        """Bind the new symbolic vars of a ``match_cast`` from the value's concrete shape."""
        if isinstance(ty, relax.TensorType) and isinstance(val, TensorVal):
            shape = ty.shape
            if shape is None or not isinstance(shape, relax.ShapeExpr):
                return
            if len(shape.values) != len(val.shape):
                self.violation(f"`{label}`: match_cast rank differs from the value's")
                return
            for d, c in zip(shape.values, val.shape):
                if type(d).__name__ == "Var" and d not in self.sym:
                    self.bind_sym(d, c)
                elif self.ev(d) != c:
                    self.violation(f"`{label}`: match_cast dimension {d} is {self.ev(d)}, value has {c}")
        elif isinstance(ty, relax.TupleType) and isinstance(val, tuple):
            for f, v in zip(ty.fields, val):
                self.match(v, f, label)
        elif isinstance(ty, (relax.TensorType, relax.TupleType)):
            raise Unmodelled(f"`{label}`: match_cast of a value of another kind")

    def lookup(self, var, check_kill=True):
        if var in self.env:
            v = self.env[var]
            if check_kill and getattr(v, "oid", -1) in self.killed:
                self.violation(f"`{var.name}` is used after it was killed")
            return v
        if var in self.sym:
            return Opaque(self.tok.get(("prim", self.sym[var]), str(self.sym[var])), (self.sym[var],))
        raise Unmodelled(f"variable `{var.name}` is not bound")

    def expr(self, e):
        """Leaf-like expressions: vars, tuples, literals."""
        kind = type(e).__name__
        if kind in ("Var", "DataflowVar"):
            return self.lookup(e)
        if isinstance(e, relax.Tuple):
            return tuple(self.expr(x) for x in e.fields)
        if isinstance(e, relax.TupleGetItem):
            t = self.expr(e.tuple_value)
            if not isinstance(t, tuple) or not 0 <= e.index < len(t):
                raise Unmodelled(f"TupleGetItem [{e.index}] of a non-tuple value")
            return t[e.index]
        if isinstance(e, relax.ShapeExpr):
            ints = tuple(self.ev(v) for v in e.values)
            return Opaque(self.tok.get(("shape", ints), f"R.shape({list(ints)})"), ints)
        if isinstance(e, tvm.ir.expr.StringImm):
            return Opaque(self.tok.get(("str", e.value), repr(e.value)))
        if isinstance(e, tvm.ir.expr.GenericConst):
            return self.const(e)
        if isinstance(e, relax.GlobalVar):
            return Opaque(self.tok.get(("gv", e.name_hint), e.name_hint))
        if isinstance(e, relax.ExternFunc):
            return Opaque(self.tok.get(("extern", e.global_symbol), e.global_symbol))
        if isinstance(e, relax.SeqExpr):
            return self.seq(e)
        if type(e).__module__.startswith(("tvm.ir.prim", "tvm.tirx")):  # a PrimExpr argument
            v = self.ev(e)
            return Opaque(self.tok.get(("prim", v), str(v)), (v,))
        raise Unmodelled(f"expression `{_name(e)}` ({kind}) is not modelled")

    def const(self, e):
        val = e.value
        if isinstance(val, tvm.runtime.Tensor):
            arr = val.numpy()
            digest = hashlib.sha1(arr.tobytes()).hexdigest()
            key = ("const", str(arr.dtype), arr.shape, digest)
            t = self.fresh_tensor("constant", tuple(arr.shape), str(val.dtype), -1)
            self.write(t, self.tok.get(key, f"constant {arr.ravel()[:4].tolist()}"), "constant")
            t.storage.readonly = True
            return t
        return Opaque(self.tok.get(("dtype", str(val)), str(val)))

    def value(self, e, var, label: str):
        """Right-hand side of a binding."""
        if isinstance(e, relax.Call):
            return self.ops.call(self, e, var, label)
        if isinstance(e, relax.If):
            return self.branch(e, label)
        if isinstance(e, relax.Function):
            raise Unmodelled(f"`{label}`: nested functions / closures are not modelled")
        return self.expr(e)

    def branch(self, e, label: str):
        cond = self.expr(e.cond)
        if isinstance(cond, TensorVal):
            (tok, _, _), _ = self.read(cond)
        elif isinstance(cond, Opaque):
            tok = cond.tok
        else:
            raise Unmodelled(f"`{label}`: If condition of an unknown kind")
        take = self.choices.get(tok, True)
        self.out.path += ((tok, take),)
        return self.seq(e.true_branch if take else e.false_branch)

    def check_alive_storage(self, s: StorageVal, label: str) -> None:
        if s.oid in self.killed:
            self.violation(f"`{label}` allocates in `{s.storage.name}` after it was killed")

    def overlap_check(self, outs: list, args: list, label: str) -> None:
        """A fresh output must not share bytes with any other argument of the same call."""
        for i, o in outs:
            for j, a in args:
                if i != j and isinstance(a, TensorVal) and a.root is not o.root and overlaps(o, a):
                    self.violation(f"`{label}`: output arg {i} (`{o.root.name}`) overlaps arg {j} "
                                   f"(`{a.root.name}`) in storage `{o.storage.name}` bytes "
                                   f"[{max(o.offset, a.offset)},{min(o.end, a.end)})")
