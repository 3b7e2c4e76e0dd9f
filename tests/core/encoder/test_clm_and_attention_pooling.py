"""Next-token prediction (clm) and attention pooling: the labels, the pooling against NumPy,
both train (loss falls on a tiny model), round-trip through checkpoints on our backend and on
transformers' where it has the class, and the clear errors where something cannot be done."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.encoder.model import Encoder, EncoderForMaskedLM
from core.encoder.pooling import NoPoolingQuery, pool
from core.encoder.weights import load_folder, save_checkpoint
from core.errors import InputError, ModelUnavailable
from core.train.masking import IGNORE
from core.train.next_token import next_token_labels
from core.train.trainer import Trainer
from core.walkthrough import numpy_ref
from tests.core.encoder.test_parts import randomised, small_config
from tests.support.train_corpus import tiny_config, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "gen.txt", n=600)


# ---- the pieces --------------------------------------------------------------------------

def test_next_token_labels_shift_and_skip_padding_and_specials():
    ids = torch.tensor([[2, 10, 11, 12, 3], [2, 20, 3, 0, 0]])        # [CLS] ... [SEP] [PAD]
    attn = (ids != 0).long()
    special = torch.isin(ids, torch.tensor([0, 2, 3]))
    labels = next_token_labels(ids, attn, special)
    assert labels.tolist() == [[10, 11, 12, IGNORE, IGNORE], [20, IGNORE, IGNORE, IGNORE, IGNORE]]
    # without a special mask only padding and the end are skipped: [SEP] is then a target
    assert next_token_labels(ids, attn)[1].tolist() == [20, 3, IGNORE, IGNORE, IGNORE]


def test_attention_pooling_equals_numpy():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 5, 8, generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    query = torch.randn(8, generator=g)
    got = pool(hidden, mask, "attention", query=query).numpy()
    for b in range(2):
        h, q = hidden[b].numpy().astype(np.float64), query.numpy().astype(np.float64)
        keep = mask[b].numpy().astype(bool)
        scores = h[keep] @ q / np.sqrt(8)
        w = np.exp(scores - scores.max())
        w /= w.sum()
        np.testing.assert_allclose(got[b], w @ h[keep], atol=1e-6)
        np.testing.assert_allclose(numpy_ref.pool(h, keep, "attention", q), w @ h[keep], atol=1e-12)
    # padding does not count: changing a padded vector changes nothing
    moved = hidden.clone()
    moved[1, 4] += 100
    assert torch.allclose(pool(moved, mask, "attention", query=query)[1], torch.from_numpy(got[1]))
    # a zero query is mean pooling (where training starts)
    assert torch.allclose(pool(hidden, mask, "attention", query=torch.zeros(8)), pool(hidden, mask, "mean"), atol=1e-6)
    with pytest.raises(NoPoolingQuery):
        pool(hidden, mask, "attention")


def test_the_query_is_a_saved_parameter(tmp_path):
    cfg = small_config(pooling="attention")
    model = randomised(Encoder(cfg))
    assert model.pooling_query is not None and model.pooling_query.shape == (cfg.dim,)
    save_checkpoint(model, None, tmp_path)
    from safetensors.torch import load_file
    assert "attention_pooling.query" in load_file(str(tmp_path / "model.safetensors"))
    loaded, cfg2, _ = load_folder(tmp_path)
    assert cfg2.pooling == "attention"
    assert torch.equal(loaded.pooling_query, model.pooling_query)
    mlm = randomised(EncoderForMaskedLM(cfg))
    save_checkpoint(mlm, None, tmp_path / "mlm")
    assert "distilbert.attention_pooling.query" in load_file(str(tmp_path / "mlm" / "model.safetensors"))
    assert torch.equal(load_folder(tmp_path / "mlm")[0].distilbert.pooling_query, mlm.distilbert.pooling_query)


# ---- the settings -------------------------------------------------------------------------

def test_config_errors(corpus, tmp_path):
    with pytest.raises(InputError, match="clm objective .* needs a causal attention mask.*causal attention") as e:
        tiny_config(corpus, tmp_path / "x", objective="clm").validate()
    assert e.value.fix == {"kind": "settings", "settings": {"attention": "causal"}}
    with pytest.raises(InputError, match=r"attention pooling learns its query .* simcse or mlm\+simcse") as e:
        tiny_config(corpus, tmp_path / "x", pooling="attention").validate()
    assert e.value.fix == {"kind": "settings", "settings": {"objective": "simcse", "pooling": "attention"}}
    with pytest.raises(InputError, match="attention must be bidirectional or causal"):
        tiny_config(corpus, tmp_path / "x", attention="sideways").validate()
    tiny_config(corpus, tmp_path / "x", objective="clm", attention="causal").validate()


# ---- training ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def clm_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "clm"
    events = []
    trainer = Trainer(tiny_config(corpus, out, objective="clm", attention="causal", steps=40,
                                  eval_every=20, log_every=5))
    summary = trainer.run(progress=events.append)
    return summary, events, out, trainer.model.eval()


def test_clm_trains_and_evaluates_next_token_prediction(clm_run):
    summary, events, out, _ = clm_run
    losses = [e["loss"] for e in events if e["kind"] == "step"]
    assert losses[-1] < 0.7 * losses[0]
    evals = [e for e in events if e["kind"] == "eval"]
    first, last = evals[0], evals[-1]
    assert last["heldout_clm_loss"] < first["heldout_clm_loss"]
    assert last["heldout_loss"] == last["heldout_clm_loss"] and last["phase"] == "clm"
    assert last["heldout_mlm_loss"] is None
    assert last["heldout_clm_loss"] < last["unigram_loss"]          # beats word frequencies
    assert 0 <= last["heldout_clm_accuracy"] <= 1
    assert summary["heldout_clm_loss"] == last["heldout_clm_loss"]
    meta = json.loads((out / "encoderscope.json").read_text())
    assert meta["config"]["attention"] == "causal" and meta["mlm_head"] is True


def test_clm_heldout_loss_is_an_independent_next_token_loss(clm_run):
    """The eval number equals cross-entropy computed here from the saved model's logits."""
    from transformers import AutoTokenizer

    from core.train.config import TrainConfig
    from core.train.data import encode, read_corpus, split_heldout
    _, events, out, _ = clm_run
    model, _, _ = load_folder(out)
    tok = AutoTokenizer.from_pretrained(str(out))
    cfg = TrainConfig.from_dict(json.loads((out / "trainer_state.json").read_text())["config"])
    sentences = read_corpus(cfg.corpus)
    _, held = split_heldout(sentences, cfg.heldout, cfg.seed)
    seqs = [s for s in encode(tok, held[:cfg.eval_sentences], cfg.max_length) if len(s) > 2]
    specials = set(tok.all_special_ids)
    total, n = 0.0, 0
    with torch.no_grad():
        for s in seqs:
            logits, _ = model(torch.tensor([list(s)]))
            logp = torch.log_softmax(logits[0].double(), -1)
            targets = [(t, s[t + 1]) for t in range(len(s) - 1) if s[t + 1] not in specials]
            rows, cols = zip(*targets)
            total -= float(logp[list(rows), list(cols)].sum())
            n += len(targets)
    last = [e for e in events if e["kind"] == "eval"][-1]
    assert total / n == pytest.approx(last["heldout_clm_loss"], rel=1e-4)


def test_clm_checkpoint_round_trips_and_stays_causal(clm_run):
    _, _, out, model = clm_run
    loaded, cfg, _ = load_folder(out)
    ids = torch.tensor([[2, 7, 8, 9, 10, 3]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids)[0], model(ids)[0], atol=1e-6)
        changed = ids.clone()
        changed[0, 4] = 11
        a, b = loaded(ids)[0], loaded(changed)[0]
    assert torch.allclose(a[0, :4], b[0, :4], atol=1e-6) and not torch.allclose(a[0, 4:], b[0, 4:])


def test_clm_checkpoint_under_transformers_is_refused_with_one_clear_message(clm_run):
    """A fresh causal run has no token types: DistilBERT layout, which has no causal mask. (Its
    default pre-norm is refused first; a post-norm one reaches the causal message.)"""
    from core.encoder.hf_checkpoint import transformers_layout
    cfg = small_config(attention="causal", norm="post")
    with pytest.raises(ModelUnavailable, match="causal attention mask, which transformers' DistilBERT "
                                               "does not have.*from-scratch encoder") as e:
        transformers_layout(cfg)
    assert e.value.fix == {"kind": "settings", "settings": {"backend": "scratch"}}


@pytest.fixture(scope="module")
def pooled_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "ap"
    events = []
    trainer = Trainer(tiny_config(corpus, out, objective="simcse", pooling="attention", steps=30,
                                  eval_every=30, log_every=5, dropout=0.1, lr=1e-3))
    summary = trainer.run(progress=events.append)
    return summary, events, out, trainer


def test_attention_pooling_trains_its_query(pooled_run):
    summary, events, out, trainer = pooled_run
    losses = [e["loss"] for e in events if e["kind"] == "step"]
    assert losses[-1] < 0.7 * losses[0]
    query = trainer.body.pooling_query
    assert query is not None and float(query.detach().abs().max()) > 1e-4       # moved from zero: trained
    meta = json.loads((out / "encoderscope.json").read_text())
    assert meta["config"]["pooling"] == "attention"
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["config"]["pooling"] == "attention"


def test_attention_pooled_checkpoint_embeds_with_its_pooling_by_default(pooled_run):
    from core.encoder.backends import clear_cache, get_backend
    _, _, out, trainer = pooled_run
    clear_cache()
    b = get_backend(str(out), "scratch", device="cpu", precision="fp32")
    texts = ["the cat eats fish.", "anna lives in paris and speaks french at home."]
    assert b.default_pooling == "attention"
    vecs = b.embed(texts)
    # independent: the saved weights through the model, pooled by NumPy with the saved query
    model, _, _ = load_folder(out)
    q = model.pooling_query.detach().double().numpy()
    for text, v in zip(texts, vecs):
        ids = b.encode_ids([text])[0][0]
        with torch.no_grad():
            h = model(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        want = numpy_ref.l2_normalize(numpy_ref.pool(h, np.ones(len(ids), bool), "attention", q))
        np.testing.assert_allclose(v, want, atol=1e-5)
    assert not np.allclose(vecs, b.embed(texts, pooling="mean"), atol=1e-4)
    # and the trainer's own embedding used the same pooling
    assert b.fingerprint().pooling == "attention"


def test_pooling_attention_without_a_query_is_one_clear_error():
    from core.encoder.backends import get_backend
    b = get_backend("random:dim=32,layers=1,heads=2,ffn=64", "scratch", device="cpu", precision="fp32")
    with pytest.raises(InputError, match="has no learned query vector.*train a model that has one") as e:
        b.embed(["a cat"], pooling="attention")
    assert e.value.fix == {"kind": "train", "settings": {"objective": "simcse", "pooling": "attention"}}
    with pytest.raises(InputError, match="no learned query"):
        b.fingerprint("attention")


@pytest.mark.parametrize("attention, types", [("causal", 2), ("bidirectional", 0)])
def test_hf_backend_runs_a_causal_attention_pooled_bert_layout_checkpoint(tmp_path, attention, types):
    """Token types map our checkpoint to BERT, whose decoder mask is causal; without them it is
    DistilBERT (bidirectional only): the transformers backend gives our encoder's vectors and
    attentions, with the query kept beside the transformers model."""
    from transformers import AutoTokenizer

    from core.encoder.backends import clear_cache, get_backend
    from core.encoder.sources import DEFAULT_MODEL, resolve
    tok = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder))
    cfg = small_config(attention=attention, norm="post", type_vocab_size=types, vocab_size=len(tok),
                       pooling="attention")
    model = randomised(EncoderForMaskedLM(cfg), seed=4)
    save_checkpoint(model, tok, tmp_path)
    clear_cache()
    ours = get_backend(str(tmp_path), "scratch", device="cpu", precision="fp32")
    theirs = get_backend(str(tmp_path), "hf", device="cpu", precision="fp32")
    texts = ["a small cat sat on the mat", "dogs bark"]
    assert theirs.default_pooling == "attention"
    np.testing.assert_allclose(theirs.embed(texts), ours.embed(texts), atol=1e-5)
    a, b = ours.inspect(texts[0]), theirs.inspect(texts[0])
    np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-5)
    assert np.all(np.triu(b.attentions[0, 0], 1) == 0) == (attention == "causal")


def test_hf_backend_refuses_a_causal_distilbert_layout_checkpoint(tmp_path, run):
    from transformers import AutoTokenizer

    from core.encoder.sources import DEFAULT_MODEL, resolve
    tok = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder))
    model = randomised(EncoderForMaskedLM(small_config(attention="causal", norm="post", vocab_size=len(tok))))
    save_checkpoint(model, tok, tmp_path)
    r = run("embed", "a cat", "--model", str(tmp_path), "--backend", "hf", check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("error:") == 1 and "DistilBERT does not have" in r.stderr
    assert "--backend scratch" in r.stderr
    # the command it suggests works
    run("embed", "a cat", "--model", str(tmp_path), "--backend", "scratch")


def test_why_splits_an_attention_pooled_cosine_exactly():
    from core.evaluate.why import embed_score, pair_contributions
    rng = np.random.default_rng(0)
    h, g, q = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=8)
    c = pair_contributions(h, g, "attention", q)
    assert c.shape == (4, 6)
    assert c.sum() == pytest.approx(embed_score(h, g, "attention", q), abs=1e-6)
    # a different query gives other weights, so another split and another score
    assert not np.allclose(c, pair_contributions(h, g, "attention", -q))


@pytest.mark.slow            # ~35 s: minilm's weights and optimizer state are written to disk
def test_clm_from_minilm_round_trips_on_both_backends(corpus, tmp_path):
    """minilm has token types, so its clm run maps to transformers' BERT with the decoder's
    causal mask: the same vectors and next-token logits from both backends."""
    from core.encoder.backends import clear_cache, get_backend
    out = tmp_path / "clm-minilm"
    Trainer(tiny_config(corpus, out, objective="clm", attention="causal", init="minilm", tokenizer="wordpiece",
                        steps=4, eval_every=4, batch_size=8, max_length=16, eval_sentences=16,
                        lr=1e-4)).run()
    clear_cache()
    ours = get_backend(str(out), "scratch", device="cpu", precision="fp32")
    theirs = get_backend(str(out), "hf", device="cpu", precision="fp32")
    texts = ["the cat eats fish and then it meows.", "anna lives in paris"]
    np.testing.assert_allclose(theirs.embed(texts), ours.embed(texts), atol=1e-5)
    ids = ours.encode_ids(texts[:1])[0][0]
    a, _ = ours.mlm_logits(ids)
    b, _ = theirs.mlm_logits(ids)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)
    assert np.all(np.triu(theirs.inspect(texts[0]).attentions[-1, 0], 1) == 0)


def test_an_attention_pooled_run_resumes_with_its_query(pooled_run, tmp_path):
    """The query is one more parameter of the optimizer: resuming restores its moments too."""
    import shutil

    from core.train.config import TrainConfig
    _, _, out, _ = pooled_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = load_folder(copy)[0].pooling_query.detach().clone()
    trainer = Trainer(TrainConfig.from_checkpoint(copy, steps=34))
    summary = trainer.run()
    assert summary["steps"] == 34 and summary["steps_this_run"] == 4
    after = load_folder(copy)[0].pooling_query.detach()
    assert not torch.equal(before, after)


def test_the_model_list_says_how_a_checkpoint_attends_and_pools(pooled_run, clm_run):
    from core.encoder.catalog import list_models, trained_pooling
    rows = {r["name"]: r for r in list_models([pooled_run[2], clm_run[2]], include_trained=False)}
    assert rows[str(pooled_run[2])]["pooling"] == "attention" and rows[str(pooled_run[2])]["available"]
    assert rows[str(clm_run[2])]["attention"] == "causal" and rows[str(clm_run[2])]["pooling"] == "mean"
    assert rows["minilm"]["attention"] == "bidirectional"
    assert trained_pooling(str(pooled_run[2])) == "attention"
    assert trained_pooling("minilm") is None and trained_pooling("/nowhere") is None
