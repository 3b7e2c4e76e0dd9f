"""transformers reached from several threads at once for the first time (the app starting on
Search with a trained checkpoint inspected: two workers load tokenizers together) imports once,
under one lock: no "cannot import name 'AutoTokenizer'". Run in a fresh interpreter, where
transformers is not imported yet."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.paths import ROOT, child_env

SCRIPT = textwrap.dedent("""
    import sys, threading
    assert "transformers" not in sys.modules, "imported before the threads start"
    from core.encoder.tokenizer import load_tokenizer
    from core.encoder.transformers_import import from_transformers
    folder = sys.argv[1]
    start, errors, loaded = threading.Barrier(8), [], []

    def first_use(i):
        start.wait()
        try:
            if i % 2:
                loaded.append(len(load_tokenizer(__import__("pathlib").Path(folder))))
            else:
                loaded.append(from_transformers("AutoTokenizer", "AutoConfig")[0].__name__)
        except Exception as e:            # what the race raised
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("errors", errors)
    print("loaded", len(loaded))
    sys.exit(1 if errors or len(loaded) != 8 else 0)
""")


def test_concurrent_first_imports_in_a_fresh_process(tiny_distilbert):
    env = child_env(HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_distilbert)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "errors []" in out.stdout and "loaded 8" in out.stdout


def test_no_module_imports_transformers_names_around_the_lock():
    """A plain ``from transformers import X`` in a thread would bring the race back (without the
    lock, 2 of 3 fresh runs of eight such threads raised "cannot import name 'AutoTokenizer'")."""
    import re
    plain = re.compile(r"^\s*(from transformers import|import transformers\b)", re.M)
    offenders = [str(p.relative_to(ROOT)) for package in ("core", "index", "app")
                 for p in (ROOT / package).rglob("*.py")
                 if p.name != "transformers_import.py" and plain.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
