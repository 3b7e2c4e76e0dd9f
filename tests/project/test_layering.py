"""The layering: core <- index <- app, Qt only in app (import-linter contracts in
pyproject.toml), and the encoder written by hand."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT, child_env

FORBIDDEN = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6")


def imported_modules(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def lint_imports() -> Path:
    """import-linter's command beside this Python; a bare GPU box (docs/gpu.md) has none."""
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip(f"needs import-linter's lint-imports beside {sys.executable} (make setup installs it)")
    return exe


def test_import_contracts_hold():
    """`lint-imports` checks pyproject.toml's contracts: core <- index <- app, and no Qt or
    pyqtgraph imported (directly or through another module) by core or index."""
    exe = lint_imports()
    p = subprocess.run([str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=child_env())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "broken" in p.stdout and " 0 broken" in p.stdout, p.stdout[-2000:]


def test_import_contracts_catch_an_upward_import(tmp_path):
    """The contract is live: a copy of the tree with core importing index is rejected."""
    import shutil
    for pkg in ("core", "index", "app"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "core" / "upward.py").write_text("import index.opening  # wrong way\n", encoding="utf-8")
    exe = lint_imports()
    p = subprocess.run([str(exe), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=child_env(tmp_path))
    assert p.returncode != 0 and "core.upward" in p.stdout, p.stdout[-2000:]


def test_importing_core_and_index_loads_no_qt():
    """Every module of core/ and index/, in every subpackage (backends, faiss, milvus included)."""
    mods = [".".join(p.relative_to(ROOT).with_suffix("").parts) for pkg in ("core", "index")
            for p in sorted((ROOT / pkg).rglob("*.py")) if p.stem not in ("__init__", "__main__")]
    assert {"core.encoder.backends.hf", "index.faiss.store", "index.milvus.store"} <= set(mods), mods
    code = ("import sys, importlib\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_command_line_loads_no_qt_and_no_torch_until_needed():
    """The composition root builds every subcommand's parser without Qt (only `gui` needs it) and
    without torch (the model loads when a command runs), so `--help` and start-up stay quick."""
    code = ("import sys\nfrom app.cli import build_parser\nbuild_parser()\n"
            f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN + ('torch', 'transformers')!r}]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_no_pickle_for_user_data():
    offenders = [str(p.relative_to(ROOT)) for pkg in ("app", "core", "index") for p in (ROOT / pkg).rglob("*.py")
                 if any(m.split(".")[0] in ("pickle", "dill", "joblib") for m in imported_modules(p))]
    assert not offenders, offenders


def test_encoder_is_written_by_hand():
    """core/encoder/model.py and core/walkthrough/numpy_ref.py use no transformers and no ready-made torch encoder."""
    for name in ("encoder/model.py", "walkthrough/numpy_ref.py"):
        path = ROOT / "core" / name
        mods = set(imported_modules(path))
        assert not {m for m in mods if m.split(".")[0] in ("transformers", "sentence_transformers")}, (name, mods)
        source = path.read_text(encoding="utf-8")
        for banned in ("MultiheadAttention", "TransformerEncoder", "nn.Transformer("):
            assert banned not in source, (name, banned)


def test_encoder_config_documents_every_field():
    """The @dataclass config is the encoder's vocabulary: one comment per field."""
    from dataclasses import fields

    from core.encoder.model import EncoderConfig
    lines = (ROOT / "core" / "encoder" / "model.py").read_text(encoding="utf-8").splitlines()
    start = lines.index("class EncoderConfig:")
    for f in fields(EncoderConfig):
        line = next(x for x in lines[start:] if x.strip().startswith(f"{f.name}:"))
        assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, f"{f.name} has no comment"
