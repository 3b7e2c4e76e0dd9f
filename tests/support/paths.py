"""Where the suite finds the repository: its root, the shipped assets and the test fixtures."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
FIXTURES = ROOT / "tests" / "fixtures"
