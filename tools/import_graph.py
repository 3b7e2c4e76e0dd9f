"""The import graph of one package by room: modules per room (a subpackage, or the package's root
modules), the arrows between rooms and the circles among them (grimp, the graph import-linter reads).

    python -m tools.import_graph index          # the rooms of index/
    python -m tools.import_graph app.gui        # the rooms of app/gui/

A room is the first name below the package (`index.store.base` is in `store`); a module at the
package's root is a room of its own, marked `(root)`. Arrows count module-to-module imports,
lazy imports inside functions included.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def room_of(module: str, package: str, packages: set[str]) -> str:
    rest = module[len(package) + 1:]
    if not rest:
        return "(__init__)"
    first = rest.split(".")[0]
    return first if f"{package}.{first}" in packages else f"{first} (root)"


def rooms_and_arrows(package: str):
    import grimp
    top = package.split(".")[0]
    graph = grimp.build_graph(top, include_external_packages=False, cache_dir=None)
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    packages = {m for m in modules if (ROOT / m.replace(".", "/") / "__init__.py").is_file()}
    rooms = Counter(room_of(m, package, packages) for m in modules if m != package)
    arrows = Counter()
    for m in modules:
        for imported in graph.find_modules_directly_imported_by(m):
            if imported.startswith(package + ".") and imported != m:
                a, b = room_of(m, package, packages), room_of(imported, package, packages)
                if a != b:
                    arrows[(a, b)] += 1
    return rooms, arrows


def circles(arrows) -> list[tuple[str, str]]:
    """Pairs of rooms that import each other (a circle of two; longer ones show as several)."""
    return sorted({tuple(sorted((a, b))) for (a, b) in arrows if (b, a) in arrows})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rooms, arrows = rooms_and_arrows(args.package)
    root_modules = sum(n for r, n in rooms.items() if r.endswith("(root)"))
    print(f"{args.package}: {sum(rooms.values())} modules, {root_modules} at its root, "
          f"{len([r for r in rooms if not r.endswith('(root)')])} rooms")
    for room, n in sorted(rooms.items()):
        print(f"  {room:28s} {n:3d} modules")
    print(f"arrows between rooms: {len(arrows)} ({sum(arrows.values())} imports)")
    for (a, b), n in sorted(arrows.items()):
        print(f"  {a} -> {b} ({n})")
    both = circles(arrows)
    print(f"circles: {len(both)}" + "".join(f"\n  {a} <-> {b}" for a, b in both))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
