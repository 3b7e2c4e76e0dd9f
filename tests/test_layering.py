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


def test_encoder_is_written_by_hand():
    """core/model.py and core/numpy_ref.py use no transformers and no ready-made torch encoder."""
    for name in ("model.py", "numpy_ref.py"):
        path = ROOT / "core" / name
        mods = set(imported_modules(path))
        assert not {m for m in mods if m.split(".")[0] in ("transformers", "sentence_transformers")}, (name, mods)
        source = path.read_text(encoding="utf-8")
        for banned in ("MultiheadAttention", "TransformerEncoder", "nn.Transformer("):
            assert banned not in source, (name, banned)


def test_encoder_config_documents_every_field():
    """The @dataclass config is the encoder's vocabulary: one comment per field."""
    from dataclasses import fields

    from core.model import EncoderConfig
    lines = (ROOT / "core" / "model.py").read_text(encoding="utf-8").splitlines()
    start = lines.index("class EncoderConfig:")
    for f in fields(EncoderConfig):
        line = next(x for x in lines[start:] if x.strip().startswith(f"{f.name}:"))
        assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, f"{f.name} has no comment"
