"""roam_tvm.runtime's modules import each other one way (issue 13: no import circle)."""
import ast
import pathlib

import roam_tvm.runtime

RUNTIME = pathlib.Path(roam_tvm.runtime.__file__).parent


def _imports(path: pathlib.Path) -> set[str]:
    """Sibling modules a runtime file imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("roam_tvm.runtime."):
            out.add(node.module.split(".")[2])
    return out


def test_runtime_has_no_import_cycle():
    graph = {p.stem: _imports(p) & {q.stem for q in RUNTIME.glob("*.py")}
             for p in RUNTIME.glob("*.py") if p.stem != "__init__"}
    assert graph["pipeline"] and graph["build"], graph  # the parser sees imports
    state = {}

    def visit(mod, path):
        if state.get(mod) == "open":
            raise AssertionError(f"import cycle: {' -> '.join(path + [mod])}")
        if state.get(mod) != "done":
            state[mod] = "open"
            for dep in sorted(graph.get(mod, ())):
                visit(dep, path + [mod])
            state[mod] = "done"

    for mod in sorted(graph):
        visit(mod, [])
