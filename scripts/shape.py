#!/usr/bin/env python3
"""The code's shape, in the numbers issue 61 asks for; anyone can rerun it (no import of minimult, no torch):

    python scripts/shape.py            # the numbers, and each import cycle
    python scripts/shape.py --verbose  # also every import inside a function, private-name import, registry

- lines in minimult/ (all .py files) and of model.py, each split into code, docstrings, blank lines and comments;
  lines longer than 120 characters;
- `Registry(...)` instances, and other module-level dict/tuple "registries": an UPPER_CASE name bound at
  module level to a table of components (`_component_table`: an empty dict that registering fills, a dict of
  >= 2 names to non-constant values, a dict comprehension, or a tuple of >= 2 constructed objects);
- import cycles among minimult modules, from an AST graph of module-level imports (including those under
  try/if at module level, excluding `if TYPE_CHECKING:` blocks, which never run). `from P import m` is an
  edge to the module P.m where that is a module, else to P; importing a.b.c runs a/__init__ and a/b/__init__
  first, so those are edges too, except for the importer's own packages (already imported when it runs: a
  package's __init__ may import its own submodules);
- imports inside functions (or methods) outside the CLI (minimult/cli.py and the cli_*.py beside it: cli_help.py,
  cli_sweep.py, whose commands import their work late so that `minimult --help` stays fast): each
  `import`/`from ... import` statement;
- imports of another module's private name: `from M import _x` (not dunder names) where M is a minimult
  module other than the importing one, and `M._x` attribute reads on a minimult module bound by `import`.

`tests/test_shape.py` asserts 0 cycles and 0 private-name imports through the functions below.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minimult"
LONG = 120


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file, for every .py file of the package."""
    return {module_name(p, package.parent): p for p in sorted(package.rglob("*.py"))}


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree: ast.Module):
    """Import statements that run when the module is imported: at module level, also under try/if/with
    (not under `if TYPE_CHECKING:`), never inside a function or class body's functions."""
    def walk(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    yield from walk(node.body)
                yield from walk(node.orelse)
            elif isinstance(node, ast.Try) or (sys.version_info >= (3, 11) and isinstance(node, ast.TryStar)):
                yield from walk(node.body)
                for handler in node.handlers:
                    yield from walk(handler.body)
                yield from walk(node.orelse)
                yield from walk(node.finalbody)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                yield from walk(node.body)
    yield from walk(tree.body)


def function_imports(tree: ast.Module):
    """Import statements inside a function or method (at any depth)."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                if in_function:
                    found.append(child)
            else:
                visit(child, in_function)
    visit(tree, False)
    return found


def resolve_from(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a `from ... import` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def targets(node, importer: str, is_package: bool, known) -> list[str]:
    """The minimult modules an import statement imports (by the rule in the module docstring)."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                out.append(name)
        return out
    base = resolve_from(node, importer, is_package)
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in known:
            out.append(sub)
        elif base in known:
            out.append(base)
    return out


def with_parents(target: str, importer: str, is_package: bool, known) -> set[str]:
    """`target` and the packages above it that importing it runs, less the importer's own packages (already
    imported when the importer runs) and the importer itself."""
    own = importer if is_package else importer.rpartition(".")[0]
    mine = {".".join(own.split(".")[:i]) for i in range(1, len(own.split(".")) + 1)} | {importer}
    parts = target.split(".")
    out = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return {m for m in out if m in known and m not in mine}


def import_graph(package: Path = PACKAGE, inner: bool = False) -> dict[str, set[str]]:
    """Module -> minimult modules it imports at module level (`inner`: also inside functions, where an import
    dodges a cycle by running late)."""
    mods = modules(package)
    graph = {}
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        edges = set()
        tree = parse(path)
        for node in list(module_level_imports(tree)) + (function_imports(tree) if inner else []):
            for target in targets(node, name, is_package, mods):
                edges.update(with_parents(target, name, is_package, mods))
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, in sorted order: each
    is a set of modules that import each other, directly or through one another."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through a component (first module back to itself), for printing."""
    inside = set(component)
    start = component[0]
    # breadth-first from each successor of start back to start
    from collections import deque
    for first in sorted(graph[start] & inside):
        parents = {first: None}
        queue = deque([first])
        while queue:
            v = queue.popleft()
            if v == start:
                path = []
                while v is not None:
                    path.append(v)
                    v = parents[v]
                return [start] + path[::-1]
            for w in sorted(graph[v] & inside):
                if w not in parents:
                    parents[w] = v
                    queue.append(w)
    return component


def is_cli(name: str, package: str = "minimult") -> bool:
    """The CLI: `<package>.cli` and its `<package>.cli_*` modules (argument parsing, imports late by design)."""
    return name == f"{package}.cli" or name.startswith(f"{package}.cli_")


def inner_imports(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """(module, line, statement) for every import inside a function, outside the CLI (`is_cli`)."""
    out = []
    for name, path in modules(package).items():
        if is_cli(name, package.name):
            continue
        for node in function_imports(parse(path)):
            out.append((name, node.lineno, ast.unparse(node)))
    return out


# packages an import inside a function may load late on purpose: heavy (torch: seconds) or optional (ray)
HEAVY = ("torch", "transformers", "matplotlib", "scipy", "ray", "nltk", "pysword", "pythonbible", "PIL", "fasttext")


def _third_party(node) -> list[str]:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] * (not node.level)
    return [n.split(".")[0] for n in names]


def heavy_modules(package: Path = PACKAGE) -> set[str]:
    """minimult modules whose import loads a HEAVY package, at their module level or through a minimult module
    they import there (e.g. minimult.model: torch)."""
    mods, graph = modules(package), import_graph(package)
    heavy = {name for name, path in mods.items()
             if any(root in HEAVY for node in module_level_imports(parse(path)) for root in _third_party(node))}
    grew = True
    while grew:
        more = {m for m, edges in graph.items() if m not in heavy and edges & heavy}
        heavy |= more
        grew = bool(more)
    return heavy


def late_on_purpose(statement: str, importer: str, heavy: set[str], package: Path = PACKAGE) -> bool:
    """Whether an import inside a function loads a HEAVY package, directly or through a heavy minimult module."""
    node = ast.parse(statement).body[0]
    mods = modules(package)
    path = mods[importer]
    return (any(root in HEAVY for root in _third_party(node))
            or bool(set(targets(node, importer, path.name == "__init__.py", mods)) & heavy))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """(module, line, what) for every use of another minimult module's private name (module docstring)."""
    mods = modules(package)
    out = []
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        tree = parse(path)
        bound = {}  # local name -> minimult module, from `import a.b as c` / `from a import b` (a module)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = resolve_from(node, name, is_package)
                if not (base == "minimult" or base.startswith("minimult.")):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in mods:
                        bound[alias.asname or alias.name] = sub
                        if _private(alias.name):
                            out.append((name, node.lineno, f"from {base} import {alias.name} (private module)"))
                    elif _private(alias.name) and base != name:
                        out.append((name, node.lineno, f"from {base} import {alias.name}"))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods and alias.asname:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and bound.get(node.value.id, name) != name):
                out.append((name, node.lineno, f"{node.value.id}.{node.attr} ({bound[node.value.id]})"))
    return sorted(set(out))


def _component_table(value: ast.expr) -> bool:
    """An empty dict display (filled by registering), a dict display of >= 2 string keys whose values are not
    all plain constants (functions, objects, settings: name -> component), a dict comprehension, or a tuple
    display of >= 2 constructed objects."""
    if isinstance(value, ast.DictComp):
        return True
    if isinstance(value, ast.Dict):
        if not value.keys:
            return True  # an empty dict that register() fills
        named = all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys)
        return len(value.keys) >= 2 and named and not all(isinstance(v, ast.Constant) for v in value.values)
    if isinstance(value, ast.Tuple):
        return len(value.elts) >= 2 and all(isinstance(e, ast.Call) for e in value.elts)
    return False


def registries(package: Path = PACKAGE) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]]:
    """(Registry instances, other module-level UPPER_CASE tables of components), each as (module, line, name)."""
    reg, other = [], []
    for name, path in modules(package).items():
        for node in parse(path).body:
            if isinstance(node, ast.Assign):
                names, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                names, value = [node.target.id], node.value
            else:
                continue
            if not names:
                continue
            call = value.func if isinstance(value, ast.Call) else None
            if call is not None and ((isinstance(call, ast.Name) and call.id == "Registry")
                                     or (isinstance(call, ast.Attribute) and call.attr == "Registry")):
                reg.append((name, node.lineno, names[0]))
                continue
            if not names[0].isupper():
                continue
            if _component_table(value):
                other.append((name, node.lineno, names[0]))
    return reg, other


def line_kinds(source: str) -> dict[str, int]:
    """A file's lines by kind: code, docstring (a module's, class's or function's first string), blank, comment."""
    docs = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):  # a string
                docs.update(range(first.lineno, first.end_lineno + 1))
    kinds = {"code": 0, "docstring": 0, "blank": 0, "comment": 0}
    for number, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        kinds["blank" if not text else "docstring" if number in docs else "comment" if text[0] == "#" else "code"] += 1
    return kinds


def kinds_text(paths) -> str:
    totals: dict[str, int] = {}
    for path in paths:
        for kind, n in line_kinds(path.read_text(encoding="utf-8")).items():
            totals[kind] = totals.get(kind, 0) + n
    return ", ".join(f"{n} {kind}" for kind, n in totals.items())


def line_counts(package: Path = PACKAGE) -> tuple[int, int, int]:
    total = long = 0
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        total += len(lines)
        long += sum(len(line) > LONG for line in lines)
    model = len((package / "model.py").read_text(encoding="utf-8").splitlines())
    return total, long, model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", "-v", action="store_true", help="list every item behind each count")
    args = parser.parse_args(argv)
    total, long, model = line_counts()
    reg, other = registries()
    graph = import_graph()
    found = cycles(graph)
    inner = inner_imports()
    private = private_imports()
    print(f"lines in minimult/ (.py): {total}: {kinds_text(sorted(PACKAGE.rglob('*.py')))}")
    print(f"lines longer than {LONG} characters: {long}")
    print(f"lines of minimult/model.py: {model}: {kinds_text([PACKAGE / 'model.py'])}")
    print(f"Registry instances: {len(reg)}")
    if args.verbose:
        for mod, line, what in reg:
            print(f"    {mod}:{line} {what}")
    print(f"other module-level dict/tuple registries (UPPER_CASE tables of components): {len(other)}")
    if args.verbose:
        for mod, line, what in other:
            print(f"    {mod}:{line} {what}")
    print(f"import cycles among minimult modules (module-level imports): {len(found)}")
    for component in found:
        print(f"    {len(component)} modules: {' -> '.join(cycle_path(graph, component))}")
    dodged = cycles(import_graph(inner=True))
    print(f"  cycles if imports inside functions counted too (a cycle dodged by a late import): {len(dodged)}")
    for component in dodged:
        print(f"    {len(component)} modules: {', '.join(component)}")
    heavy = heavy_modules()
    purposeful = [(m, l, w) for m, l, w in inner if late_on_purpose(w, m, heavy)]
    others = [x for x in inner if x not in purposeful]
    print(f"imports inside functions outside the CLI (minimult/cli.py, cli_*.py): {len(inner)}: {len(purposeful)} "
          f"load a heavy or optional package late on purpose ({', '.join(HEAVY)}, or a minimult module that "
          f"imports one), {len(others)} others")
    if args.verbose:
        for mod, line, what in inner:
            print(f"    {mod}:{line} {what}{'' if (mod, line, what) in purposeful else '   <- not heavy'}")
    print(f"imports of another module's private names: {len(private)}")
    if args.verbose or private:
        for mod, line, what in private:
            print(f"    {mod}:{line} {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
