"""Contrastive (SimCSE) training, MLM then SimCSE, and continued training of minilm."""
from __future__ import annotations

import csv
import json

import pytest
import torch

from core.encoder.sources import resolve
from core.encoder.weights import load_folder
from core.train.trainer import Trainer
from tests.support.paths import ROOT
from tests.support.train_corpus import tiny_config, write_corpus

ASSETS = ROOT / "assets"
PAIRS = ASSETS / "paraphrase_pairs.tsv"
CORPUS = ASSETS / "sample_corpus.txt"


@pytest.fixture(scope="module")
def corpus_without_pairs(tmp_path_factory):
    """The sample corpus minus every sentence of a paraphrase pair: the pairs stay unseen."""
    if not (PAIRS.is_file() and CORPUS.is_file()):
        pytest.skip("assets/paraphrase_pairs.tsv or sample_corpus.txt missing")
    with PAIRS.open(encoding="utf-8") as f:
        in_pairs = {r[k] for r in csv.DictReader(f, delimiter="\t") for k in ("a", "b")}
    lines = [l for l in CORPUS.read_text(encoding="utf-8").splitlines() if l.strip() and l not in in_pairs]
    path = tmp_path_factory.mktemp("cse") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_simcse_raises_paraphrase_cosine_over_unrelated(corpus_without_pairs, tmp_path):
    events = []
    cfg = tiny_config(corpus_without_pairs, tmp_path / "cse", objective="simcse", steps=150, dropout=0.1,
                      lr=1e-3, dim=64, ffn=128, max_length=48, eval_every=150, pairs=str(PAIRS))
    s = Trainer(cfg).run(progress=events.append)
    evals = [e for e in events if e["kind"] == "eval"]
    before, after = evals[0], evals[-1]
    gap_before = before["pair_cosine"] - before["unrelated_cosine"]
    gap_after = after["pair_cosine"] - after["unrelated_cosine"]
    assert gap_after > 0.12 and gap_after > 1.5 * gap_before
    # Uniformity (lower = embeddings spread over the sphere) improves; the held-out loss falls.
    assert after["uniformity"] < before["uniformity"] - 0.3
    assert after["heldout_simcse_loss"] < before["heldout_simcse_loss"]
    assert after["heldout_loss"] == after["heldout_simcse_loss"]
    assert s["heldout_mlm_loss"] is None and not s["mlm_head"]
    # A contrastive-only fresh model is saved without an (untrained) MLM head.
    meta = json.loads((tmp_path / "cse" / "encoderscope.json").read_text())
    assert meta["mlm_head"] is False


def test_mlm_then_simcse(tmp_path):
    corpus = write_corpus(tmp_path / "gen.txt", n=600)
    events = []
    s = Trainer(tiny_config(corpus, tmp_path / "both", objective="mlm+simcse", steps=80, eval_every=40,
                            dropout=0.1)).run(progress=events.append)
    phases = [e["phase"] for e in events if e["kind"] == "step"]
    assert phases[:4] == ["mlm"] * 4 and phases[-1] == "simcse"
    assert s["heldout_mlm_loss"] < s["initial_heldout_mlm_loss"]
    assert s["alignment"] is not None and s["uniformity"] is not None and s["mlm_head"]
    model, _, _ = load_folder(tmp_path / "both")
    assert hasattr(model, "head")


def test_minilm_with_a_fresh_mlm_head_becomes_a_fill_mask_model(corpus_without_pairs, tmp_path):
    """--init minilm --objective mlm: minilm's body (token types kept) + a new tied head."""
    out = tmp_path / "minilm-mlm"
    s = Trainer(tiny_config(corpus_without_pairs, out, init="minilm", steps=4, batch_size=8, lr=1e-4,
                            eval_every=4, eval_sentences=16, max_length=32)).run()
    assert s["mlm_head"] and s["steps"] == 4
    model, cfg, _ = load_folder(out)
    assert cfg.dim == 384 and cfg.n_layers == 6 and cfg.type_vocab_size == 2
    assert model.vocab_projector.weight is model.distilbert.embeddings.word_embeddings.weight
    ref, _, _ = load_folder(resolve("minilm").folder)
    # 4 small steps at 1e-4 barely move the body: it is still minilm.
    w0 = ref.embeddings.token_type_embeddings.weight
    w1 = model.distilbert.embeddings.token_type_embeddings.weight
    assert torch.allclose(w0, w1, atol=5e-3)
    try:
        from core.encoder.backends import get_backend
    except ImportError:  # pragma: no cover
        return
    b = get_backend(model=str(out), backend="scratch", device="cpu")
    assert b.has_mlm
    res = b.fill_mask("the weather is [MASK] today.", top_k=3).to_dict()
    assert len(res["masks"][0]["predictions"]) == 3
