"""No import cycles in the product code (issue 36): no module of ``console`` or
``server_control`` reaches itself through imports, counting every import grimp sees
(module level, inside functions, and under ``TYPE_CHECKING``: a part that names its owner's
class only for its types still depends on it). A part that needs its owner takes a narrow
port (a ``Protocol`` of what it uses, in its own module) instead. The contracts in
pyproject.toml (`lint-imports`) keep the floors; this keeps the rooms one-way."""

from __future__ import annotations

import grimp


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_check_finds_a_cycle_and_only_a_cycle() -> None:
    """The negative control, in the test: a three-module ring is found, a chain is not."""
    graph = grimp.ImportGraph()
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.e", "p.d")):
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    chain = grimp.ImportGraph()
    chain.add_import(importer="p.a", imported="p.b")
    chain.add_import(importer="p.b", imported="p.c")
    assert cycles(chain) == []


def test_no_import_cycles_in_the_product() -> None:
    graph = grimp.build_graph("console", "server_control", cache_dir=None, exclude_type_checking_imports=False)
    assert len(graph.modules) > 200, "the walk found (almost) no modules"
    assert cycles(graph) == [], "modules that import each other (give the part a Protocol of what it uses)"
