"""A drawing of the tree: which folder imports which, from the code itself (grimp, the import graph
import-linter builds), at the grain a reader sees — every top-level package, and each sub-package
or module directly inside fedcore/, application/, data_adapters/ and dashboard/. A `__main__`
module is an entry point, a node of its own (`python -m fedcore` hands the application's command
line the dashboard's reports). An arrow runs up when two nodes reach each other: then no order of
the folders has every import pointing down.

    .venv/bin/python -m tests.import_graph          the nodes, top first, each with what it imports
    .venv/bin/python -m tests.import_graph --dot    the same as Graphviz (dot -Tsvg > layers.svg)
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fedcore", "application", "data_adapters", "dashboard", "views")
OPENED = ("fedcore", "application", "data_adapters", "dashboard")  # drawn one level down


def node_of(module: str) -> str:
    parts = module.split(".")
    if parts[-1] == "__main__":
        return module
    return ".".join(parts[:2]) if parts[0] in OPENED and len(parts) > 1 else parts[0]


def package_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """node -> the nodes it imports (imports for annotations only are no dependency at run time)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph(*packages, cache_dir=None, exclude_type_checking_imports=True)
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        source = node_of(module)
        edges[source]
        for imported in graph.find_modules_directly_imported_by(module):
            if node_of(imported) != source:
                edges[source].add(node_of(imported))
    return dict(edges)


def upward_arrows(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every arrow between two nodes that reach each other (an arrow of a cycle runs up)."""
    reach = {node: _reachable(edges, node) for node in edges}
    return sorted((a, b) for a, targets in edges.items() for b in targets if a in reach.get(b, set()))


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for other in edges.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def ranked(edges: dict[str, set[str]]) -> list[str]:
    """The nodes top first: a node's rank is the longest chain of imports below it."""
    depth: dict[str, int] = {}

    def below(node: str, path: frozenset[str] = frozenset()) -> int:
        if node not in depth:
            depth[node] = 1 + max((below(o, path | {node}) for o in edges.get(node, ()) if o not in path),
                                  default=-1)
        return depth[node]

    return sorted(edges, key=lambda node: (-below(node), node))


def text(edges: dict[str, set[str]]) -> str:
    up = set(upward_arrows(edges))
    lines = []
    for node in ranked(edges):
        targets = [f"{t} (UP)" if (node, t) in up else t for t in ranked(edges) if t in edges[node]]
        lines.append(f"{node}\n    -> {', '.join(targets) or '(nothing of ours)'}")
    lines.append(f"\n{len(up)} arrow(s) running up" + (": " + ", ".join(f"{a} -> {b}" for a, b in sorted(up))
                                                       if up else ""))
    return "\n".join(lines)


def dot(edges: dict[str, set[str]]) -> str:
    up = set(upward_arrows(edges))
    lines = ["digraph layers {", "  rankdir=TB; node [shape=box, fontname=Helvetica];"]
    for node in ranked(edges):
        for target in sorted(edges[node]):
            style = ' [color=red, penwidth=2, label="up"]' if (node, target) in up else ""
            lines.append(f'  "{node}" -> "{target}"{style};')
    return "\n".join(lines + ["}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.import_graph", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dot", action="store_true", help="Graphviz instead of text")
    args = parser.parse_args(argv)
    edges = package_graph()
    print(dot(edges) if args.dot else text(edges))
    return 1 if upward_arrows(edges) else 0


if __name__ == "__main__":
    sys.exit(main())
