"""No import loops between any two modules of cvm and mrt, counting imports inside functions (issue 29,
item 5). lint-imports (pyproject.toml, scripts/test.sh) checks loops between sibling modules and the
layers; this also catches a module that imports its own package back (mrt.float_ops.unary reading
mrt.float_ops, whose __init__ imports it), which no sibling check sees."""
from __future__ import annotations

import grimp


def loops(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while not component or component[-1] != v:
                        component.append(stack.pop())
                        on.discard(component[-1])
                    if len(component) > 1:
                        found.append(sorted(component))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return found


def test_no_module_imports_itself_back():
    graph = grimp.build_graph("cvm", "mrt", cache_dir=None)
    assert loops(graph) == []


def test_a_loop_is_found():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert loops(graph) == [["p.a", "p.b", "p.c"]]
