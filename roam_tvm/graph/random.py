"""Random graphs for tests and benchmarks (no TVM).

Two generators:

* :func:`random_dag` -- an unstructured DAG of compute ops over random-sized
  tensors, with a few always-live inputs and one or more outputs.
* :func:`random_training_graph` -- something that looks like one training step:
  a forward chain with skip connections, a loss, a mirrored backward pass that
  reads the saved activations, parameters that are always live, weight
  transposes that only read parameters (the "always ready" ops that trip naive
  list schedulers), and optionally in-place optimizer updates
  (``kind="update"``, ``inplace=[param, m, v]``, with workspace).

Both are deterministic for a given ``seed``.
"""
from __future__ import annotations

import random as _random

from .model import Graph, GraphBuilder

__all__ = ["random_dag", "random_training_graph", "repeated_blocks", "reorder_graph", "shuffled_program"]


def _view(b: GraphBuilder, src: int, name: str) -> int:
    """Add a ``view`` op whose single output aliases ``src``."""
    from .model import Op

    t = b.tensor(0, alias_of=src, name=f"{b.tensors[src].name}_view")
    b.ops.append(Op(len(b.ops), name, [src], [t], 0, "view", []))
    return t


def random_dag(n_ops: int, seed: int = 0, *, max_inputs: int = 3, n_inputs: int = 2,
               size_range: tuple[int, int] = (1, 8), unit: int = 1024,
               workspace_prob: float = 0.1, output_prob: float = 0.05,
               locality: int = 8, name: str | None = None) -> Graph:
    """A random DAG of ``n_ops`` compute ops.

    Parameters
    ----------
    n_ops : int
        Number of ops (>= 1).
    seed : int
        Random seed.
    max_inputs : int
        Each op reads 1..``max_inputs`` earlier tensors.
    n_inputs : int
        Number of always-live ``input`` tensors.
    size_range : (int, int)
        Tensor sizes are drawn uniformly from this range (inclusive) and
        multiplied by ``unit``.
    unit : int
        Byte unit of sizes.
    workspace_prob : float
        Probability that an op has a workspace.
    output_prob : float
        Probability that a tensor is a function output (the last one always is).
    locality : int
        Inputs are mostly drawn from the last ``locality`` tensors, which gives
        chain-like graphs with some long edges.
    name : str, optional
        Graph name.

    Returns
    -------
    Graph
    """
    if n_ops < 1:
        raise ValueError("n_ops must be >= 1")
    rng = _random.Random(seed)
    b = GraphBuilder(name or f"random_dag_{n_ops}_{seed}")
    pool = [b.tensor(rng.randint(*size_range) * unit, kind="input", name=f"in{i}")
            for i in range(max(1, n_inputs))]
    produced: list[int] = []
    for i in range(n_ops):
        k = rng.randint(1, max_inputs)
        cands = pool + produced
        ins = set()
        for _ in range(k):
            if produced and rng.random() < 0.8:
                ins.add(produced[-1 - min(len(produced) - 1, int(rng.expovariate(1.0 / locality)))])
            else:
                ins.add(rng.choice(cands))
        n_out = 1 if rng.random() < 0.85 else 2
        ws = rng.randint(*size_range) * unit if rng.random() < workspace_prob else 0
        outs = b.op(sorted(ins), [rng.randint(*size_range) * unit for _ in range(n_out)],
                    name=f"op{i}", workspace=ws)
        produced.extend(outs)
    for t in produced:
        if rng.random() < output_prob:
            b.tensors[t].is_output = True
    b.tensors[produced[-1]].is_output = True
    return b.build()


def random_training_graph(n_ops: int, seed: int = 0, *, updates: bool = True,
                          transposes: bool = True, skip_prob: float = 0.2,
                          act_range: tuple[int, int] = (2, 16), param_range: tuple[int, int] = (1, 8),
                          unit: int = 1 << 16, adam_workspace: float = 2.0,
                          views: bool = True, program: str = "natural",
                          name: str | None = None) -> Graph:
    """A random graph shaped like one training step.

    Per layer ``i``: a forward op ``fwd_i`` reading the previous activation (and
    sometimes an earlier one, a skip connection) and parameter ``w_i``; the
    backward op ``bwd_i`` reading the incoming gradient, the saved activation(s)
    and (through an optional transposed copy ``wT_i``) the weight, producing the
    gradient of its inputs and ``g_i``; and optionally the Adam-like update
    ``upd_i`` reading ``g_i`` and updating ``w_i``, ``m_i``, ``v_i`` in place
    with ``adam_workspace * |w_i|`` of temporaries. Skip connections add a
    gradient accumulation op. The loss is returned.

    Parameters
    ----------
    n_ops : int
        Approximate number of ops (the result has about this many, at least 4).
    seed : int
        Random seed.
    updates : bool
        Add in-place optimizer updates.
    transposes : bool
        Add weight-transpose ops that only read parameters.
    skip_prob : float
        Probability of a skip connection per layer.
    act_range, param_range : (int, int)
        Activation / parameter sizes in ``unit`` bytes.
    unit : int
        Byte unit.
    adam_workspace : float
        Update workspace as a multiple of the parameter size.
    views : bool
        Sometimes read a free view (reshape) of an activation instead of it.
    program : str
        The program order: ``"natural"`` (each update right after its
        gradient, transposes right before their reader), ``"updates_last"``
        (all updates after the backward pass, transposes first -- what a naive
        compiler emits), or ``"random"`` (a random topological order).
    name : str, optional
        Graph name.

    Returns
    -------
    Graph
    """
    rng = _random.Random(seed)
    per_layer = 2 + (1 if updates else 0) + (0.5 if transposes else 0) + skip_prob * 1.0 \
        + (0.3 if views else 0)
    n_layers = max(1, int(round((n_ops - 3) / per_layer)))
    b = GraphBuilder(name or f"random_training_{n_ops}_{seed}")
    x = b.tensor(rng.randint(*act_range) * unit, kind="input", name="x")
    target = b.tensor(unit, kind="input", name="target")
    params, states = [], []
    for i in range(n_layers):
        ps = rng.randint(*param_range) * unit
        params.append(b.tensor(ps, kind="param", name=f"w{i}"))
        if updates:
            states.append((b.tensor(ps, kind="state", name=f"m{i}"),
                           b.tensor(ps, kind="state", name=f"v{i}")))
    acts = [x]
    skips: list[int | None] = []
    fwd_inputs = []
    for i in range(n_layers):
        ins = [acts[-1], params[i]]
        skip = None
        if len(acts) > 2 and rng.random() < skip_prob:
            skip = rng.randrange(0, len(acts) - 1)
            ins.append(acts[skip])
        skips.append(skip)
        fwd_inputs.append(ins)
        src = ins[0]
        if views and rng.random() < 0.3 and src != x:
            src = _view(b, src, f"view{i}")
            ins = [src] + ins[1:]
            fwd_inputs[-1] = ins
        (a,) = b.op(ins, [rng.randint(*act_range) * unit], name=f"fwd{i}")
        acts.append(a)
    (loss,) = b.op([acts[-1], target], [unit], name="loss")
    b.tensors[loss].is_output = True
    (grad,) = b.op([loss, acts[-1]], [b.tensors[acts[-1]].size], name="loss_grad")
    # pending gradient contributions per activation index (skip connections)
    pending: dict[int, list[int]] = {}
    grads_of_act = {len(acts) - 1: grad}
    for i in reversed(range(n_layers)):
        g_out = grads_of_act[i + 1]
        for extra in pending.pop(i + 1, []):
            (g_out,) = b.op([g_out, extra], [b.tensors[g_out].size], name=f"acc{i + 1}")
        w = params[i]
        if transposes and rng.random() < 0.5:
            (wt,) = b.op([w], [b.tensors[w].size], name=f"transpose{i}")
        else:
            wt = w
        saved = [t for t in fwd_inputs[i] if t != params[i]]
        in_sizes = [b.tensors[acts[i]].size]
        if skips[i] is not None:
            in_sizes.append(b.tensors[acts[skips[i]]].size)
        outs = b.op([g_out, wt, *saved], in_sizes + [b.tensors[w].size], name=f"bwd{i}",
                    workspace=rng.choice([0, 0, unit]))
        g_w = outs[-1]
        grads_of_act[i] = outs[0]
        if skips[i] is not None:
            pending.setdefault(skips[i], []).append(outs[1])
        if updates:
            m, v = states[i]
            b.op([w, g_w, m, v], [], name=f"adam{i}", kind="update", inplace=[w, m, v],
                 workspace=int(adam_workspace * b.tensors[w].size))
    g = b.build()
    if program == "natural":
        return g
    if program == "updates_last":
        first = [o.id for o in g.ops if o.name.startswith("transpose")]
        last = [o.id for o in g.ops if o.kind == "update"]
        mid = [o.id for o in g.ops if o.kind != "update" and not o.name.startswith("transpose")]
        return reorder_graph(g, first + mid + last)
    if program == "random":
        return shuffled_program(g, seed)
    raise ValueError(f"unknown program order {program!r}; use natural, updates_last or random")


def repeated_blocks(n_layers: int, *, branches: int = 2, depth: int = 3, unit: int = 1 << 16,
                    interleave: bool = True, name: str | None = None) -> Graph:
    """Identical transformer-like blocks whose program order is bad inside each block.

    Block ``i`` reads the residual stream ``x_i`` and its own (always-live)
    weight; ``branches`` parallel chains of ``depth`` ops each (an attention-
    and an MLP-like branch: a big first intermediate, then smaller ones) are
    joined by a residual add that produces ``x_{i+1}``. With ``interleave`` the
    program order runs the branches step by step in lockstep, so the big
    intermediates of all branches are live together; running one branch to
    its end before starting the next is optimal. Each residual add sits at
    the same position in every order, so every block is one segment, and
    all segments are structurally identical (names differ only in digits).

    Parameters
    ----------
    n_layers : int
    branches, depth : int
        Chains per block and ops per chain (>= 1).
    unit : int
        Byte unit; the stream is 4 units, a chain's k-th tensor 16 / 2**k units (at least 1).
    interleave : bool
        Lockstep program order (bad) or branch after branch (optimal).
    name : str, optional

    Returns
    -------
    Graph
    """
    if n_layers < 1 or branches < 1 or depth < 1:
        raise ValueError("n_layers, branches and depth must be >= 1")
    b = GraphBuilder(name or f"repeated_blocks_{n_layers}x{branches}x{depth}")
    x = b.tensor(4 * unit, kind="input", name="x0")
    for i in range(n_layers):
        w = b.tensor(unit, kind="param", name=f"w{i}")
        heads = [x] * branches
        steps = [(c, k) for k in range(depth) for c in range(branches)] if interleave else \
            [(c, k) for c in range(branches) for k in range(depth)]
        for c, k in steps:
            size = max(1, 16 >> k) * unit
            (heads[c],) = b.op([heads[c], w], [size], name=f"l{i}.b{c}.op{k}")
        (x,) = b.op([x, *heads], [4 * unit], name=f"l{i}.add")
    b.tensors[x].is_output = True
    return b.build()


def shuffled_program(g: Graph, seed: int = 0) -> Graph:
    """The same graph with a uniformly random ready op chosen at each step as program order."""
    rng = _random.Random(seed)
    indeg = [len(p) for p in g.predecessors]
    ready = [i for i, d in enumerate(indeg) if d == 0]
    order = []
    while ready:
        k = rng.randrange(len(ready))
        ready[k], ready[-1] = ready[-1], ready[k]
        u = ready.pop()
        order.append(u)
        for v in g.successors[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return reorder_graph(g, order)


def reorder_graph(g: Graph, order: list[int]) -> Graph:
    """A copy of ``g`` whose program order is ``order`` (ops renumbered, tensors kept)."""
    from dataclasses import replace

    g.check_order(order)
    new_id = {o: i for i, o in enumerate(order)}
    ops = []
    for i, o in enumerate(order):
        op = replace(g.ops[o], id=i, inputs=list(g.ops[o].inputs), outputs=list(g.ops[o].outputs),
                     inplace=list(g.ops[o].inplace))
        if getattr(op, "after", None):
            op.after = sorted(new_id[a] for a in op.after)
        ops.append(op)
    tensors = [replace(t) for t in g.tensors]
    return Graph(ops, tensors, name=g.name, meta=dict(g.meta))
