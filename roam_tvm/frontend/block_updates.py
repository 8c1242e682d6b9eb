"""A gradient given as row blocks (``concat(blocks, axis=0)``) is applied block by block.

``rnn_gate_grads.py`` returns an RNN weight's gradient as its gates' rows, stacked. Stacking
them would build a whole-weight copy at the end; instead each block gets its own in-place
update of the parameter's (and its optimizer states') rows ``[offset, offset + rows)``. The
optimizers are elementwise, so the values are those of one whole update. The updates of one
parameter form a chain (each reads the previous one's outputs), so none reads a parameter
that another has already written, and each block dies at its own update.
"""
from __future__ import annotations

from tvm import relax

from .optim import Optimizer, make_kernel
from .relax_shapes import shape_tuple
from .relax_walk import op_name


def row_blocks(grad: relax.Expr, defs: dict, param: relax.Var) -> list | None:
    """``[(block, offset), ...]`` when ``grad`` is bound to ``concat(blocks, axis=0)`` of two
    or more vars of ``param``'s dtype whose rows add up to the parameter's; else None."""
    value = defs.get(grad) if isinstance(grad, relax.Var) else None
    pshape = shape_tuple(param)
    if op_name(value) != "relax.concat" or pshape is None or not pshape:
        return None
    if int(value.attrs.axis) % len(pshape) != 0:
        return None
    tup = value.args[0]
    tup = defs.get(tup, tup) if isinstance(tup, relax.Var) else tup
    if not isinstance(tup, relax.Tuple) or len(tup.fields) < 2:
        return None
    out, offset = [], 0
    for f in tup.fields:
        fshape = shape_tuple(f)
        if (not isinstance(f, relax.Var) or fshape is None or fshape[1:] != pshape[1:]
                or str(f.ty.dtype) != str(param.ty.dtype)):
            return None
        out.append((f, offset))
        offset += fshape[0]
    return out if offset == pshape[0] else None


def _offset_rows(line: str, tensors: list[str], idx: str, offset: int) -> str:
    """``line`` with every full-size tensor's ``[idx]`` read at ``offset`` rows further."""
    first, *rest = idx.split(", ")
    shifted = ", ".join([f"{first} + T.int64({offset})"] + rest)
    for t in tensors:
        line = line.replace(f"{t}[{idx}]", f"{t}[{shifted}]")
    return line


def block_kernel(opt: Optimizer, dtype: str, offset: int, pshape: tuple, gshape: tuple):
    """``opt``'s in-place update of rows ``[offset, offset + gshape[0])``: ``(name, PrimFunc)``.

    Arguments as :func:`~roam_tvm.frontend.optim.optimizer_kernel`'s (``p, g, *states,
    *hypers``); ``p`` and the states are whole (``pshape``), ``g`` is the block (``gshape``),
    and the loops run over it. The shapes are static: FuseTIR refuses a fused group that passes
    one var to a shape-generic buffer and to a producer's static one ("Inconsistent buffers ...
    mapped to the same relax var"; a bf16 RNN's transposed gate block fused into its update).
    """
    states = [s if s != "momentum_buffer" else "buf" for s in opt.state_suffixes]
    whole = ["p"] + states
    fname = f"{opt.name}_update_{dtype}_{'x'.join(map(str, pshape))}_rows{offset}_{gshape[0]}"

    def body(dt: str, idx: str) -> list[str]:
        return [_offset_rows(line, whole, idx, offset) for line in opt.kernel_body(dt, idx)]

    shapes = {**{t: pshape for t in whole}, "g": gshape}
    return fname, make_kernel(fname, len(pshape), dtype, ["p", "g"] + states, opt.hyper_names, body,
                              shapes=shapes, grid=gshape)
