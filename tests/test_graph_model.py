"""The plain graph model: liveness, aliases, in-place updates, JSON."""
import pytest

from roam_tvm.graph import Graph, GraphBuilder, GraphError


def small_step():
    b = GraphBuilder("step")
    w = b.tensor(100, "param", "w")
    x = b.tensor(10, "input", "x")
    [h] = b.op([x, w], [40], name="fwd")
    b.op([h], [], name="probe")  # an op that defines nothing
    [y] = b.op([h], [30], name="act")
    [g] = b.op([y, x], [100], name="grad")
    b.op([w, g], [], kind="update", inplace=[w], name="update")
    [loss] = b.op([y], [4], name="loss")
    b.tensors[loss].is_output = True
    return b.build()


def test_liveness_and_peak():
    g = small_step()
    assert g.always_live_bytes == 110
    life = g.lifetimes()
    # h: defined by fwd (0), last read by act (2); the loss is returned: lives to the end.
    assert life[2] == (0, 2)
    assert life[max(life)][1] == len(g.ops) - 1
    assert g.peak() == max(g.live_profile())


def test_update_runs_after_every_reader_of_the_old_value():
    g = small_step()
    update = next(op.id for op in g.ops if op.kind == "update")
    fwd = next(op.id for op in g.ops if op.name == "fwd")
    assert fwd in g.predecessors[update]
    with pytest.raises(GraphError, match="before its dependency"):
        order = list(range(len(g.ops)))
        order.remove(update)
        order.insert(0, update)
        g.check_order(order)


def test_views_keep_their_base_alive():
    b = GraphBuilder()
    x = b.tensor(8, "input")
    [a] = b.op([x], [64])
    v = b.tensor(0, alias_of=a)
    b.ops[-1].outputs.append(v)
    [c] = b.op([x], [32])
    [d] = b.op([v, c], [4])
    b.tensors[d].is_output = True
    g = b.build()
    assert g.lifetimes()[a] == (0, 2)  # read through the view by the last op
    assert g.peak() == 8 + 64 + 32 + 4


def test_json_round_trip(tmp_path):
    g = small_step()
    path = tmp_path / "g.json"
    g.save(str(path))
    h = Graph.load(str(path))
    assert h.peak() == g.peak() and h.predecessors == g.predecessors


def test_cycles_and_bad_ids_are_clear_errors():
    b = GraphBuilder()
    x = b.tensor(4, "input")
    b.op([x], [4])
    b.ops[0].after = [0]
    with pytest.raises(GraphError, match="control dependency"):
        b.build()
    b = GraphBuilder()
    b.op([7], [4])
    with pytest.raises(GraphError, match="unknown tensor"):
        b.build()


def test_asap_alap_fixed_positions():
    b = GraphBuilder()
    x = b.tensor(4, "input")
    [a] = b.op([x], [4])
    [c] = b.op([a], [4])
    [d] = b.op([a], [4])
    b.op([c, d], [4])
    asap, alap = b.build().asap_alap()
    assert (asap[0], alap[0]) == (0, 0) and (asap[3], alap[3]) == (3, 3)
    assert asap[1] == 1 and alap[1] == 2


def test_aligned_rounds_allocated_tensors_only():
    from roam_tvm.graph import GraphBuilder

    b = GraphBuilder("g")
    w = b.tensor(10, "param")
    x = b.tensor(7, "input")
    [h] = b.op([x, w], [65])
    [y] = b.op([h], [64])
    b.tensors[y].is_output = True
    g = b.build()
    a = g.aligned(64)
    assert [t.size for t in a.tensors] == [10, 7, 128, 64]  # param and input keep their size
    assert a.peak() == g.peak() + 63 and len(a.ops) == len(g.ops)
    assert g.aligned(1) is g
