"""The host side of ingest, without the encoder's cost: how fast the store path, tokenisation
and the pipeline are when the encoder takes no time, or a known time.

    python bench/ingest_host.py                          # 100,000 mixed sentences, minilm's identity
    python bench/ingest_host.py --n 20000 --rates 100000
    python bench/ingest_host.py --before /work/main      # also the same rows on another tree, same run
    python bench/ingest_host.py --tokenise-paths --rounds 3   # the twin with and without its word cache

Rows, each into a new FAISS store (flat), add_stream then close() (save and the WAL's last
checkpoint inside the clock), start-up outside it:
  null encoder   random unit vectors (a bank drawn once) under the real model's identity
                 (fingerprint, dimension): the store path alone
  null, file and line   the same with each text's file and line, as the CLI's readers give them
                 (the source and row columns; a checksum of them per row)
  tokenise       the model's tokenizer alone over the same texts, a window at a time
  simulated R/s  real tokenisation, then a sleep of n / R seconds (it releases the GIL, as a
                 GPU's wait does), then random unit vectors: ingest against an encoder of R/s
  2 sentences    a new store, add_stream of 2 sentences, save, close: the small case (ms)
  Milvus Lite    (--milvus-lite N) the null encoder into a Milvus Lite store, N sentences
Each as sentences/s and, for the simulated encoders, as a ratio to R and to min(R, tokenise
alone): a host whose cores tokenise slower than R cannot ingest faster than they tokenise.
--before TREE runs the same rows on TREE's code, both trees in child processes taking turns
(--rounds times, each row the best of its tree's rounds), and prints new / before for each.
Each ingest row first freezes what is alive, as `encoderscope ingest` does (core/long_lived.py).
The encoders are importable (tools/gpu_check.py).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _tree_from_argv() -> Path:
    """The code tree to measure: --tree's, else this file's."""
    argv = sys.argv
    if "--tree" in argv[:-1]:
        return Path(argv[argv.index("--tree") + 1]).resolve()
    return Path(__file__).resolve().parents[1]


if __name__ == "__main__":
    sys.path.insert(0, str(_tree_from_argv()))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402

RATES = (25_000, 50_000, 100_000)
WINDOW = 1024          # texts tokenised together by the tokenise row (the ingest window)
VECTOR_BANK = 4096     # distinct random unit vectors the fake encoders hand out in turn


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; else platform's word)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (OSError, AttributeError):
        return "?"


def mixed_unique(n: int) -> list[str]:
    """n distinct mixed sentences (the sample corpus, pairs and triples joined, numbered)."""
    corpus_file = Path(__file__).resolve().parents[1] / "assets" / "sample_corpus.txt"
    corpus = [s for s in corpus_file.read_text(encoding="utf-8").splitlines() if s]
    rng = np.random.default_rng(0)
    out = list(corpus)
    while len(out) < n:
        k = int(rng.choice([2, 3, 5], p=[0.6, 0.3, 0.1]))
        out.append(" ".join(rng.choice(corpus, k, replace=False)))
    rng.shuffle(out)
    return [f"{t} ({i})" for i, t in enumerate(out[:n])]


class NullEncoder:
    """A backend's identity (fingerprint, dimension, name) with random unit vectors for any
    text, in no time: what the store path costs on its own."""

    def __init__(self, real):
        self._real = real
        self.model_name, self.dim = real.model_name, real.dim
        self.backend, self.precision = real.backend, real.precision
        self.device, self.device_name = real.device, real.device_name
        rng = np.random.default_rng(1)
        bank = rng.standard_normal((VECTOR_BANK, real.dim)).astype(np.float32)
        self._bank = bank / np.linalg.norm(bank, axis=1, keepdims=True)
        self._next = 0

    def fingerprint(self, pooling=None):
        return self._real.fingerprint(pooling=pooling)

    def _vectors(self, n: int) -> np.ndarray:
        rows = (self._next + np.arange(n)) % VECTOR_BANK
        self._next = (self._next + n) % VECTOR_BANK
        return self._bank[rows]

    def embed(self, texts, pooling=None, batch_size=None, progress=None, cancel=None, stats=None,
              **_):
        n = len(texts)
        if progress is not None and n:
            progress(n, n)
        if stats is not None:
            stats.total += n
        return self._vectors(n)


class SimulatedEncoder(NullEncoder):
    """Real tokenisation, then a sleep of n / rate seconds (released GIL, like a GPU's wait),
    then random unit vectors: an encoder of `rate` sentences/s on the real host path. It offers
    the split a pipeline uses (tokenize, then embed(tokens=...)) where the tree has it."""

    def __init__(self, real, rate: float):
        super().__init__(real)
        self.rate = float(rate)
        self.model_tokenizer = real.model_tokenizer

    def tokenize(self, texts):
        return self._real.tokenize(texts)

    def embed(self, texts, pooling=None, batch_size=None, progress=None, cancel=None, stats=None,
              tokens=None, **_):
        if tokens is None:
            ids, cut = self.model_tokenizer.encode(list(texts))
        else:
            cut = tokens.cut
        time.sleep(len(texts) / self.rate)
        if stats is not None:
            stats.truncated += len(cut)
            stats.truncated_indices.extend(cut)
        return super().embed(texts, progress=progress, stats=stats)


def ingest_rate(encoder, texts, folder=None, engine: str = "faiss", **add) -> float:
    """Sentences/s of add_stream(texts) into a new store, then close() (the snapshot and the
    WAL's last checkpoint; Milvus: its flush).
    engine: "faiss" (a folder) or "milvus-lite" (a Milvus Lite file)."""
    from index.opening import open_store
    where = Path(tempfile.mkdtemp(prefix="encoderscope-ingest-host-", dir=folder)) / "store"
    location = str(where) if engine == "faiss" else f"milvus-lite:{where}.db"
    try:
        store = open_store(location, writable=True, create=True, fingerprint=encoder.fingerprint())
        as_the_cli_does()
        t = time.perf_counter()
        result = store.add_stream(texts, encoder, **add)
        store.close()       # save() and the final WAL checkpoint: all the ingest's disk work
        rate = len(texts) / (time.perf_counter() - t)
        if result.added != len(texts):
            raise RuntimeError(f"ingest stored {result.added} of {len(texts)} sentences")
        return rate
    finally:
        shutil.rmtree(where.parent, ignore_errors=True)


def as_the_cli_does() -> None:
    """`encoderscope ingest` freezes what is alive before it ingests (core/long_lived.py): so do
    the rows here, where the tree has it (not a tree from before, given to --before)."""
    try:
        from core.long_lived import freeze_long_lived
    except ImportError:
        return
    freeze_long_lived(collect=False)


def tokenising_path(backend) -> str:
    """How the backend's tokenizer takes a window of plain texts on this machine: the twin's
    word cache or the twin's Rust threads (core/encoder/word_cache.py), with the usable CPUs."""
    from core.files import platform_os
    twin = getattr(backend.model_tokenizer, "_twin", None)
    if not twin:
        return "the tokenizer's pipeline"
    cpus = platform_os.usable_cpus()
    how = "the twin's word cache" if getattr(twin, "words", None) is not None else "the twin's Rust threads"
    return f"{how} ({cpus} usable CPUs)"


def tokenise_rate(backend, texts, window: int = WINDOW) -> float:
    t = time.perf_counter()
    for s in range(0, len(texts), window):
        backend.model_tokenizer.encode(texts[s:s + window])
    return len(texts) / (time.perf_counter() - t)


def prose(n: int) -> tuple[list[str], int]:
    """n plain English sentences drawn with repeats from Python's own documentation (pydoc's
    topics: a real vocabulary, unlike the sample corpus's), and how many distinct ones there are."""
    import pydoc_data.topics
    import re

    from core.encoder.ascii_twin import is_plain
    text = " ".join(pydoc_data.topics.topics.values())
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.split()) >= 4]
    sentences = list(dict.fromkeys(s for s in sentences if is_plain(s)))
    rng = np.random.default_rng(0)
    return [sentences[i] for i in rng.integers(0, len(sentences), n)], len(sentences)


def tokenise_paths(model: str, n: int, rounds: int = 3) -> str:
    """Tokenising alone through the twin with and without its word cache (core/encoder/
    word_cache.py), on the sample corpus's numbered sentences and on prose: texts/s, CPU per
    text (all threads) and the calling thread's CPU per text (what holds the GIL)."""
    from core.encoder import ascii_twin
    from core.encoder import tokenizer as tk
    from core.encoder.backends import get_backend
    pipeline = get_backend(model, "scratch", device="cpu", precision="fp32").model_tokenizer._pipeline
    twins = {cached: ascii_twin.twin_of(pipeline, tk.CHECK_TEXTS, words=cached) for cached in (False, True)}
    drawn, distinct = prose(n)
    lines = [f"tokenising alone, {cpu_name()}, load {load_average()}, windows of {WINDOW}"]
    for name, texts in (("sample corpus, numbered", mixed_unique(n)),
                        (f"pydoc prose ({distinct:,} distinct sentences)", drawn)):
        texts = [t for t in texts if ascii_twin.is_plain(t)]
        windows = [texts[s:s + WINDOW] for s in range(0, len(texts), WINDOW)]
        words = sum(len(t.split()) for t in texts) / len(texts)
        lines.append(f"  {name}: {len(texts):,} texts, {words:.1f} words each")
        for _ in range(rounds):
            for cached, twin in twins.items():
                if twin.words is not None:
                    twin.words.words = {}           # each round from an empty cache
                t, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
                for window in windows:
                    twin.encode(window)
                wall = time.perf_counter() - t
                per = 1e6 / len(texts)
                lines.append(f"    {'word cache' if cached else 'twin alone':10s} {len(texts) / wall:>9,.0f}/s  "
                             f"CPU {(time.process_time() - cpu) * per:5.1f} us/text  "
                             f"calling thread {(time.thread_time() - own) * per:5.1f} us/text")
    return "\n".join(lines)


def small_ms(encoder, reps: int = 15) -> float:
    """Median ms of: create a store, add_stream 2 sentences, save, close."""
    from index.faiss.store import VectorStore
    times = []
    for r in range(reps):
        where = Path(tempfile.mkdtemp(prefix="encoderscope-ingest-small-")) / "store"
        try:
            t = time.perf_counter()
            store = VectorStore.open(where, writable=True, create=True, fingerprint=encoder.fingerprint())
            store.add_stream([f"The first of two ({r}).", f"The second of two ({r})."], encoder)
            store.close()
            times.append((time.perf_counter() - t) * 1000)
        finally:
            shutil.rmtree(where.parent, ignore_errors=True)
    return float(np.median(times))


def measure(model: str, n: int, rates, rounds: int = 1, milvus_n: int = 0) -> dict:
    """Every row: best of `rounds` each."""
    from core.encoder.backends import get_backend
    real = get_backend(model, "scratch", device="cpu", precision="fp32")
    texts = mixed_unique(n)
    real.model_tokenizer.encode(texts[:256])       # warm-up
    out = {"n": n, "model": model, "cpu": cpu_name(), "cores": os.cpu_count()}
    try:
        out["tokenising"] = tokenising_path(real)
    except (ImportError, AttributeError):      # a tree from before the word cache (--before)
        out["tokenising"] = "the twin's Rust threads"
    out["load_before"] = load_average()
    null = NullEncoder(real)
    out["null"] = max(ingest_rate(null, texts) for _ in range(rounds))
    # as the CLI's readers hand them: each text with its file and line (source and row columns)
    items = [(t, {"source": "corpus.txt", "row": i + 1}) for i, t in enumerate(texts)]
    out["null_sourced"] = max(ingest_rate(null, items) for _ in range(rounds))
    out["tokenise"] = max(tokenise_rate(real, texts) for _ in range(rounds))
    out["simulated"] = {}
    for rate in rates:
        sim = SimulatedEncoder(real, rate)
        out["simulated"][str(rate)] = max(ingest_rate(sim, texts) for _ in range(rounds))
    out["small_ms"] = small_ms(null)
    if milvus_n:
        out["milvus_n"] = milvus_n
        out["milvus_null"] = ingest_rate(null, texts[:milvus_n], engine="milvus-lite")
    out["load_after"] = load_average()
    return out


def report(r: dict, before: dict | None = None) -> str:
    def cmp(key, new, old):
        return f"   before {old:>9,.0f}  new / before {new / old:5.2f}" if old else ""
    b = before or {}
    lines = [f"{r['n']:,} mixed sentences, {r['model']}'s identity, {r['cpu']} ({r['cores']} cores), "
             f"load {r['load_before']} -> {r['load_after']}"
             + (f"; before: load {b['load_before']} -> {b['load_after']}, best of {b['rounds']} "
                "alternating rounds each" if b else "")]
    lines.append(f"  tokenising: {r.get('tokenising', '?')}"
                 + (f"; before: {b.get('tokenising', '?')}" if b else ""))
    lines.append(f"  null encoder          {r['null']:>9,.0f} s/s" + cmp("null", r["null"], b.get("null")))
    if r.get("null_sourced"):
        lines.append(f"  null, file and line   {r['null_sourced']:>9,.0f} s/s"
                     + cmp("null_sourced", r["null_sourced"], b.get("null_sourced")))
    lines.append(f"  tokenise alone        {r['tokenise']:>9,.0f} s/s"
                 + cmp("tok", r["tokenise"], b.get("tokenise")))
    for rate, got in r["simulated"].items():
        old = (b.get("simulated") or {}).get(rate)
        # the most this host could ingest with that encoder: its rate, or tokenising's if slower
        bound = min(int(rate), r["tokenise"])
        lines.append(f"  simulated {int(rate):>7,}/s   {got:>9,.0f} s/s  {got / int(rate):4.2f}x of it, "
                     f"{got / bound:4.2f}x of min(it, tokenise)"
                     + (f"   before {old:>9,.0f} ({old / int(rate):4.2f}x)  new / before {got / old:5.2f}"
                        if old else ""))
    if r.get("milvus_null"):
        old = b.get("milvus_null")
        lines.append(f"  Milvus Lite, null     {r['milvus_null']:>9,.0f} s/s ({r['milvus_n']:,} sentences)"
                     + (f"   before {old:>9,.0f}  new / before {r['milvus_null'] / old:5.2f}" if old else ""))
    lines.append(f"  2 sentences           {r['small_ms']:>9,.1f} ms"
                 + (f"   before {b['small_ms']:.1f} ms  new / before {r['small_ms'] / b['small_ms']:5.2f}"
                    if b else ""))
    return "\n".join(lines)


def best_of(runs: list[dict]) -> dict:
    """Each row's best over runs of one tree (time rows: the least); loads: the range seen."""
    out = dict(runs[0])
    for key in ("null", "null_sourced", "tokenise", "milvus_null"):
        if key in out:
            out[key] = max(r[key] for r in runs)
    out["simulated"] = {k: max(r["simulated"][k] for r in runs) for k in out["simulated"]}
    out["small_ms"] = min(r["small_ms"] for r in runs)
    loads = [float(r[k]) for r in runs for k in ("load_before", "load_after") if r[k] != "?"]
    out["load_before"], out["load_after"] = (f"{min(loads):.1f}", f"{max(loads):.1f}") if loads else ("?", "?")
    out["rounds"] = len(runs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="whose identity and tokenizer (default minilm)")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rates", default=",".join(map(str, RATES)), help="simulated encoders' sentences/s")
    ap.add_argument("--rounds", type=int, default=1, help="rounds (with --before: of both trees, alternating)")
    ap.add_argument("--milvus-lite", type=int, default=0, metavar="N",
                    help="also the null encoder into a Milvus Lite store, N sentences (needs pymilvus)")
    ap.add_argument("--before", default=None, help="another tree (e.g. /work/main): its rows too, same run")
    ap.add_argument("--tree", default=None, help="measure this tree's code (what --before runs)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tokenise-paths", action="store_true",
                    help="only tokenising alone through the twin with and without its word cache")
    args = ap.parse_args(argv)
    if args.tokenise_paths:
        print(tokenise_paths(args.model, args.n, max(1, args.rounds)))
        return 0
    rates = [int(x) for x in args.rates.split(",") if x]
    if not args.before:
        r = measure(args.model, args.n, rates, args.rounds, args.milvus_lite)
        r["tree"] = str(_tree_from_argv())
        before = None
    else:
        # Both trees in child processes, alternating, `rounds` times: the load on a shared
        # machine comes and goes, so each row is the best of its tree's rounds.
        runs = {"new": [], "before": []}
        for _ in range(max(1, args.rounds)):
            for name, tree in (("new", str(_tree_from_argv())), ("before", args.before)):
                cmd = [sys.executable, str(Path(__file__).resolve()), "--tree", tree, "--json",
                       "--model", args.model, "--n", str(args.n), "--rates", args.rates,
                       "--rounds", "1", "--milvus-lite", str(args.milvus_lite)]
                child = subprocess.run(cmd, capture_output=True, text=True, check=True)
                runs[name].append(json.loads(child.stdout.strip().splitlines()[-1]))
        r, before = best_of(runs["new"]), best_of(runs["before"])
    if args.json:
        print(json.dumps({**r, "before": before} if before else r))
    else:
        print(report(r, before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
