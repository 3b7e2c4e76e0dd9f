"""A trained checkpoint runs under both encoders (core/encoder/hf_checkpoint.py): transformers' own
DistilBERT / BERT, built from our config, gives what our from-scratch encoder gives; a pre-norm
checkpoint, which transformers has no architecture for, is refused with a message that names
the encoder that reads it - and that command works."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.encoder.hf_checkpoint import ours_to_bert
from core.encoder.weights import BERT_KEY_MAP
from core.train.trainer import Trainer
from tests.support.train_corpus import tiny_config, write_corpus

TEXT = "every morning the [MASK] eats fish and then it [MASK] ."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("hfck") / "gen.txt", n=400)


def train(corpus, out, **kw):
    Trainer(tiny_config(corpus, out, steps=20, eval_every=1000, **kw)).run()
    return out


@pytest.fixture(scope="module")
def post_norm(corpus, tmp_path_factory):
    return train(corpus, tmp_path_factory.mktemp("post") / "ck", norm="post", positions="sinusoidal")


@pytest.fixture(scope="module")
def pre_norm(corpus, tmp_path_factory):
    return train(corpus, tmp_path_factory.mktemp("pre") / "ck", norm="pre")


def fill_mask_json(model, backend, run):
    p = run("fill-mask", TEXT, "--model", str(model), "--backend", backend, "--top-k", "5", "--json")
    return json.loads(p.stdout)


def test_cli_fill_mask_same_top_k_under_both_encoders(post_norm, run):
    assert not (post_norm / "config.json").exists()      # a checkpoint: our config only
    hf, scratch = fill_mask_json(post_norm, "hf", run), fill_mask_json(post_norm, "scratch", run)
    assert len(hf["masks"]) == len(scratch["masks"]) == 2
    for a, b in zip(hf["masks"], scratch["masks"]):
        assert [p["token"] for p in a["predictions"]] == [p["token"] for p in b["predictions"]]
        np.testing.assert_allclose([p["score"] for p in a["predictions"]],
                                   [p["score"] for p in b["predictions"]], atol=1e-5)


def test_transformers_model_is_distilbert_with_equal_attentions(post_norm):
    hf, scratch = get_backend(str(post_norm), "hf", device="cpu"), get_backend(str(post_norm), "scratch", device="cpu")
    assert type(hf.model).__name__ == "DistilBertForMaskedLM" and hf.has_mlm
    a, b = hf.inspect("the cat meows in the garden ."), scratch.inspect("the cat meows in the garden .")
    assert a.tokens == b.tokens
    np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-5)


def test_pre_norm_checkpoint_is_sent_to_the_scratch_encoder(pre_norm, run):
    p = run("fill-mask", TEXT, "--model", str(pre_norm), "--backend", "hf", check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("error:") and "pre-norm" in p.stderr and "--backend scratch" in p.stderr
    assert fill_mask_json(pre_norm, "scratch", run)["masks"]             # the suggested command works


def test_bert_names_round_trip_through_the_loaders_key_map():
    """ours_to_bert is core/encoder/weights.BERT_KEY_MAP run backwards: each name comes back to itself."""
    import re
    ours = ["embeddings.word_embeddings.weight", "embeddings.token_type_embeddings.weight",
            "distilbert.embeddings.LayerNorm.bias", "transformer.layer.3.attention.q_lin.weight",
            "transformer.layer.0.attention.out_lin.bias", "transformer.layer.1.sa_layer_norm.weight",
            "transformer.layer.11.ffn.lin1.weight", "transformer.layer.2.ffn.lin2.bias",
            "transformer.layer.0.output_layer_norm.weight", "vocab_transform.weight",
            "vocab_layer_norm.bias", "vocab_projector.bias"]
    for name in ours:
        bert = ours_to_bert(name)
        for pattern, repl in BERT_KEY_MAP:
            back, n = re.subn(pattern, repl, bert)
            if n:
                break
        assert n and back == name.removeprefix("distilbert."), (name, bert, back)


@pytest.mark.slow
def test_minilm_started_checkpoint_runs_as_bert(corpus, tmp_path):
    """A run started from minilm keeps token types: transformers reads it as BERT."""
    out = train(corpus, tmp_path / "mini", init="minilm", tokenizer="wordpiece", norm="post")
    hf, scratch = get_backend(str(out), "hf", device="cpu"), get_backend(str(out), "scratch", device="cpu")
    assert type(hf.model).__name__ == "BertForMaskedLM"
    a, b = hf.fill_mask(TEXT, top_k=5).to_dict(), scratch.fill_mask(TEXT, top_k=5).to_dict()
    assert [p["token"] for p in a["masks"][0]["predictions"]] == [p["token"] for p in b["masks"][0]["predictions"]]
    with torch.no_grad():
        np.testing.assert_allclose(hf.embed(["a dog barks ."]), scratch.embed(["a dog barks ."]), atol=1e-4)


def test_contrastive_checkpoint_without_head_embeds_the_same(corpus, tmp_path):
    """A SimCSE run keeps no MLM head: transformers' DistilBertModel, same sentence vectors."""
    out = train(corpus, tmp_path / "simcse", norm="post", objective="simcse", dropout=0.1)
    hf, scratch = get_backend(str(out), "hf", device="cpu"), get_backend(str(out), "scratch", device="cpu")
    assert type(hf.model).__name__ == "DistilBertModel" and not hf.has_mlm
    texts = ["the dog barks in the park .", "anna lives in paris and speaks french at home ."]
    for pooling in ("mean", "cls"):
        np.testing.assert_allclose(hf.embed(texts, pooling=pooling), scratch.embed(texts, pooling=pooling),
                                   atol=1e-5)
