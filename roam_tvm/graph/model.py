"""Plain-data model of one training step: ops in program order, tensors, aliases.

No TVM in here. Everything downstream (ordering, layout, bounds, the simulator)
works on this model, so it can be built by hand, loaded from JSON and tested in
milliseconds.

Memory semantics
----------------
* A tensor's *storage root* is found by following ``alias_of``. Views (reshape,
  tuple items) and the results of in-place updates alias their source, so they
  never allocate.
* Roots of kind ``input``, ``param``, ``state`` or ``const`` are *always live*:
  they exist before the step starts and after it ends.
* Every other root (an ``intermediate``) is allocated when its producing op runs
  and is freed after the last op that reads or writes it or any of its aliases.
  If the root or one of its aliases is a function output, it lives to the end.
* While an op runs, its inputs, its outputs and its ``workspace`` are live.

Dependencies
------------
An op depends on the producer of each tensor it reads. An op that updates a
tensor in place (``Op.inplace``) must also run after every other reader of the
old value (write-after-read), otherwise a reader would see the updated value.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Iterable, Sequence

ALWAYS_LIVE_KINDS = ("input", "param", "state", "const")
TENSOR_KINDS = ALWAYS_LIVE_KINDS + ("intermediate",)


class GraphError(ValueError):
    """A graph is malformed (dangling ids, cycles, bad order)."""


@dataclass
class Tensor:
    """One tensor value.

    Parameters
    ----------
    id : int
        Index of the tensor in ``Graph.tensors``.
    name : str
        Human-readable name (the Relax variable name, for example).
    size : int
        Size in bytes.
    dtype, shape :
        Informational; ``size`` is what planning uses.
    kind : str
        One of ``input``, ``param``, ``state``, ``const``, ``intermediate``.
    is_output : bool
        The tensor (or its storage) is returned by the function.
    alias_of : int or None
        This tensor shares the storage of that tensor (a view, a tuple item, or
        the result of an in-place update).
    """

    id: int
    name: str
    size: int
    dtype: str = "float32"
    shape: tuple[int, ...] = ()
    kind: str = "intermediate"
    is_output: bool = False
    alias_of: int | None = None


@dataclass
class Op:
    """One operator (a kernel call, a view, or an optimizer update).

    Parameters
    ----------
    id : int
        Index of the op in ``Graph.ops``; ``Graph.ops`` is the program order.
    name : str
        Kernel or op name.
    inputs, outputs : list of int
        Tensor ids read and defined.
    workspace : int
        Temporary bytes live only while the op runs.
    kind : str
        ``compute``, ``view`` (defines aliases only) or ``update`` (an optimizer
        update). Informational except for update scheduling.
    inplace : list of int
        Input tensor ids whose storage this op overwrites. Its outputs that alias
        them carry ``alias_of``.
    after : list of int
        Extra ops that must run before this one (control dependencies, e.g. a
        binding with side effects that must keep its place).
    """

    id: int
    name: str
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    workspace: int = 0
    kind: str = "compute"
    inplace: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)


class Graph:
    """A training step as a DAG of ops over tensors, with ops in program order."""

    def __init__(self, ops: Sequence[Op], tensors: Sequence[Tensor], name: str = "graph",
                 meta: dict | None = None):
        self.name = name
        self.ops = list(ops)
        self.tensors = list(tensors)
        self.meta = dict(meta or {})
        self._check()

    # ------------------------------------------------------------------ checks
    def _check(self) -> None:
        n_t = len(self.tensors)
        for i, t in enumerate(self.tensors):
            if t.id != i:
                raise GraphError(f"tensor {t.name!r} has id {t.id}, expected {i}")
            if t.kind not in TENSOR_KINDS:
                raise GraphError(f"tensor {t.name!r} has unknown kind {t.kind!r}; use one of {TENSOR_KINDS}")
            if t.size < 0:
                raise GraphError(f"tensor {t.name!r} has negative size {t.size}")
            if t.alias_of is not None and not 0 <= t.alias_of < n_t:
                raise GraphError(f"tensor {t.name!r} aliases unknown tensor {t.alias_of}")
        producer: dict[int, int] = {}
        for i, op in enumerate(self.ops):
            if op.id != i:
                raise GraphError(f"op {op.name!r} has id {op.id}, expected {i}")
            for tid in (*op.inputs, *op.outputs):
                if not 0 <= tid < n_t:
                    raise GraphError(f"op {op.name!r} refers to unknown tensor {tid}")
            for tid in op.outputs:
                if tid in producer:
                    raise GraphError(f"tensor {self.tensors[tid].name!r} is defined by two ops")
                producer[tid] = i
            for dep in op.after:
                if not 0 <= dep < len(self.ops) or dep == i:
                    raise GraphError(f"op {op.name!r} has a bad control dependency {dep}")
            for tid in op.inplace:
                if tid not in op.inputs:
                    raise GraphError(f"op {op.name!r} updates tensor {tid} in place but does not read it")
        for t in self.tensors:
            if t.kind != "intermediate" and t.alias_of is None and t.id in producer:
                raise GraphError(f"{t.kind} tensor {t.name!r} must not be produced by an op")
        self.topological_order()  # raises on cycles

    # -------------------------------------------------------------- structure
    @cached_property
    def producer(self) -> dict[int, int]:
        """Tensor id -> id of the op that defines it."""
        return {tid: op.id for op in self.ops for tid in op.outputs}

    @cached_property
    def readers(self) -> list[list[int]]:
        """Tensor id -> ids of the ops that read it."""
        out: list[list[int]] = [[] for _ in self.tensors]
        for op in self.ops:
            for tid in dict.fromkeys(op.inputs):
                out[tid].append(op.id)
        return out

    def root(self, tid: int) -> int:
        """The storage root of a tensor (follows ``alias_of``)."""
        seen = 0
        while self.tensors[tid].alias_of is not None:
            tid = self.tensors[tid].alias_of
            seen += 1
            if seen > len(self.tensors):
                raise GraphError("alias cycle")
        return tid

    @cached_property
    def roots(self) -> list[int]:
        return [self.root(t.id) for t in self.tensors]

    @cached_property
    def always_live(self) -> list[int]:
        """Root tensors that exist for the whole step."""
        return [t.id for t in self.tensors if t.alias_of is None and t.kind in ALWAYS_LIVE_KINDS]

    @cached_property
    def always_live_bytes(self) -> int:
        return sum(self.tensors[t].size for t in self.always_live)

    @cached_property
    def allocated(self) -> list[int]:
        """Root intermediate tensors: the ones a planner places."""
        return [t.id for t in self.tensors if t.alias_of is None and t.kind == "intermediate"]

    @cached_property
    def pinned_to_end(self) -> set[int]:
        """Allocated roots that are returned (directly or through an alias)."""
        return {self.roots[t.id] for t in self.tensors if t.is_output} & set(self.allocated)

    @cached_property
    def users(self) -> dict[int, list[int]]:
        """Allocated root -> ops that define, read or write it (through any alias)."""
        out: dict[int, set[int]] = {r: set() for r in self.allocated}
        for op in self.ops:
            for tid in (*op.inputs, *op.outputs):
                r = self.roots[tid]
                if r in out:
                    out[r].add(op.id)
        return {r: sorted(s) for r, s in out.items()}

    @cached_property
    def predecessors(self) -> list[list[int]]:
        """Op id -> ids of ops that must run before it (data and write-after-read)."""
        preds: list[set[int]] = [set() for _ in self.ops]
        prod = self.producer
        for op in self.ops:
            preds[op.id].update(op.after)
            for tid in op.inputs:
                p = prod.get(tid)
                if p is not None and p != op.id:
                    preds[op.id].add(p)
        # Write-after-read: every reader of the storage's older versions (the root
        # and every alias of it that does not come from this update) runs first.
        alias_children: list[list[int]] = [[] for _ in self.tensors]
        for t in self.tensors:
            if t.alias_of is not None:
                alias_children[t.alias_of].append(t.id)
        for op in self.ops:
            mine = set(op.outputs)
            for tid in op.inplace:
                stack, old_versions = [self.root(tid)], []
                while stack:
                    x = stack.pop()
                    if x in mine:
                        continue
                    old_versions.append(x)
                    stack.extend(alias_children[x])
                for x in old_versions:
                    for r in self.readers[x]:
                        if r != op.id:
                            preds[op.id].add(r)
        return [sorted(p) for p in preds]

    @cached_property
    def successors(self) -> list[list[int]]:
        succ: list[list[int]] = [[] for _ in self.ops]
        for v, ps in enumerate(self.predecessors):
            for u in ps:
                succ[u].append(v)
        return succ

    def topological_order(self) -> list[int]:
        """A topological order (Kahn, smallest program index first); raises on cycles."""
        import heapq

        indeg = [len(p) for p in self.predecessors]
        heap = [i for i, d in enumerate(indeg) if d == 0]
        heapq.heapify(heap)
        order: list[int] = []
        while heap:
            u = heapq.heappop(heap)
            order.append(u)
            for v in self.successors[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(heap, v)
        if len(order) != len(self.ops):
            stuck = [self.ops[i].name for i, d in enumerate(indeg) if d > 0][:5]
            raise GraphError(f"graph has a cycle through ops {stuck}; an op cannot depend on itself")
        return order

    # --------------------------------------------------------------- liveness
    def check_order(self, order: Sequence[int]) -> None:
        """Raise ``GraphError`` unless ``order`` is a permutation respecting all dependencies."""
        if sorted(order) != list(range(len(self.ops))):
            raise GraphError(f"order is not a permutation of the {len(self.ops)} ops")
        pos = {op: i for i, op in enumerate(order)}
        for v, ps in enumerate(self.predecessors):
            for u in ps:
                if pos[u] > pos[v]:
                    raise GraphError(f"order runs {self.ops[v].name!r} before its dependency {self.ops[u].name!r}")

    def lifetimes(self, order: Sequence[int] | None = None) -> dict[int, tuple[int, int]]:
        """Allocated root -> (first step, last step), inclusive, under ``order``."""
        order = list(range(len(self.ops))) if order is None else list(order)
        pos = {op: i for i, op in enumerate(order)}
        last = len(order) - 1
        out = {}
        for r, users in self.users.items():
            if not users:
                continue
            steps = [pos[u] for u in users]
            out[r] = (min(steps), last if r in self.pinned_to_end else max(steps))
        return out

    def live_profile(self, order: Sequence[int] | None = None) -> list[int]:
        """Bytes live at each step under ``order`` with perfect packing (always-live included)."""
        order = list(range(len(self.ops))) if order is None else list(order)
        n = len(order)
        delta = [0] * (n + 1)
        for r, (a, b) in self.lifetimes(order).items():
            delta[a] += self.tensors[r].size
            delta[b + 1] -= self.tensors[r].size
        prof, cur = [], self.always_live_bytes
        for i, op in enumerate(order):
            cur += delta[i]
            prof.append(cur + self.ops[op].workspace)
        return prof

    def peak(self, order: Sequence[int] | None = None) -> int:
        """Peak bytes of ``order`` (default: program order) with perfect packing."""
        prof = self.live_profile(order)
        return max(prof) if prof else self.always_live_bytes

    # ---------------------------------------------------------------- helpers
    def asap_alap(self) -> tuple[list[int], list[int]]:
        """Earliest and latest 0-based position of each op over all topological orders."""
        n = len(self.ops)
        topo = self.topological_order()
        anc = [0] * n
        desc = [0] * n
        # Bitsets as Python ints: exact ancestor/descendant counts.
        a_bits = [0] * n
        for v in topo:
            b = 0
            for u in self.predecessors[v]:
                b |= a_bits[u] | (1 << u)
            a_bits[v] = b
            anc[v] = b.bit_count()
        d_bits = [0] * n
        for v in reversed(topo):
            b = 0
            for w in self.successors[v]:
                b |= d_bits[w] | (1 << w)
            d_bits[v] = b
            desc[v] = b.bit_count()
        return anc, [n - 1 - d for d in desc]

    def summary(self) -> dict:
        return {
            "ops": len(self.ops),
            "tensors": len(self.tensors),
            "allocated": len(self.allocated),
            "always_live_bytes": self.always_live_bytes,
            "program_order_peak": self.peak(),
        }

    def aligned(self, alignment: int, tensors: Iterable[int] | None = None) -> "Graph":
        """A copy in which each allocated tensor takes its size rounded up to ``alignment``.

        A planner that places tensors at ``alignment``-byte offsets in one arena (RoamLayout)
        gives each of them that much room, so an order chosen on these sizes is chosen for
        what the layout will pack. Always-live tensors keep their size (they are not in the
        arena). ``tensors`` limits the rounding to those (the ones an arena holds).
        """
        if alignment <= 1:
            return self
        allocated = set(self.allocated) if tensors is None else set(self.allocated) & set(tensors)
        tensors = [replace(t, size=-(-t.size // alignment) * alignment)
                   if t.id in allocated and t.size > 0 else t for t in self.tensors]
        return Graph(self.ops, tensors, name=self.name, meta=self.meta)

    # ------------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "meta": self.meta,
            "tensors": [asdict(t) for t in self.tensors],
            "ops": [asdict(o) for o in self.ops],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Graph":
        try:
            tensors = [Tensor(**{**t, "shape": tuple(t.get("shape", ()))}) for t in d["tensors"]]
            ops = [Op(**o) for o in d["ops"]]
        except (KeyError, TypeError) as e:
            raise GraphError(f"not a roam-tvm graph JSON: {e}") from e
        return cls(ops, tensors, name=d.get("name", "graph"), meta=d.get("meta"))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f)

    @classmethod
    def load(cls, path: str) -> "Graph":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, ops={len(self.ops)}, tensors={len(self.tensors)})"


class GraphBuilder:
    """Convenience builder for hand-written and random graphs (tests, examples)."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []

    def tensor(self, size: int, kind: str = "intermediate", name: str | None = None,
               is_output: bool = False, alias_of: int | None = None) -> int:
        tid = len(self.tensors)
        self.tensors.append(Tensor(tid, name or f"t{tid}", int(size), kind=kind,
                                   is_output=is_output, alias_of=alias_of))
        return tid

    def op(self, inputs: Iterable[int], out_sizes: Iterable[int] = (), name: str | None = None,
           workspace: int = 0, kind: str = "compute", inplace: Iterable[int] = ()) -> list[int]:
        """Add an op reading ``inputs`` and defining fresh tensors of ``out_sizes``.

        Each id in ``inplace`` gets an output that aliases it (the updated value).
        Returns the ids of the defined tensors (fresh ones first, then in-place results).
        """
        oid = len(self.ops)
        outs = [self.tensor(s) for s in out_sizes]
        inplace = list(inplace)
        outs += [self.tensor(0, alias_of=t, name=f"{self.tensors[t].name}'") for t in inplace]
        self.ops.append(Op(oid, name or f"op{oid}", list(inputs), outs, workspace, kind, inplace))
        return outs

    def build(self) -> Graph:
        return Graph(self.ops, self.tensors, self.name)
