"""core/ and index/ must never import Qt or pyqtgraph: they run headless and in the CLI."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6")


def imported_modules(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_no_qt_in_core_or_index_source():
    offenders = [f"{p.relative_to(ROOT)}: {m}" for pkg in ("core", "index") for p in (ROOT / pkg).rglob("*.py")
                 for m in imported_modules(p) if m.split(".")[0] in FORBIDDEN]
    assert not offenders, offenders


def test_importing_core_and_index_loads_no_qt():
    mods = [f"{pkg}.{p.stem}" for pkg in ("core", "index") for p in sorted((ROOT / pkg).glob("*.py"))
            if p.stem != "__init__"]
    code = ("import sys, importlib\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_no_pickle_for_user_data():
    offenders = [str(p.relative_to(ROOT)) for pkg in ("app", "core", "index") for p in (ROOT / pkg).rglob("*.py")
                 if any(m.split(".")[0] in ("pickle", "dill", "joblib") for m in imported_modules(p))]
    assert not offenders, offenders
