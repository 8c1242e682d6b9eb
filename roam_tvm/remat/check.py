"""An independent check of a recomputation rewrite, on the Relax functions themselves.

It shares no code with the planner or the rewrite (no ``roam_tvm.graph``,
``roam_tvm.passes`` or the rest of ``roam_tvm.remat``): it evaluates both
functions symbolically. Every value gets a content-addressed token: a
parameter is ``("param", i)``, a call is (callee, tokens of its arguments,
attributes, types), a tuple and ``t[i]`` are what they are, anything else
(constants, shapes) is its structural hash. So the same computation on the
same inputs gets the same token in both functions, whatever the order or the
variable names. The rewritten function must

* return the same tokens,
* compute no value the reference does not compute (a recomputation repeats
  a call of the reference on equal inputs, so its token is one of them),
* compute every value the reference computes, and
* never read a variable after a ``call_tir_inplace`` has overwritten it.

An in-place call the reference does not make (``call_tir_inplace`` of a
kernel marked ``roam.inplace_of = [f, [[m, k], ...]]``) counts as the
reference's ``call_tir`` of ``f`` only when, checked here from scratch (the
mark is a claim, not a proof):

* the kernel is ``f`` with each output ``m``'s parameter removed and every
  use of it replaced by input ``k``'s (re-derived and compared structurally);
* ``f`` is safe for it, judged on its blocks' declared read/write regions:
  output ``m`` is written by one non-reduction block; every other block
  reading input ``k`` sits in an earlier root-level loop nest; if that block
  reads input ``k`` it reads exactly the one element it writes, its
  iterators are data-parallel and bound to whole loops one to one, and no
  loop is thread-bound; nothing reads output ``m`` or writes input ``k``;
  both have the same shape and dtype; for a step built for a GPU (``gpu=True``), ``f`` is one block
  (a GPU schedule inlines earlier stages into the writer, or stages them through global scratch);
* the overwritten argument is not a parameter of the function (and, as for
  every in-place call, never read afterwards).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax, s_tir, tirx

__all__ = ["check_recompute", "recomputed_calls"]


class _Eval:
    """Tokens of one function's bindings (interned to ints, so deep DAGs stay cheap)."""

    def __init__(self, func: relax.Function, ids: dict, mod: tvm.IRModule | None = None, gpu: bool = False):
        self.ids = ids  # shared by both functions, so equal values get equal tokens
        self.mod = mod
        self.gpu = gpu
        self.params = set(func.params)
        self.env: dict = {}
        self.calls: dict[int, str] = {}  # call token -> the variable it was bound to
        self.problems: list[str] = []
        self.consumed: dict = {}  # var -> the binding that overwrote it in place
        for i, p in enumerate(func.params):
            self.env[p] = self._intern(("param", i))
        for block in func.body.blocks:
            for b in block.bindings:
                if not isinstance(b, relax.VarBinding):
                    self.problems.append(f"cannot check: binding of {b.var.name} is a {type(b).__name__}")
                    continue
                self.env[b.var] = self.token(b.value, f"binding {b.var.name}")
        self.result = self.token(func.body.body, "the return value")

    def _intern(self, key) -> int:
        return self.ids.setdefault(key, len(self.ids))

    def token(self, e, where: str) -> int:
        if isinstance(e, relax.Var):
            if e in self.consumed:
                self.problems.append(f"{where} reads {e.name} after {self.consumed[e]} overwrote it in place")
            if e not in self.env:
                self.problems.append(f"{where} reads {e.name} before it is defined")
                return self._intern(("undefined", e.name))
            return self.env[e]
        if isinstance(e, relax.Tuple):
            return self._intern(("tuple",) + tuple(self.token(f, where) for f in e.fields))
        if isinstance(e, relax.TupleGetItem):
            return self._intern(("get", self.token(e.tuple_value, where), int(e.index)))
        if isinstance(e, tvm.ir.GlobalVar):
            return self._intern(("global", e.name_hint))
        if isinstance(e, relax.Call):
            op = e.op
            name = op.name if isinstance(op, tvm.ir.Op) else self.token(op, where)
            args = tuple(self.token(a, where) for a in e.args)
            key = ("call", name, args, str(e.attrs) if e.attrs is not None else "",
                   tuple(str(t) for t in e.ty_args))
            if name == "relax.call_tir_inplace" and self.mod is not None:
                key = self._derived_inplace(e, where) or key
            tok = self._intern(key)
            self.calls.setdefault(tok, where)
            if name == "relax.call_tir_inplace" and len(e.args) > 1:
                fields = e.args[1].fields if isinstance(e.args[1], relax.Tuple) else [e.args[1]]
                for ix in e.attrs.inplace_indices:
                    if 0 <= int(ix) < len(fields) and isinstance(fields[int(ix)], relax.Var):
                        self.consumed[fields[int(ix)]] = where
            return tok
        return self._intern(("leaf", type(e).__name__, tvm_ffi.structural_hash(e)))


    def _derived_inplace(self, e: relax.Call, where: str):
        """The reference ``call_tir`` key of a checked derived in-place call (None: not derived)."""
        gv = e.args[0]
        kernel = self.mod[gv] if isinstance(gv, tvm.ir.GlobalVar) and gv in self.mod.functions else None
        claim = None if kernel is None or kernel.attrs is None else kernel.attrs.get(_MARK)
        if claim is None:
            return None
        fields = list(e.args[1].fields) if isinstance(e.args[1], relax.Tuple) else [e.args[1]]
        for ix in e.attrs.inplace_indices:
            arg = fields[int(ix)] if 0 <= int(ix) < len(fields) else None
            if int(ix) >= 0 and arg in self.params:
                self.problems.append(f"{where} overwrites the function parameter {arg.name} in place")
        why = _kernel_problem(self.mod, kernel, claim, len(fields), [int(i) for i in e.attrs.inplace_indices],
                              self.gpu)
        if why:
            self.problems.append(f"{where}: in-place kernel {gv.name_hint} refused: {why}")
            return None
        orig = str(claim[0])
        args = self._intern(("tuple",) + tuple(self.token(f, where) for f in fields))
        return ("call", "relax.call_tir", (self._intern(("global", orig)), args), "",
                tuple(str(t) for t in e.ty_args))


_MARK = "roam.inplace_of"  # the rewrite's claim (see the module notes)


def _kernel_problem(mod, kernel, claim, n_in: int, idx: list[int], gpu: bool = False) -> str | None:
    """Why ``kernel`` is not a safe in-place form of the kernel it claims (None: it is)."""
    orig = next((f for gv, f in mod.functions.items() if gv.name_hint == str(claim[0])), None)
    if not isinstance(orig, tirx.PrimFunc):
        return f"no kernel {claim[0]} in the module"
    pairs = [(int(m), int(k)) for m, k in claim[1]]
    if sorted(pairs) != sorted((m, k) for m, k in enumerate(idx) if k >= 0):
        return "its mark disagrees with the call's in-place indices"
    params = list(orig.params)
    drop = {n_in + m: params[k] for m, k in pairs}
    if any(i >= len(params) for i in drop):
        return "output index out of range"

    def sub(x):
        hit = [v for i, v in drop.items() if x.same_as(params[i])]
        return hit[0] if hit else x

    body = tvm_ffi.structural_map(orig.body, [(tirx.Var, sub)])
    keep = [p for i, p in enumerate(params) if i not in drop]
    if len(keep) != len(kernel.params) or not all(a.same_as(b) for a, b in zip(keep, kernel.params)) \
            or not tvm_ffi.structural_equal(body, kernel.body):
        return f"it is not {claim[0]} with the outputs redirected to the inputs"
    for m, k in pairs:
        why = _unsafe(orig, params[k], params[n_in + m], gpu)
        if why:
            return f"output {m} into input {k}: {why}"
    return None


def _unsafe(f: tirx.PrimFunc, ib, ob, gpu: bool = False) -> str | None:
    """Why writing ``ob`` into ``ib`` may let a read of ``ib`` see a written value (None: it cannot)."""
    if str(ib.ty.dtype) != str(ob.ty.dtype) or not tvm_ffi.structural_equal(list(ib.ty.shape), list(ob.ty.shape)):
        return "shape or dtype differ"
    loops, found = [], []
    root = f.body.block.body
    for top, stmt in enumerate(root.seq if isinstance(root, tirx.SeqStmt) else [root]):
        def visit(x, top=top):
            if isinstance(x, tirx.For):
                loops.append(x)
            elif isinstance(x, s_tir.SBlockRealize):
                found.append((top, x))
        tvm_ffi.structural_walk(stmt, [(object, visit)], order="pre")
    if any(lp.kind == tirx.ForKind.THREAD_BINDING or lp.thread_binding is not None for lp in loops):
        return "a loop is thread-bound"
    if gpu and len(found) > 1:
        return f"{len(found)} blocks: for a GPU only a kernel of one block is written in place"

    def regions(rs, buf):
        return [r for r in rs if r.source.same_as(buf)]

    writers = [(t, r) for t, r in found if regions(r.block.writes, ob)]
    if any(regions(r.block.reads, ob) for _, r in found) or any(regions(r.block.writes, ib) for _, r in found):
        return "the output is read or the input written"
    if len(writers) != 1 or writers[0][1].block.init is not None or len(regions(writers[0][1].block.writes, ob)) != 1:
        return "the output is not written by exactly one non-reduction block"
    wtop, w = writers[0]
    for t, r in found:
        if regions(r.block.reads, ib) and r is not w and t >= wtop:
            return f"block {r.block.name_hint} reads the input after the output is written"
    reads = regions(w.block.reads, ib)
    if not reads:
        return None
    (wr,) = regions(w.block.writes, ob)
    ivs = list(w.block.iter_vars)
    mins = [rg.min for rg in wr.region]
    if any(iv.iter_type != tirx.IterVar.DataPar for iv in ivs) or any(not _one(rg.extent) for rg in wr.region):
        return "the writer is not elementwise"
    which = [next((j for j, iv in enumerate(ivs) if iv.var.same_as(m)), None) for m in mins]
    if None in which or len(set(which)) != len(ivs) or len(which) != len(ivs):
        return "the writer's element is not its iterators"
    bound = [next((lp for lp in loops if lp.loop_var.same_as(v)), None) for v in w.iter_values]
    if None in bound or len({id(lp) for lp in bound}) != len(bound):
        return "the writer is not bound one to one to loops"
    for iv, lp in zip(ivs, bound):
        if not tvm_ffi.structural_equal(lp.extent, iv.dom.extent) or not _zero(lp.min) or not _zero(iv.dom.min):
            return "the writer's loops do not match its iterators"
    for rd in reads:
        if not tvm_ffi.structural_equal(rd.region, wr.region):
            return "the writer reads the input at another element"
    return None


def _one(e) -> bool:
    return isinstance(e, tirx.IntImm) and e.value == 1


def _zero(e) -> bool:
    return isinstance(e, tirx.IntImm) and e.value == 0


def check_recompute(reference: relax.Function, rewritten: relax.Function,
                    mod: tvm.IRModule | None = None, gpu: bool = False) -> list[str]:
    """Ways ``rewritten`` computes something else than ``reference`` (empty: same values).

    Parameters
    ----------
    reference, rewritten : relax.Function
        The same function before and after recomputation (call_tir level).
    mod : IRModule, optional
        The rewritten module: its in-place kernels are checked (see the
        module notes); without it an in-place call counts as a new value.
    gpu : bool
        The step is built for a GPU: in-place kernels must be one block.

    Returns
    -------
    list of str
        Violations; the number of recomputed calls is not one.
    """
    if len(reference.params) != len(rewritten.params):
        return [f"the rewritten function has {len(rewritten.params)} params, the reference {len(reference.params)}"]
    ids: dict = {}
    ref, new = _Eval(reference, ids), _Eval(rewritten, ids, mod, gpu)
    ref_calls = ref.calls
    out = [f"reference: {p}" for p in ref.problems] + list(new.problems)
    if new.result != ref.result:
        out.append("the rewritten function returns other values than the reference")
    extra = [tok for tok in new.calls if tok not in ref_calls]
    out += [f"{new.calls[tok]} computes a value the reference never computes" for tok in extra[:8]]
    missing = [tok for tok in ref_calls if tok not in new.calls]
    out += [f"{ref_calls[tok]} of the reference is never computed" for tok in missing[:8]]
    return out


def recomputed_calls(reference: relax.Function, rewritten: relax.Function) -> int:
    """Calls in ``rewritten`` beyond the reference's count."""
    def count(f):
        return sum(isinstance(b.value, relax.Call) for blk in f.body.blocks for b in blk.bindings)
    return count(rewritten) - count(reference)
