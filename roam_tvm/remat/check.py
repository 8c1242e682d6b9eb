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
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax

__all__ = ["check_recompute", "recomputed_calls"]


class _Eval:
    """Tokens of one function's bindings (interned to ints, so deep DAGs stay cheap)."""

    def __init__(self, func: relax.Function, ids: dict):
        self.ids = ids  # shared by both functions, so equal values get equal tokens
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
            tok = self._intern(key)
            self.calls.setdefault(tok, where)
            if name == "relax.call_tir_inplace" and len(e.args) > 1:
                fields = e.args[1].fields if isinstance(e.args[1], relax.Tuple) else [e.args[1]]
                for ix in e.attrs.inplace_indices:
                    if 0 <= int(ix) < len(fields) and isinstance(fields[int(ix)], relax.Var):
                        self.consumed[fields[int(ix)]] = where
            return tok
        return self._intern(("leaf", type(e).__name__, tvm_ffi.structural_hash(e)))


def check_recompute(reference: relax.Function, rewritten: relax.Function) -> list[str]:
    """Ways ``rewritten`` computes something else than ``reference`` (empty: same values).

    Parameters
    ----------
    reference, rewritten : relax.Function
        The same function before and after recomputation (call_tir level).

    Returns
    -------
    list of str
        Violations; the number of recomputed calls is not one.
    """
    if len(reference.params) != len(rewritten.params):
        return [f"the rewritten function has {len(rewritten.params)} params, the reference {len(reference.params)}"]
    ids: dict = {}
    ref, new = _Eval(reference, ids), _Eval(rewritten, ids)
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
