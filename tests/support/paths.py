"""Where the suite finds the repository: its root, the shipped assets and the test fixtures."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
FIXTURES = ROOT / "tests" / "fixtures"


def child_env(root: Path | str = ROOT, **extra: str) -> dict[str, str]:
    """The environment of a child Python that imports the project from ``root``: PYTHONPATH is
    ``root`` first, then what this process had (a bare CUDA box puts faiss and minilm there:
    docs/gpu.md), plus ``extra``."""
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}
