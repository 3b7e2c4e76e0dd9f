"""Fuzzed store copies through the CLI and the store API, in a process of their own (the
reliability suite runs it with a timeout, so a hang is a failure, not a stuck test run).

    PYTHONPATH=. python -m tests.support.reliability_driver DIM QUERIES-JSON FOLDER...

Prints one JSON line per folder, as soon as it is done: {"folder", "problems": [...],
"outcome": {...}}; a folder without its line when the process is killed is the one that hung.
A problem is a traceback, an exit that is neither 0 nor one `error:` line, advice to run
`info --repair` that then fails, or a wrong result: a search hit whose text, embedded again,
does not give the hit's score, or after a successful repair a row whose vector is not its
text's vector. Embeddings are tests.support.fake_vectors.text_vector (the fake model).
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

import numpy as np

from core.errors import EncoderscopeError
from tests.support.fake_vectors import text_vector


def run_cli(*argv):
    """(rc, stderr) of `encoderscope ARGV` in this process; a raised exception is a traceback."""
    from app.cli import main
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, err.getvalue()


def cli_outcome(problems, name, *argv):
    try:
        rc, err = run_cli(*argv)
    except BaseException:   # noqa: BLE001 - anything escaping main() is what a user would see
        problems.append(f"{name}: traceback {traceback.format_exc(limit=3)}")
        return "traceback"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    if rc == 0 and not errors:
        return "ok"
    if rc == 2 and len(errors) == 1 and "Traceback" not in err:
        # an error that advises the repair command ("error+repair") must be one it fixes
        return "error+repair" if "info --repair" in errors[0] else "error"
    problems.append(f"{name}: rc {rc}, stderr {err[-400:]!r}")
    return "bad exit"


def search_outcome(problems, folder, dim, queries):
    """Search every query's vector; every hit's text must give the hit's score when embedded,
    and a stored query text must come first at 1.0."""
    from index.faiss.store import VectorStore
    try:
        store = VectorStore.open(folder)
    except EncoderscopeError:
        return "error"
    try:
        stored = {r["text"] for r in store.iter()}
        for text in queries:
            q = text_vector(text, dim)
            for h in store.search(q, k=3)[0]:
                want = float(text_vector(h.text, dim) @ q)
                if abs(h.score - want) > 1e-3:
                    problems.append(f"WRONG: {text!r} -> {h.text!r} at {h.score:.4f}, "
                                    f"its own vector gives {want:.4f}")
            if text in stored:
                top = store.search(q, k=1)[0]
                if not top or top[0].text != text:
                    problems.append(f"WRONG: {text!r} is stored but not found first")
        return "ok"
    except EncoderscopeError:
        return "error"
    except BaseException:   # noqa: BLE001
        problems.append(f"search: traceback {traceback.format_exc(limit=3)}")
        return "traceback"
    finally:
        store.close()


def verified_state(problems, folder, dim) -> str:
    """After a successful repair: every row's vector is its text's, self-search finds it."""
    from index.faiss.store import VectorStore
    try:
        with VectorStore.open(folder) as store:
            recs = {r["id"]: r["text"] for r in store.iter()}
            ids, vecs = store.vectors()
            for i, v in zip(ids, vecs):
                if not np.allclose(v, text_vector(recs[int(i)], dim), atol=1e-6):
                    problems.append(f"WRONG after repair: row {int(i)} {recs[int(i)]!r}")
                elif store.search(v, k=1)[0][0].id != int(i):
                    problems.append(f"WRONG after repair: row {int(i)} not found by its vector")
            return f"verified {len(recs)}"
    except BaseException:   # noqa: BLE001 - a repaired store must open
        problems.append(f"after repair: {traceback.format_exc(limit=3)}")
        return "unopenable"


def main(argv) -> int:
    dim, queries = int(argv[0]), json.loads(argv[1])
    for folder in argv[2:]:
        print(json.dumps(one_copy(folder, dim, queries)), flush=True)
    return 0


def one_copy(folder, dim, queries) -> dict:
    problems: list[str] = []
    outcome = {"info": cli_outcome(problems, "info", "info", "--store", folder),
               "search": search_outcome(problems, folder, dim, queries)}
    outcome["repair"] = cli_outcome(problems, "repair", "info", "--repair", "--store", folder)
    if outcome["info"] == "error+repair" and outcome["repair"] != "ok":
        problems.append("wrong advice: info said to run info --repair, which failed")
    if outcome["repair"] == "ok":
        outcome["after"] = verified_state(problems, folder, dim)
        outcome["check"] = cli_outcome(problems, "check", "info", "--check", "--store", folder)
        if outcome["check"] != "ok":
            problems.append("check after a successful repair: " + outcome["check"])
    return {"folder": folder, "problems": problems, "outcome": outcome}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
