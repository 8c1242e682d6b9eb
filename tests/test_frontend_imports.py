"""roam_tvm.frontend's modules import each other one way (issue 13: no import circle)."""
import ast
import pathlib

import roam_tvm

FRONTEND = pathlib.Path(roam_tvm.__file__).parent / "frontend"


def _siblings(path: pathlib.Path, names: set) -> set:
    """Frontend modules a file imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 1:
            mods = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
        elif (node.module or "").startswith("roam_tvm.frontend."):
            mods = [node.module.split(".")[2]]
        elif node.module == "roam_tvm.frontend":
            mods = ["__init__"]
        else:
            mods = []
        out.update(m for m in mods if m in names)
    return out


def _cycle(graph: dict) -> list | None:
    state, stack = {}, []

    def visit(mod):
        if state.get(mod) == "open":
            return stack[stack.index(mod):] + [mod]
        if state.get(mod) == "done":
            return None
        state[mod] = "open"
        stack.append(mod)
        for dep in sorted(graph.get(mod, ())):
            found = visit(dep)
            if found:
                return found
        stack.pop()
        state[mod] = "done"
        return None

    for mod in sorted(graph):
        found = visit(mod)
        if found:
            return found
    return None


def test_frontend_has_no_import_cycle():
    names = {p.stem for p in FRONTEND.glob("*.py")}
    graph = {p.stem: _siblings(p, names) - {p.stem} for p in FRONTEND.glob("*.py")}
    assert "assemble" in graph["step"] and "step" in graph["torch_import"], graph  # parser works
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
