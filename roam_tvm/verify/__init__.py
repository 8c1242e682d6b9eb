"""Independent checker for Relax memory plans (issue 14, item 2).

``check_plan(reference, planned, mod)`` executes both functions abstractly and returns the ways the
planned one can compute something else than the reference (empty list: same values). It shares no code
with the planner (``roam_tvm.passes``, ``roam_tvm.graph``, ``roam_tvm.layout``): it depends on TVM only.

Model
-----
Memory is a set of storages (every fresh allocation is its own storage). Every byte range carries the
token of the value written there. Tokens are content-addressed: a call's output token is
(callee, tokens of what it read, output position, device), parameters are ("param", i) and constants are
hashed by content, so the same computation gets the same token in both programs whatever the order or
the variable names. A read sees one value when its bytes are exactly that value's bytes, else a "mixed"
or "uninitialised" token. Per branch path and per shape assignment, the two programs must make the same
multiset of calls (callee + what each argument saw), return the same tokens and leave the same tokens in
every parameter (in-place updates of inputs). The first differing read is reported with what it saw and
what the reference saw. Anything not modelled gives "cannot verify: ..." (never an exception).

Constructs
----------
=============================================  ===========================================================
construct                                      model
=============================================  ===========================================================
``R.builtin.alloc_tensor(shape, dtype, dev)``  fresh storage on device ``dev``
``R.memory.alloc_storage(size, dev, ...)``     storage of ``size`` bytes on device ``dev``
``R.vm.alloc_storage(size, dev, dtype)``       same
``R.memory.alloc_tensor(s, off, shape, dt)``   new allocation in ``s`` at byte ``off``; out of bounds,
                                               killed storage or other device -> violation
``R.vm.alloc_tensor(s, off, shape, dt)``       same
``R.memory.kill_tensor/kill_storage``,         the object may not be used afterwards (views made before
``R.vm.kill_object``                           stay valid: they hold their own reference)
``R.memory.view(x, shape, dtype, off)``        view of x's bytes (missing args: x's own); outside x ->
                                               violation
``R.memory.ensure_zero_offset(x)``             view of x (same bytes)
``R.reshape(x, shape)``                        view of x; a byte-size change -> violation
``R.call_packed("vm.builtin.reshape", x, s)``  view of x (apache/tvm#20134)
``a = b``, ``R.match_cast``                    same value; match_cast binds new symbolic vars
tuples, nested tuples, ``t[i]``                tuples of values, no copy
``f(args...)`` f a PrimFunc                    writes the buffer params it stores to (or hands to a call);
                                               written + fresh -> output, written + not fresh -> in place
                                               (reads the old value); opaque body (no store) -> the fresh
                                               args are the outputs (CallTIRRewrite's DPS form)
``R.vm.call_tir_dyn(f, (args..., shape))``     as ``f(args..., shape)``
``R.call_packed(name, ...)``/``ExternFunc``,   returning nothing: the fresh tensor args are outputs, the
``call_pure_packed``,                          others are read; none fresh, or returning a tensor ->
``call_builtin_with_ctx``                      cannot verify (it may write in place or return a view);
                                               impure ``R.call_packed`` calls keep their order
KV-cache externs (``vm.builtin.attention_kv_`` ``_create/_append/_update`` read their tensor args only (they
``cache_*``)                                   copy them into the cache); ``_view`` given no tensor returns
                                               fresh memory (a view of the cache's own storage)
``R.call_tir / call_tir_inplace /``            leftovers before CallTIRRewrite: fresh outputs on the
``call_dps_packed``                            device CallTIRRewrite gives them; in-place indices write
                                               their argument (so a reference in this form can be compared
                                               with its lowered and planned versions)
``hint_on_device``, ``stop_lift_params``       the argument itself
other ``relax.*`` ops                          read every tensor argument, return fresh memory
``R.const``                                    read-only storage holding its bytes' hash; a write there
                                               -> violation
``If``                                         each branch path is executed separately (at most 32),
                                               keyed by the condition's token and the branch taken
symbolic shapes                                checked with every variable at its ``tir_var_upper_bound``
                                               and at its ``tir_var_lower_bound`` (default 1); with no
                                               upper bound, at lower bound + 7 (a sample, not a proof)
devices                                        storages carry their device; a value's token carries the
                                               device it was written on
calls of Relax functions (the result may       cannot verify
alias an argument), closures, nested
functions, ``call_inplace_packed``, other
``relax.memory.*``/``relax.vm.*``/
``relax.builtin.*`` ops
=============================================  ===========================================================

"Fresh" means: no byte of the argument has been written through its allocation yet. Bytes an
allocation never wrote read as uninitialised, whatever stale data the storage holds.
"""
from .api import PlanCheckError, check_module, check_plan, require_plan

__all__ = ["PlanCheckError", "check_module", "check_plan", "require_plan"]
