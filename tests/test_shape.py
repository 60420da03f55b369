"""The code's shape (issue 61; `scripts/shape.py` prints the numbers): no import cycle among minimult's modules (not
even one dodged by an import inside a function) and no import of another module's private name. Both are checked
on the real package and, so that a cycle or a private import that is introduced fails them, on a small package
made to have one."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _shape():
    spec = importlib.util.spec_from_file_location("shape", ROOT / "scripts" / "shape.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


shape = _shape()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package named minimult under tmp_path with `files` (relative path -> source)."""
    root = tmp_path / "minimult"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_no_import_cycle_among_minimult_modules():
    found = shape.cycles(shape.import_graph())
    graph = shape.import_graph()
    assert not found, "import cycles: " + "; ".join(" -> ".join(shape.cycle_path(graph, c)) for c in found)


def test_no_import_cycle_dodged_by_an_import_inside_a_function():
    graph = shape.import_graph(inner=True)
    found = shape.cycles(graph)
    assert not found, "cycles through late imports: " + "; ".join(" -> ".join(shape.cycle_path(graph, c)) for c in found)


def test_no_module_imports_another_modules_private_name():
    found = shape.private_imports()
    assert not found, "private names imported: " + "; ".join(f"{m}:{line} {what}" for m, line, what in found)


def test_an_import_inside_a_function_only_loads_a_heavy_or_optional_package_late():
    """Outside the CLI an import runs late only to keep `minimult --help` fast or to load an optional package:
    torch, matplotlib, scipy, transformers, ray, ... or a minimult module that imports one at its top."""
    heavy = shape.heavy_modules()
    assert {"minimult.model", "minimult.report.figures"} <= heavy and "minimult.config" not in heavy
    others = [f"{m}:{line} {what}" for m, line, what in shape.inner_imports() if not shape.late_on_purpose(what, m, heavy)]
    assert not others, "late imports that load nothing heavy: " + "; ".join(others)


def test_every_preset_has_its_note_on_the_sites_glossary():
    from minimult.config import PRESETS
    from minimult.report.site import PRESET_NOTES

    assert set(PRESET_NOTES) == set(PRESETS)


def test_a_cycle_is_found_directly_through_a_package_and_not_through_a_late_import(tmp_path):
    root = _package(tmp_path, {
        "a.py": "from minimult.b import x\n",
        "b.py": "import json\ntry:\n    from minimult import a\nexcept ImportError:\n    pass\nx = 1\n",
        "p/__init__.py": "from minimult.c import y\n",
        "p/q.py": "z = 1\n",
        "c.py": "from minimult.p.q import z\ny = z\n",  # imports minimult.p, whose __init__ imports c
        "d.py": "def f():\n    from minimult.e import w\n",
        "e.py": "from minimult.d import f\nw = 1\n",
        "t.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from minimult.u import v\n",
        "u.py": "from minimult.t import TYPE_CHECKING\nv = 1\n",
    })
    graph = shape.import_graph(root)
    assert shape.cycles(graph) == [["minimult.a", "minimult.b"], ["minimult.c", "minimult.p"]]
    assert ["minimult.d", "minimult.e"] in shape.cycles(shape.import_graph(root, inner=True))
    assert shape.cycle_path(graph, ["minimult.a", "minimult.b"]) == ["minimult.a", "minimult.b", "minimult.a"]


def test_a_private_name_of_another_module_is_found(tmp_path):
    root = _package(tmp_path, {
        "a.py": "_x = 1\n__all__ = []\ndef _own():\n    return _x\n",
        "b.py": "from minimult.a import _x, __all__\n",
        "c.py": "def f():\n    from minimult.a import _own\n",
        "d.py": "import minimult.a as a\ny = a._x\n",
        "e.py": "from minimult import a\nz = a.__all__\n",
    })
    found = {(m, what) for m, _, what in shape.private_imports(root)}
    assert found == {("minimult.b", "from minimult.a import _x"), ("minimult.c", "from minimult.a import _own"),
                     ("minimult.d", "a._x (minimult.a)")}


def test_imports_inside_functions_are_counted_outside_cli(tmp_path):
    root = _package(tmp_path, {
        "cli.py": "def main():\n    import json\n",
        "cli_sweep.py": "def sweep():\n    import json\n",
        "client.py": "def f():\n    import json\n",
        "m.py": "import os\ndef f():\n    import json\n    class K:\n        def g(self):\n            import re\n",
    })
    assert [(m, what) for m, _, what in shape.inner_imports(root)] == [("minimult.client", "import json"),
                                                                       ("minimult.m", "import json"),
                                                                       ("minimult.m", "import re")]


def test_no_line_of_minimult_is_longer_than_120_characters():
    long = [f"{path.relative_to(ROOT).as_posix()}:{number} ({len(line)})"
            for path in sorted(shape.PACKAGE.rglob("*.py"))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > shape.LONG]
    assert not long, f"lines longer than {shape.LONG} characters: " + "; ".join(long)


def test_lines_are_counted_by_kind():
    source = textwrap.dedent('''\
        """Module docstring,
        on two lines."""

        # a comment
        X = "a string, not a docstring"


        def f(x):
            """f's docstring."""
            return x  # code with a comment is code
        ''')
    assert shape.line_kinds(source) == {"code": 3, "docstring": 3, "blank": 3, "comment": 1}
