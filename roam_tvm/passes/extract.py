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
them. Bindings that only rename (``a = b``, tuples, ``TupleGetItem``, reshape
views) become ``view`` ops whose outputs alias their inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm.sym  # the arithmetic analyzer (tvm.arith in older TVM)
from tvm import relax, tirx

from ..graph import Graph, Op, Tensor

_VIEW_OPS = {"relax.reshape", "relax.memory.view", "relax.builtin.stop_lift_params"}
_CALL_DPS = {"relax.call_tir", "relax.call_tir_with_grad", "relax.call_dps_packed"}


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
        self.var_tensors: dict = {}
        self.produced: set[int] = set()
        self.pending_alloc: dict[int, tuple[int, int]] = {}  # tensor -> alloc binding, not yet claimed
        self.alloc_binding: dict[int, tuple[int, int]] = {}
        self.const_tensors: dict = {}
        self.storages: set[int] = set()
        self.param_kinds = param_kinds or {}

    # ----------------------------------------------------------- tensors
    def _new_tensor(self, sinfo, name: str, kind: str = "intermediate", alias_of: int | None = None) -> int:
        tid = len(self.tensors)
        if alias_of is not None:
            size, dtype, shape = 0, self.tensors[alias_of].dtype, self.tensors[alias_of].shape
        else:
            size, dtype, shape = tensor_bytes(sinfo, self.bounds, f"{self.name}: {name}")
        self.tensors.append(Tensor(tid, name, size, dtype, shape, kind, False, alias_of))
        return tid

    def _root(self, t: int) -> int:
        while self.tensors[t].alias_of is not None:
            t = self.tensors[t].alias_of
        return t

    def _leaves(self, expr) -> list[int]:
        """Tensor ids an argument expression refers to (constants become const tensors)."""
        if isinstance(expr, relax.Var):
            return list(self.var_tensors.get(expr, []))
        if isinstance(expr, relax.Tuple):
            return [t for f in expr.fields for t in self._leaves(f)]
        if isinstance(expr, tvm.ir.Constant):
            if expr not in self.const_tensors:
                self.const_tensors[expr] = self._new_tensor(expr.ty, f"const{len(self.const_tensors)}", "const")
            return [self.const_tensors[expr]]
        if isinstance(expr, relax.TupleGetItem):
            return [self._leaves(expr.tuple_value)[expr.index]]
        return []  # shapes, prim values, strings, functions

    def _fresh_outputs(self, var: relax.Var, sinfo) -> list[int]:
        if isinstance(sinfo, relax.TupleType):
            return [t for i, f in enumerate(sinfo.fields) for t in self._fresh_outputs(f"{var.name}.{i}", f)]
        if isinstance(sinfo, relax.TensorType):
            name = var if isinstance(var, str) else var.name
            return [self._new_tensor(sinfo, name)]
        return []

    def _add_op(self, name: str, inputs: list[int], outputs: list[int], kind: str,
                bindings: list[tuple[int, int]], inplace: list[int] = ()) -> int:
        oid = len(self.ops)
        uniq_in = list(dict.fromkeys(inputs))
        self.ops.append(Op(oid, name, uniq_in, outputs, 0, kind, list(dict.fromkeys(inplace))))
        self.op_bindings.append(bindings)
        self.produced.update(outputs)
        return oid

    def _aliases(self, var_name: str, sources: list[int]) -> list[int]:
        return [self._new_tensor(None, f"{var_name}.{i}" if len(sources) > 1 else var_name, alias_of=s)
                for i, s in enumerate(sources)]

    def _claim_allocs(self, args: list[int], where: tuple[int, int]) -> list[tuple[int, int]]:
        claimed = []
        for t in args:
            r = self._root(t)
            if r in self.pending_alloc:
                claimed.append(self.pending_alloc.pop(r))
        return sorted(claimed) + [where]

    # ----------------------------------------------------------- bindings
    def visit_function(self) -> RelaxGraph:
        for p in self.func.params:
            sinfo = p.ty
            kind = self.param_kinds.get(p.name, "input")
            if isinstance(sinfo, relax.TensorType):
                self.var_tensors[p] = [self._new_tensor(sinfo, p.name, kind)]
            elif isinstance(sinfo, relax.TupleType):
                self.var_tensors[p] = self._fresh_param_tuple(p.name, sinfo, kind)
            else:
                self.var_tensors[p] = []
        body = self.func.body
        if not isinstance(body, relax.SeqExpr):
            raise ExtractError(f"{self.name}: function body is not a sequence of bindings; run relax.transform.Normalize first")
        force_pure = bool((self.func.attrs or {}).get("relax.force_pure", False))
        barrier: int | None = None  # last op of the previous block
        for bi, block in enumerate(body.blocks):
            block_start = len(self.ops)
            bindings = list(block.bindings)
            ordered = not isinstance(block, relax.DataflowBlock) and not force_pure
            last_impure: int | None = None
            for i, b in enumerate(bindings):
                n_before = len(self.ops)
                self._visit_binding(bi, i, b, bindings)
                for oid in range(n_before, len(self.ops)):
                    if barrier is not None:
                        self.ops[oid].after.append(barrier)
                    if ordered:  # side effects keep their relative order
                        if last_impure is not None:
                            self.ops[oid].after.append(last_impure)
                        last_impure = oid
            if len(body.blocks) > 1 and len(self.ops) > block_start:
                # Blocks are barriers: the block's last op runs after all of it,
                # and the next block's ops run after that op.
                barrier = len(self.ops) - 1
                self.ops[barrier].after.extend(range(block_start, barrier))
        for t, where in self.pending_alloc.items():  # allocated but never used
            self._add_op("alloc_unused", [], [], "compute", [where])
            self.tensors[t].kind = "intermediate"
            self.ops[-1].outputs.append(t)
        for t in self._leaves(body.body):
            self.tensors[t].is_output = True
        graph = Graph(self.ops, self.tensors, name=self.name)
        return RelaxGraph(graph, self.func, self.op_bindings, self.alloc_binding, self.var_tensors)

    def _fresh_param_tuple(self, name: str, sinfo, kind: str) -> list[int]:
        out = []
        for i, f in enumerate(sinfo.fields):
            if isinstance(f, relax.TensorType):
                out.append(self._new_tensor(f, f"{name}.{i}", kind))
            elif isinstance(f, relax.TupleType):
                out.extend(self._fresh_param_tuple(f"{name}.{i}", f, kind))
        return out

    def _visit_binding(self, bi: int, i: int, b, bindings) -> None:
        where = (bi, i)
        var = b.var
        value = b.value
        if isinstance(b, relax.MatchCast) or isinstance(value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
            src = self._leaves(value)
            outs = self._aliases(var.name, src)
            self.var_tensors[var] = outs
            self._add_op("view", src, outs, "view", [where])
            return
        if isinstance(value, tvm.ir.Constant):
            self.var_tensors[var] = self._leaves(value)
            self._add_op("const", [], [], "view", [where])
            return
        if not isinstance(value, relax.Call):
            raise ExtractError(f"{self.name}: binding {var.name} = {type(value).__name__} is not supported "
                               f"(control flow / nested functions); the function is left to StaticPlanBlockMemory")
        op = value.op
        if isinstance(op, tvm.ir.Op):
            self._visit_op_call(where, var, value, bindings)
            return
        # Lowered destination-passing call: f(args..., outputs) or an extern/packed call.
        self._visit_dps_call(where, var, value, bindings)

    def _visit_op_call(self, where, var, call: relax.Call, bindings) -> None:
        name = call.op.name
        if name == "relax.builtin.alloc_tensor":
            [t] = self._fresh_outputs(var, var.ty)
            self.var_tensors[var] = [t]
            self.pending_alloc[t] = where
            self.alloc_binding[t] = where
            return
        if name == "relax.memory.alloc_storage" and self.planned:
            # A storage block: sized in bytes by its shape argument.
            nbytes = int(call.args[0].values[0])
            t = len(self.tensors)
            self.tensors.append(Tensor(t, var.name, nbytes, "uint8", (nbytes,)))
            self.var_tensors[var] = [t]
            self.pending_alloc[t] = where
            self.alloc_binding[t] = where
            self.storages.add(t)
            return
        if name == "relax.memory.alloc_tensor" and self.planned:
            src = self._leaves(call.args[0])
            outs = self._aliases(var.name, src)
            self.var_tensors[var] = outs
            self._add_op(name, src, outs, "view", self._claim_allocs(src, where))
            return
        if name.startswith("relax.memory.kill") and self.planned:
            self.var_tensors[var] = []
            self._add_op(name, [], [], "view", [where])
            return
        if name.startswith("relax.memory.alloc") or name.startswith("relax.memory.kill") or name.startswith("relax.vm."):
            raise ExtractError(f"{self.name}: already memory-planned ({name} found); run the planner once, "
                               f"where StaticPlanBlockMemory runs")
        if name == "relax.memory.ensure_zero_offset":
            src = self._leaves(call.args[0])
            outs = self._aliases(var.name, src)
            self.var_tensors[var] = outs
            self._add_op(name, src, outs, "view", [where])
            return
        if name in _VIEW_OPS:
            src = self._leaves(call.args[0])
            outs = self._aliases(var.name, src)
            self.var_tensors[var] = outs
            self._add_op(name, src, outs, "view", [where])
            return
        if name in _CALL_DPS or name == "relax.call_tir_inplace":
            callee = call.args[0]
            label = callee.name_hint if isinstance(callee, tvm.ir.GlobalVar) else str(getattr(callee, "global_symbol", name))
            inputs = self._leaves(call.args[1])
            if name == "relax.call_tir" and self._is_reshape(callee) and len(inputs) == 1:
                outs = self._aliases(var.name, inputs)
                self.var_tensors[var] = outs
                self._add_op(label, inputs, outs, "view", [where])
                return
            if name == "relax.call_tir_inplace":
                idx = [int(x) for x in call.attrs.inplace_indices]
                sinfo = var.ty
                fields = list(sinfo.fields) if isinstance(sinfo, relax.TupleType) else [sinfo]
                outs, inplace = [], []
                for k, (ix, f) in enumerate(zip(idx, fields)):
                    if ix >= 0:
                        arg = self._leaves(call.args[1].fields[ix])[0] if isinstance(call.args[1], relax.Tuple) else inputs[ix]
                        outs.append(self._new_tensor(None, f"{var.name}.{k}", alias_of=arg))
                        inplace.append(arg)
                    else:
                        outs.append(self._new_tensor(f, f"{var.name}.{k}"))
                self.var_tensors[var] = outs
                self._add_op(label, inputs, outs, "update", [where], inplace)
                return
            outs = self._fresh_outputs(var, var.ty)
            self.var_tensors[var] = outs
            self._add_op(label, inputs, outs, "compute", [where])
            return
        # Any other op: reads its tensor arguments, defines its result.
        inputs = [t for a in call.args for t in self._leaves(a)]
        outs = self._fresh_outputs(var, var.ty)
        self.var_tensors[var] = outs
        self._add_op(name, inputs, outs, "compute", self._claim_allocs(inputs, where))

    def _is_reshape(self, callee) -> bool:
        if self.mod is None or not isinstance(callee, tvm.ir.GlobalVar) or callee not in self.mod.functions:
            return False
        f = self.mod[callee]
        return isinstance(f, tirx.PrimFunc) and bool(relax.analysis.has_reshape_pattern(f))

    def _visit_dps_call(self, where, var, call: relax.Call, bindings) -> None:
        callee = call.op
        label = callee.name_hint if isinstance(callee, tvm.ir.GlobalVar) else str(callee)
        args = [t for a in call.args for t in self._leaves(a)]
        # Which arguments does the call write? CallTIRRewrite follows every call
        # with ``result = out`` (or a tuple of outs): those are the written args.
        written: list[int] = []
        bi, i = where
        if i + 1 < len(bindings):
            nxt = bindings[i + 1].value
            if isinstance(nxt, (relax.Var, relax.Tuple)):
                refs = self._leaves(nxt)
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
        if isinstance(var.ty, relax.TensorType) and var.name != "_":
            outs = self._fresh_outputs(var, var.ty)  # a call that returns a new tensor
        else:
            outs = []
        self.var_tensors[var] = outs
        oid = self._add_op(label, inputs, [], "update" if inplace else "compute",
                           self._claim_allocs(args, where), inplace)
        # Each argument written in place gets a new version, so that later
        # readers of the same Relax var depend on this call.
        versions = []
        for t in inplace:
            v = self._new_tensor(None, f"{self.tensors[t].name}'", alias_of=t)
            versions.append(v)
            for rv, leaves in self.var_tensors.items():
                if t in leaves:
                    self.var_tensors[rv] = [v if x == t else x for x in leaves]
        # The fresh destinations are defined by this call (they were created by the alloc binding).
        self.ops[oid].outputs = fresh + outs + versions
        self.produced.update(fresh + outs + versions)


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
