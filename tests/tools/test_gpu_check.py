"""`make gpu-check`'s short dry run on the CPU: the script cannot rot between GPU sessions."""
import json
import re
import subprocess
import sys

from tests.support.paths import child_env
from tools import gpu_check


def test_gpu_check_dry_run_prints_one_table(capsys):
    assert gpu_check.main(["--device", "cpu", "--quick", "--no-tests", "--sentences", "64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("**cpu (") and "torch " in out and "transformers " in out and "faiss" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    measured = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[4] not in ("-",):
            ours, peer, ratio = (float(c.replace(",", "")) for c in cells[4:7])
            assert ours > 0 and peer > 0 and ratio == pytest_approx(ours / peer), row
            measured[(cells[0], cells[1], cells[2])] = ratio
    kinds = {k[0] for k in measured}
    assert "embed, minilm" in kinds and "ingest (FAISS store, add_stream)" in kinds
    assert "`encoderscope ingest` (the command)" in kinds
    shapes = [row for row in rows if row.startswith("| ingest (FAISS store, add_stream)")]
    assert len(shapes) == len(gpu_check.INGEST_SHAPES) and "the defaults" in shapes[0]
    assert any(k.startswith("train MLM step") for k in kinds)
    assert ("embed, minilm", "vs transformers", "fp32") in measured
    assert len(re.findall(r"^\|", out, re.M)) == len(rows) + 2       # one table: header, rule, rows


def test_the_probe_names_the_module_each_left_out_file_lacks(tmp_path):
    """A file that cannot import, or that skips itself at import (`pytest.importorskip` at module
    level), is left out and named with the module it lacks; the others run."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "__init__.py").write_text("", encoding="utf-8")
    (tests / "test_skips.py").write_text("import pytest\npytest.importorskip('no_such_module_a')\n", encoding="utf-8")
    (tests / "test_lacks.py").write_text("import no_such_module_b\n", encoding="utf-8")
    (tests / "test_runs.py").write_text("import json\n", encoding="utf-8")
    p = subprocess.run([sys.executable, "-c", gpu_check.PROBE, "test_skips", "test_lacks", "test_runs"],
                       cwd=tmp_path, env=child_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.splitlines()[-1]) == {"test_skips": "no_such_module_a", "test_lacks": "no_such_module_b"}


def pytest_approx(x):
    import pytest
    return pytest.approx(x, rel=0.1, abs=0.01)       # the table rounds the rates


def test_a_cpu_whose_kernels_cannot_run_bf16_gets_a_skipped_bf16_row_with_the_reason():
    """An AVX2-only CPU (simulated: oneDNN and ATen capped at AVX2) measures fp32 and prints the bf16
    rows as skipped, torch's reason in the note, rather than crashing or dropping them silently."""
    from pathlib import Path
    code = ("import torch\nfrom tools import gpu_check as g\n"
            "p, skipped = g.precisions_here(torch.device('cpu'), 'embed, minilm', 'vs transformers')\n"
            "print(p)\nprint(g.table(torch.device('cpu'), skipped, None))\n")
    env = child_env(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2")
    p = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "['fp32']"
    row = [line for line in p.stdout.splitlines() if line.startswith("| embed, minilm")]
    assert len(row) == 1 and "| bf16 |" in row[0] and "skipped: this CPU's kernels cannot run bf16" in row[0]
