"""The roofline/bytes cost of a kernel that reads through a view counts the bytes it reads."""
from roam_tvm.graph.model import GraphBuilder, Op
from roam_tvm.remat.cost import op_bytes, op_costs


def test_a_kernel_reading_a_view_pays_for_its_storage():
    b = GraphBuilder()
    x = b.tensor(1000, "input")
    a, = b.op([x], [400], "make")
    v = b.tensor(0, alias_of=a, name="a_view")  # a tuple field or a reshape: size 0 in the memory model
    b.ops.append(Op(len(b.ops), "view", [a], [v], 0, "view"))
    y, = b.op([v], [400], "transpose")
    z, = b.op([v, a], [400], "both")  # one storage read twice counts once
    g = b.build()
    assert op_bytes(g, g.ops[1]) == 0  # the view op moves nothing
    assert op_bytes(g, g.ops[2]) == 800
    assert op_bytes(g, g.ops[3]) == 800
    assert op_costs(g, "bytes")[2] == 800.0
