"""Run as `python tests/support/no_posix_driver.py WORKDIR`: makes the POSIX-only modules unimportable
(as on Windows; the file lock is then the Windows one, over tests/support/fake_msvcrt.py), imports every
module of app/, core/ and index/, then runs the Qt-free CLI end to end in this one process and
writes each command's exit code and output to WORKDIR/results.json, which
tests/project/test_no_posix_modules.py checks."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.support import fake_msvcrt  # noqa: E402

fake_msvcrt.install()                  # Windows' file lock, emulated before fcntl is blocked
os.environ["ENCODERSCOPE_FILE_LOCK"] = "windows"
BLOCKED = ("fcntl", "resource", "pwd", "grp", "termios")
for _name in BLOCKED:
    sys.modules[_name] = None          # `import fcntl` now raises ImportError, as on Windows

import contextlib  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import pkgutil  # noqa: E402
from pathlib import Path  # noqa: E402

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"
TINY = ["--layers", "1", "--dim", "32", "--heads", "2", "--ffn", "64", "--threads", "1",
        "--precision", "fp32", "--batch-size", "8", "--max-length", "24", "--eval-sentences", "20"]
SENTENCES = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river",
             "the king read a book", "the queen ate food in the garden"]


def import_everything() -> list[str]:
    names = []
    for package in ("core", "index", "app"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name.endswith(".__main__"):
                continue              # importing it would run the CLI
            importlib.import_module(info.name)
            names.append(info.name)
    return names


def run(argv) -> dict:
    from app.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:       # argparse
            code = e.code
    return {"argv": [str(a) for a in argv], "code": code, "out": out.getvalue(), "err": err.getvalue()}


def main(work: Path) -> None:
    modules = import_everything()
    corpus = work / "sentences.txt"
    corpus.write_text("\r\n".join(SENTENCES) + "\r\n", encoding="utf-8")   # Windows newlines
    store = work / "store"
    steps = {"modules": modules}
    steps["ingest"] = run(["ingest", corpus, "--store", store, "--model", RANDOM, "--quiet"])
    steps["search"] = run(["search", SENTENCES[3], "--store", store, "-k", "2", "--json"])
    hit = json.loads(steps["search"]["out"])["results"][0]["id"] if steps["search"]["code"] == 0 else 0
    steps["remove"] = run(["remove", hit, "--store", store])
    steps["search_after"] = run(["search", SENTENCES[3], "--store", store, "-k", "5", "--json"])
    steps["check"] = run(["info", "--check", "--store", store])
    from tests.support.train_corpus import write_corpus
    train_corpus = write_corpus(work / "train.txt", n=120)
    steps["train"] = run(["train", "--corpus", train_corpus, "--out", work / "run", "--steps", "3",
                          "--log-every", "1", "--eval-every", "3", "--checkpoint-every", "3",
                          "--no-progress", *TINY])
    steps["ablate"] = run(["ablate", "the cat sat on the mat", "--heads", "1.2,2.4", "--model",
                           RANDOM, "--json"])
    steps["importance"] = run(["importance", "--metric", "spearman", "--model", RANDOM, "--json"])
    steps["still_blocked"] = [n for n in BLOCKED if sys.modules.get(n, 0) is not None]
    (work / "results.json").write_text(json.dumps(steps), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
