"""Relax function -> plain ``Graph`` (analysis only; nothing is rewritten here).

Two levels of Relax are understood, so that one extractor serves both passes:

* **call_tir level** (after fusion and scheduling, before dataflow lowering):
  ``R.call_tir``, ``R.call_tir_inplace``, ``R.call_dps_packed``, reshapes,
  tuples. ``RoamOrder`` runs here.
* **lowered level** (after ``CallTIRRewrite``, where ``StaticPlanBlockMemory``
  runs): ``R.builtin.alloc_tensor`` followed by an explicit destination-passing
  call ``f(args..., out)`` and an alias binding ``lv = out``. ``RoamLayout`` and
  the peak simulator run here.

Every binding belongs to exactly one op. An allocation binding belongs to the
first call that uses the allocated tensor, so moving ops moves allocations with
them. Bindings that only rename (``a = b``, tuples, ``TupleGetItem``, views)
become ``view`` ops whose outputs alias their inputs. Which constructs alias
what is decided in ``aliasing.py`` (the one table of the model); values keep
their tuple nesting, so ``t[i]`` is exact for nested tuples.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import tvm
import tvm.sym  # the arithmetic analyzer (tvm.arith in older TVM)
from tvm import relax, tirx

from ..graph import Graph, Op, Tensor
from .aliasing import DPS_OPS, PLANNED_OPS, VIEW_OPS, callee_kind, device_index, extern_name, storage_scope

#: A Relax value as tensor ids: a tensor id, ``None`` for a non-tensor (shape,
#: prim value, object), or a list for a tuple (nesting kept).
Value = Union[int, None, list]


class ExtractError(ValueError):
    """The function uses something the planner cannot model; the message says what."""


@dataclass
class RelaxGraph:
    """A ``Graph`` plus the map back to the Relax function it came from."""

    graph: Graph
    func: relax.Function
    #: op id -> list of (block index, binding index), in original order
    op_bindings: list[list[tuple[int, int]]]
    #: tensor id -> binding (block, index) of its ``R.builtin.alloc_tensor``, lowered level only
    alloc_binding: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: relax Var -> tensor ids of its leaves
    var_tensors: dict = field(default_factory=dict)
    #: allocated roots that must not be placed in an arena, with the reason
    escaped: dict[int, str] = field(default_factory=dict)
    #: allocated root -> ``runtime_device_index`` of its allocation
    alloc_device: dict[int, int] = field(default_factory=dict)


def flatten(value: Value) -> list[int]:
    """The tensor ids of a value, depth first."""
    if value is None:
        return []
    if isinstance(value, list):
        return [t for v in value for t in flatten(v)]
    return [value]
def dtype_bytes(dtype: str) -> float:
    dt = tvm.runtime.DataType(dtype)
    return dt.bits * dt.lanes / 8


def _dim_value(dim, upper_bounds: dict[str, int], where: str) -> int:
    if isinstance(dim, (int, tirx.IntImm)):
        return int(dim)
    ana = tvm.sym.Analyzer()
    for v in tirx.analysis.undefined_vars(dim):
        if v.name in upper_bounds:
            ana.bind(v, tvm.ir.Range(0, upper_bounds[v.name] + 1))
        else:
            raise ExtractError(
                f"{where}: dimension {dim} depends on {v.name}, which has no upper bound. Add the function "
                f"attribute tir_var_upper_bound={{'{v.name}': N}} so memory can be planned statically.")
    bound = ana.const_int_bound(dim)
    if bound.max_value >= (1 << 62):
        raise ExtractError(f"{where}: dimension {dim} has no finite upper bound under tir_var_upper_bound")
    return int(bound.max_value)


def tensor_bytes(sinfo, upper_bounds: dict[str, int], where: str) -> tuple[int, str, tuple[int, ...]]:
    """Bytes, dtype and (upper-bound) shape of a tensor struct info."""
    if sinfo.shape is None or not hasattr(sinfo.shape, "values"):
        raise ExtractError(f"{where}: tensor of unknown rank/shape {sinfo}; static planning needs known shapes")
    shape = tuple(_dim_value(d, upper_bounds, where) for d in sinfo.shape.values)
    n = 1
    for d in shape:
        n *= d
    dtype = str(sinfo.dtype)
    return int(-(-n * dtype_bytes(dtype) // 1)), dtype, shape


def _upper_bounds(func: relax.Function) -> dict[str, int]:
    attrs = func.attrs or {}
    if "tir_var_upper_bound" not in attrs:
        return {}
    return {str(k): int(v) for k, v in attrs["tir_var_upper_bound"].items()}


class _Extractor:
    """Collects ops and tensors from one function, binding by binding."""

    def __init__(self, mod: tvm.IRModule | None, func: relax.Function, name: str,
                 param_kinds: dict[str, str] | None, planned: bool = False):
        self.mod = mod
        self.planned = planned
        self.func = func
        self.name = name
        self.bounds = _upper_bounds(func)
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.op_bindings: list[list[tuple[int, int]]] = []
        self.var_values: dict = _IndexedValues(self._root)
        self.produced: set[int] = set()
        self.pending_alloc: dict[int, tuple[int, int]] = {}  # tensor -> alloc binding, not yet claimed
        self.alloc_binding: dict[int, tuple[int, int]] = {}
        self.alloc_device: dict[int, int] = {}
        self.escaped: dict[int, str] = {}
        self.const_tensors: dict = {}
        self.storages: set[int] = set()
        self.param_kinds = param_kinds or {}
        self.side_effects = False  # set by a binding that must keep its place

    # ----------------------------------------------------------- tensors
    def _new_tensor(self, sinfo, name: str, kind: str = "intermediate", alias_of: int | None = None,
                    unsized_ok: bool = False) -> int:
        """A new tensor; ``unsized_ok``: one whose size cannot be bounded gets size 0 instead of an error."""
        tid = len(self.tensors)
        if alias_of is not None:
            size, dtype, shape = 0, self.tensors[alias_of].dtype, self.tensors[alias_of].shape
        else:
            try:
                size, dtype, shape = tensor_bytes(sinfo, self.bounds, f"{self.name}: {name}")
            except ExtractError:
                if not unsized_ok:
                    raise
                size, dtype, shape = 0, str(sinfo.dtype), ()
        self.tensors.append(Tensor(tid, name, size, dtype, shape, kind, False, alias_of))
        return tid

    def _root(self, t: int) -> int:
        while self.tensors[t].alias_of is not None:
            t = self.tensors[t].alias_of
        return t

    def _value(self, expr, where: str) -> Value:
        """The value an argument expression refers to (constants become const tensors)."""
        if isinstance(expr, relax.Var):
            return self.var_values.get(expr)
        if isinstance(expr, relax.Tuple):
            return [self._value(f, where) for f in expr.fields]
        if isinstance(expr, tvm.ir.Constant) and isinstance(expr.ty, relax.TensorType):
            if expr not in self.const_tensors:
                self.const_tensors[expr] = self._new_tensor(expr.ty, f"const{len(self.const_tensors)}", "const")
            return self.const_tensors[expr]
        if isinstance(expr, relax.TupleGetItem):
            whole = self._value(expr.tuple_value, where)
            if not isinstance(whole, list) or not 0 <= expr.index < len(whole):
                raise ExtractError(f"{self.name}: {where}: item {expr.index} of a value that is not a tuple "
                                   f"with that many fields; the function is left to StaticPlanBlockMemory")
            return whole[expr.index]
        return None  # shapes, prim values (scalar constants), strings, dtypes, functions

    def _leaves(self, expr, where: str = "argument") -> list[int]:
        return flatten(self._value(expr, where))

    def _fresh_value(self, name: str, sinfo, kind: str = "intermediate", unsized_ok: bool = False) -> Value:
        """New tensors shaped like ``sinfo`` (nesting kept); ``unsized_ok``: see :meth:`_new_tensor`."""
        if isinstance(sinfo, relax.TupleType):
            return [self._fresh_value(f"{name}.{i}", f, kind, unsized_ok) for i, f in enumerate(sinfo.fields)]
        if isinstance(sinfo, relax.TensorType):
            return self._new_tensor(sinfo, name, kind, unsized_ok=unsized_ok)
        return None

    def _alias_value(self, name: str, value: Value) -> Value:
        """A new alias tensor for every leaf of ``value`` (nesting kept)."""
        if isinstance(value, list):
            return [self._alias_value(f"{name}.{i}", v) for i, v in enumerate(value)]
        if value is None:
            return None
        return self._new_tensor(None, name, alias_of=value)

    def _escape(self, tensors: list[int], reason: str) -> None:
        for t in tensors:
            self.escaped.setdefault(self._root(t), reason)

    def _add_op(self, name: str, inputs: list[int], outputs: list[int], kind: str,
                bindings: list[tuple[int, int]], inplace: list[int] = ()) -> int:
        oid = len(self.ops)
        uniq_in = list(dict.fromkeys(inputs))
        self.ops.append(Op(oid, name, uniq_in, outputs, 0, kind, list(dict.fromkeys(inplace))))
        self.op_bindings.append(bindings)
        self.produced.update(outputs)
        return oid

    def _claim_allocs(self, args: list[int], where: tuple[int, int]) -> list[tuple[int, int]]:
        claimed = []
        for t in args:
            r = self._root(t)
            if r in self.pending_alloc:
                claimed.append(self.pending_alloc.pop(r))
        return sorted(claimed) + [where]

    def _bind_view(self, var, src: Value, label: str, where, claim: bool = False) -> None:
        """``var`` shares the storage of ``src``."""
        outs = self._alias_value(var.name, src)
        self.var_values[var] = outs
        inputs = flatten(src)
        self._add_op(label, inputs, flatten(outs), "view",
                     self._claim_allocs(inputs, where) if claim else [where])

    # ----------------------------------------------------------- bindings
    def visit_function(self) -> RelaxGraph:
        for p in self.func.params:
            # never allocated by the function: a parameter of unknown size (no upper bound) is sized 0
            self.var_values[p] = self._fresh_value(p.name, p.ty, self.param_kinds.get(p.name, "input"),
                                                   unsized_ok=True)
        body = self.func.body
        if not isinstance(body, relax.SeqExpr):
            raise ExtractError(f"{self.name}: function body is not a sequence of bindings; run relax.transform.Normalize first")
        force_pure = bool((self.func.attrs or {}).get("relax.force_pure", False))
        barrier: int | None = None  # the latest op every later op must follow
        since_barrier: list[int] = []  # ops after it
        for bi, block in enumerate(body.blocks):
            block_start = len(self.ops)
            bindings = list(block.bindings)
            ordered = not isinstance(block, relax.DataflowBlock) and not force_pure
            last_impure: int | None = None
            for i, b in enumerate(bindings):
                n_before = len(self.ops)
                self.side_effects = False
                self._visit_binding(bi, i, b, bindings)
                for oid in range(n_before, len(self.ops)):
                    if barrier is not None:
                        self.ops[oid].after.append(barrier)
                    if ordered:  # side effects keep their relative order
                        if last_impure is not None:
                            self.ops[oid].after.append(last_impure)
                        last_impure = oid
                if self.side_effects and len(self.ops) > n_before:
                    # An extern, a call of a Relax function or an If may read or write
                    # anything it was given, and act on the world: it stays between
                    # everything before it and everything after it.
                    last = len(self.ops) - 1
                    self.ops[last].after.extend(since_barrier)
                    barrier, since_barrier = last, []
                else:
                    since_barrier.extend(range(n_before, len(self.ops)))
            if len(body.blocks) > 1 and len(self.ops) > block_start:
                # Blocks are barriers: the block's last op runs after all of it,
                # and the next block's ops run after that op.
                barrier = len(self.ops) - 1
                self.ops[barrier].after.extend(x for x in since_barrier if x != barrier)
                since_barrier = []
        for t, where in self.pending_alloc.items():  # allocated but never used
            self._add_op("alloc_unused", [], [], "compute", [where])
            self.tensors[t].kind = "intermediate"
            self.ops[-1].outputs.append(t)
        for t in self._leaves(body.body, "the function's return value"):
            self.tensors[t].is_output = True
        graph = Graph(self.ops, self.tensors, name=self.name)
        var_tensors = {v: flatten(val) for v, val in self.var_values.items()}
        return RelaxGraph(graph, self.func, self.op_bindings, self.alloc_binding, var_tensors,
                          self.escaped, self.alloc_device)

    def _visit_binding(self, bi: int, i: int, b, bindings) -> None:
        where = (bi, i)
        var = b.var
        value = b.value
        at = f"binding {var.name}"
        if isinstance(b, relax.MatchCast) or isinstance(value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
            self._bind_view(var, self._value(value, at), "view", where)
            return
        if isinstance(value, (tvm.ir.Constant, relax.ShapeExpr, relax.ExternFunc)):
            # a tensor constant, or a value that holds no tensor (R.str, R.prim_value, R.shape, an extern)
            self.var_values[var] = self._value(value, at)
            self._add_op("const", [], [], "view", [where])
            return
        if isinstance(value, relax.If):
            self._visit_opaque(where, var, value, "if")
            return
        if not isinstance(value, relax.Call):
            raise ExtractError(f"{self.name}: {at} = {type(value).__name__} is not supported "
                               f"(nested functions); the function is left to StaticPlanBlockMemory")
        if getattr(value.op, "name", "") == "relax.call_pure_packed":
            # call_pure_packed(f, args...) is the extern f on args, declared pure.
            value = _PackedCall(value.args[0], list(value.args[1:]))
        elif isinstance(value.op, tvm.ir.Op):
            self._visit_op_call(where, var, value, bindings)
            return
        kind = callee_kind(value, self.mod)
        if kind == "view_extern":
            self._bind_view(var, self._value(value.args[0], at), extern_name(value), where, claim=True)
        elif kind == "opaque":
            self._visit_opaque(where, var, value, extern_name(value))
        else:  # a PrimFunc or an extern, destination passing
            args = [t for a in value.args for t in self._leaves(a, at)]
            self.side_effects = kind == "extern"
            if kind == "extern" and _has_tensor(var.ty):
                # An extern that returns tensors may return a view of any argument.
                self._escape(args, f"argument of extern {extern_name(value)!r}, which returns a tensor")
            self._visit_dps_call(where, var, args, extern_name(value), bindings)

    def _visit_opaque(self, where, var, expr, label: str) -> None:
        """A construct we do not see into: it may keep any tensor it is given."""
        inputs = [t for v in relax.analysis.free_vars(expr) for t in flatten(self.var_values.get(v))]
        if isinstance(expr, relax.Call):
            inputs += [t for a in expr.args for t in self._leaves(a, f"binding {var.name}")]
        self._escape(inputs, f"used by {label} at binding {var.name}")
        self.side_effects = True
        outs = self._fresh_value(var.name, var.ty)
        self.var_values[var] = outs
        # Its results are allocated inside the callee or branch, not by this function.
        self._add_op(label, inputs, flatten(outs), "compute", self._claim_allocs(inputs, where))

    def _visit_op_call(self, where, var, call: relax.Call, bindings) -> None:
        name = call.op.name
        at = f"binding {var.name}"
        if name == "relax.builtin.alloc_tensor":
            t = self._fresh_value(var.name, var.ty)
            if not isinstance(t, int):
                raise ExtractError(f"{self.name}: {at}: alloc_tensor without a tensor type")
            self.var_values[var] = t
            self.pending_alloc[t] = where
            self.alloc_binding[t] = where
            self.alloc_device[t] = device_index(call)
            if storage_scope(call) != "global":
                self._escape([t], f"storage scope {storage_scope(call)!r}")
            return
        if self.planned and name in ("relax.memory.alloc_storage", "relax.vm.alloc_storage"):
            self._visit_storage(where, var, call)
            return
        if self.planned and name in ("relax.memory.alloc_tensor", "relax.vm.alloc_tensor"):
            self._bind_view(var, self._value(call.args[0], at), name, where, claim=True)
            return
        if self.planned and name in PLANNED_OPS:  # kills
            self.var_values[var] = None
            self._add_op(name, [], [], "view", [where])
            return
        if name in PLANNED_OPS:
            raise ExtractError(f"{self.name}: already memory-planned ({name} at {at}); run the planner once, "
                               f"where StaticPlanBlockMemory runs")
        if name in VIEW_OPS:
            self._bind_view(var, self._value(call.args[0], at), name, where, claim=True)
            return
        if name == "relax.vm.call_tir_dyn":
            args = self._leaves(call.args[1], at)
            self._visit_dps_call(where, var, args, extern_name(call.args[0]) if not isinstance(
                call.args[0], tvm.ir.GlobalVar) else call.args[0].name_hint, bindings)
            return
        if name in DPS_OPS or name == "relax.call_tir_inplace":
            self._visit_call_tir(where, var, call, name)
            return
        if name.startswith("relax.vm.") or name.startswith("relax.memory."):
            raise ExtractError(f"{self.name}: {at}: {name} is not modelled by the planner; "
                               f"the function is left to StaticPlanBlockMemory")
        # Any other op: reads its tensor arguments, defines its result; like TVM's
        # planner, assume it may keep a reference to them (they escape).
        inputs = [t for a in call.args for t in self._leaves(a, at)]
        self._escape(inputs, f"argument of {name} at {at}")
        outs = self._fresh_value(var.name, var.ty)
        self.var_values[var] = outs
        self._add_op(name, inputs, flatten(outs), "compute", self._claim_allocs(inputs, where))

    def _visit_storage(self, where, var, call: relax.Call) -> None:
        """A storage block of a planned function: one allocated tensor of its byte size."""
        shape = call.args[0]
        if not isinstance(shape, relax.ShapeExpr) or len(shape.values) != 1:
            raise ExtractError(f"{self.name}: storage {var.name} has no static byte size")
        nbytes = _dim_value(shape.values[0], self.bounds, f"{self.name}: storage {var.name}")
        t = len(self.tensors)
        self.tensors.append(Tensor(t, var.name, nbytes, "uint8", (nbytes,)))
        self.var_values[var] = t
        self.pending_alloc[t] = where
        self.alloc_binding[t] = where
        self.storages.add(t)

    def _visit_call_tir(self, where, var, call: relax.Call, name: str) -> None:
        callee = call.args[0]
        label = callee.name_hint if isinstance(callee, tvm.ir.GlobalVar) else str(getattr(callee, "global_symbol", name))
        at = f"binding {var.name}"
        arg_values = self._value(call.args[1], at)
        fields = arg_values if isinstance(arg_values, list) else [arg_values]
        inputs = flatten(arg_values)
        if name == "relax.call_tir" and self._is_reshape(callee) and len(inputs) == 1:
            self._bind_view(var, inputs[0], label, where)
            return
        if name == "relax.call_tir_inplace":
            idx = [int(x) for x in call.attrs.inplace_indices]
            sinfo = var.ty
            out_types = list(sinfo.fields) if isinstance(sinfo, relax.TupleType) else [sinfo]
            outs, inplace = [], []
            for k, (ix, f) in enumerate(zip(idx, out_types)):
                if ix >= 0:
                    if not 0 <= ix < len(fields) or not isinstance(fields[ix], int):
                        raise ExtractError(f"{self.name}: {at}: in-place index {ix} is not a tensor argument")
                    outs.append(self._new_tensor(None, f"{var.name}.{k}", alias_of=fields[ix]))
                    inplace.append(fields[ix])
                else:
                    outs.append(self._new_tensor(f, f"{var.name}.{k}"))
            self.var_values[var] = outs if isinstance(sinfo, relax.TupleType) else outs[0]
            self._add_op(label, inputs, outs, "update", [where], inplace)
            return
        outs = self._fresh_value(var.name, var.ty)
        self.var_values[var] = outs
        self._add_op(label, inputs, flatten(outs), "compute", [where])

    def _reversion(self, value: Value, written: int, root: int, version: int, made: list[int]) -> Value:
        """``value`` with each leaf on ``root``'s storage moved to after the write."""
        if isinstance(value, list):
            return [self._reversion(v, written, root, version, made) for v in value]
        if value is None or self._root(value) != root:
            return value
        if value == written:
            return version
        view = self._new_tensor(None, f"{self.tensors[value].name}'", alias_of=version)
        made.append(view)
        return view

    def _is_reshape(self, callee) -> bool:
        if self.mod is None or not isinstance(callee, tvm.ir.GlobalVar) or callee not in self.mod.functions:
            return False
        f = self.mod[callee]
        return isinstance(f, tirx.PrimFunc) and bool(relax.analysis.has_reshape_pattern(f))

    def _visit_dps_call(self, where, var, args: list[int], label: str, bindings) -> None:
        # Which arguments does the call write? CallTIRRewrite follows every call
        # with ``result = out`` (or a tuple of outs): those are the written args.
        written: list[int] = []
        bi, i = where
        if i + 1 < len(bindings):
            nxt = bindings[i + 1].value
            if isinstance(nxt, (relax.Var, relax.Tuple)):
                refs = self._leaves(nxt, f"binding {bindings[i + 1].var.name}")
                if refs and all(r in args for r in refs):
                    written = refs
        if not written:
            written = [t for t in args if t in self.pending_alloc]
        # Destinations that no op has defined yet are this call's outputs; the
        # rest (parameters, or views of a planned storage) are written in place.
        fresh = [t for t in written if t not in self.produced and t in self.pending_alloc]
        # Writes into a planned storage are uses of that storage, not updates of a
        # value: no ordering edges are needed (the plan is already fixed).
        inplace = [t for t in written if t not in fresh and self._root(t) not in self.storages]
        inputs = [t for t in args if t not in fresh]
        value = self._fresh_value(var.name, var.ty) if var.name != "_" else None
        self.var_values[var] = value  # a returned tuple keeps its nesting
        outs = flatten(value)
        oid = self._add_op(label, inputs, [], "update" if inplace else "compute",
                           self._claim_allocs(args, where), inplace)
        # Each argument written in place gets a new version, so that later
        # readers of the same Relax var depend on this call.
        versions = []
        for t in inplace:
            v = self._new_tensor(None, f"{self.tensors[t].name}'", alias_of=t)
            versions.append(v)
            # Every var that sees these bytes (t itself, or a view of the same storage
            # made before the write) now sees the written value: later readers of any
            # of them depend on this call.
            root = self._root(t)
            for rv in self.var_values.seeing(root):
                val = self.var_values[rv]
                if any(self._root(x) == root for x in flatten(val)):
                    self.var_values[rv] = self._reversion(val, t, root, v, versions)
        # The fresh destinations are defined by this call (they were created by the alloc binding).
        self.ops[oid].outputs = fresh + outs + versions
        self.produced.update(fresh + outs + versions)


class _IndexedValues(dict):
    """``var -> Value`` that also knows which vars have seen each storage root.

    An in-place write re-versions every var that sees the written bytes; looking them up
    here instead of scanning every var made extraction quadratic (GPT2-XL: 30 s a call).
    The index may keep a var whose value no longer holds a root: callers re-check.
    """

    def __init__(self, root_of):
        super().__init__()
        self._root_of = root_of
        self._by_root: dict = {}
        self._first: dict = {}

    def __setitem__(self, var, value) -> None:
        super().__setitem__(var, value)
        self._first.setdefault(var, len(self._first))
        for t in flatten(value):
            self._by_root.setdefault(self._root_of(t), set()).add(var)

    def seeing(self, root: int) -> list:
        """The vars that may see ``root``, in the order they were first bound (as a scan would)."""
        return sorted(self._by_root.get(root, ()), key=self._first.__getitem__)


def _has_tensor(sinfo) -> bool:
    """Whether a struct info is, or holds, a tensor."""
    if isinstance(sinfo, relax.TupleType):
        return any(_has_tensor(f) for f in sinfo.fields)
    return isinstance(sinfo, relax.TensorType)


@dataclass
class _PackedCall:
    """The extern call inside ``R.call_pure_packed`` (what ``callee_kind`` reads)."""

    op: object
    args: list




def extract_graph(func: relax.Function, mod: tvm.IRModule | None = None, name: str = "main",
                  param_kinds: dict[str, str] | None = None, planned: bool = False) -> RelaxGraph:
    """Extract the plain DAG of one Relax function.

    Parameters
    ----------
    func : relax.Function
        At the call_tir level or the lowered level (see module docstring).
    mod : IRModule, optional
        Used to recognise reshape PrimFuncs at the call_tir level.
    name : str
        Graph name.
    param_kinds : dict, optional
        Function parameter name -> ``input``/``param``/``state``. Defaults to the
        function attribute ``roam.param_kinds`` if present, else ``input``.
    planned : bool
        The function is already memory-planned: each ``R.memory.alloc_storage``
        becomes one allocated tensor and its ``alloc_tensor`` views alias it, so
        the graph's peak is the peak under that storage plan.

    Raises
    ------
    ExtractError
        Unsupported construct or a dynamic dimension without an upper bound.
    """
    if param_kinds is None:
        attrs = func.attrs or {}
        if "roam.param_kinds" in attrs:
            param_kinds = {str(k): str(v) for k, v in attrs["roam.param_kinds"].items()}
    return _Extractor(mod, func, name, param_kinds, planned).visit_function()
