"""No import circles, module by module, in core, index and app: imports inside functions count too
(grimp, which import-linter runs on, sees them), so a circle cannot hide in a function body."""
from __future__ import annotations

import grimp


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in imports.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(imports):
        if v not in index:
            visit(v)
    return found


def test_the_finder_finds_a_circle_through_three_modules():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    graph = grimp.build_graph("core", "index", "app", cache_dir=None)
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert circles(imports) == []
