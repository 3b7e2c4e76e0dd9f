"""The feature index against brute force over the whole tiny corpus held in memory: densities,
maxima, histograms, the top examples and their highlighted activations, the aligned and promoted
vocabulary (transformers' own MLM head), find by word; and its refusals."""
import shutil

import numpy as np
import pytest
import torch

from core.errors import InputError
from core.features.browse import TOP_EXAMPLES, TOP_VOCAB, FeatureIndex, build_feature_index, token_features
from core.features.collect import iter_activations
from core.features.saved import load_sae


@pytest.fixture(scope="module")
def built(trained, bert_pair, corpus):
    folder = trained[0]
    sae, meta = load_sae(folder)
    build_feature_index(bert_pair[0], sae, meta, corpus, folder)
    return FeatureIndex.load(folder), sae, meta


@pytest.fixture(scope="module")
def brute(built, bert_pair, corpus):
    """Every token's codes at once: (codes (n, width), sentence ids, positions)."""
    _, sae, meta = built
    batches = list(iter_activations(bert_pair[0], corpus, meta.site))
    with torch.no_grad():
        codes = sae.encode(torch.cat([b.acts for b in batches])).numpy()
    sid = torch.cat([b.sentence_ids for b in batches]).numpy()
    return codes, sid, torch.cat([b.positions for b in batches]).numpy()


def test_density_max_and_histogram_are_brute_force_counts(built, brute):
    index, sae, _ = built
    codes, _, _ = brute
    assert index.n_tokens == len(codes)
    fires = (codes > 0).sum(0)
    for f in range(sae.width):
        assert index.density(f) == pytest.approx(fires[f] / len(codes))
        assert index.summary(f).max_activation == pytest.approx(codes[:, f].max(), abs=1e-6)
        edges, counts = index.summary(f).histogram
        assert counts.sum() == fires[f]
        # below the first edge counts in the first bin, above the last in the last
        vals = np.clip(codes[:, f][codes[:, f] > 0], edges[0], np.nextafter(edges[-1], 0))
        np.testing.assert_array_equal(np.histogram(vals, bins=edges)[0], counts)
    assert set(index.features(filter_dead=True)) == set(np.flatnonzero(fires).tolist())
    dens = [index.density(f) for f in index.features(sort="density")]
    assert dens == sorted(dens, reverse=True)
    assert index.features(sort="id", filter_dead=False) == list(range(sae.width))


def test_top_examples_are_the_strongest_tokens_with_their_sentences_activations(built, brute, corpus, bert_pair):
    index, sae, meta = built
    codes, sid, pos = brute
    for f in index.features()[:20]:
        s = index.summary(f)
        want = np.sort(codes[:, f])[::-1][:TOP_EXAMPLES]
        want = want[want > 0]
        np.testing.assert_allclose([e.activation for e in s.top_examples], want, atol=1e-6)
        for e in s.top_examples:
            assert e.sentence == corpus[e.sentence_id]
            ids, _ = bert_pair[0].encode_ids([e.sentence])
            assert e.tokens == bert_pair[0].tokenizer.convert_ids_to_tokens(ids[0])
            rows = np.flatnonzero(sid == e.sentence_id)
            want_row = np.zeros(len(e.tokens))
            want_row[pos[rows]] = codes[rows, f]
            np.testing.assert_allclose(e.token_activations, want_row, atol=1e-6)
            assert e.token_activations[e.position] == pytest.approx(e.activation, abs=1e-6)
        assert s.label != "(silent)" and s.label.split(" / ")[0] in {
            t.lower().removeprefix("##") for t in (e.tokens[e.position] for e in s.top_examples)}


def test_vocabulary_aligned_and_promoted_match_numpy_and_transformers_head(built, bert_pair, trained):
    from transformers import BertForMaskedLM
    index, sae, _ = built
    backend = bert_pair[0]
    mlm = BertForMaskedLM.from_pretrained(str(backend.source.folder), attn_implementation="eager").eval()
    emb = mlm.bert.embeddings.word_embeddings.weight.detach().double().numpy()
    tokens = backend.tokenizer.convert_ids_to_tokens(list(range(len(emb))))
    ok = np.array([not (t.startswith("[") and t.endswith("]")) for t in tokens])
    for f in index.features()[:8]:
        s = index.summary(f)
        d = sae.W_dec[f].detach().double().numpy()
        cos = emb @ d / np.maximum(np.linalg.norm(emb, axis=1), 1e-12)
        cos[~ok] = -np.inf
        best = np.argsort(-cos)[:TOP_VOCAB]
        assert [t for t, _ in s.vocab_aligned] == [tokens[i] for i in best]
        np.testing.assert_allclose([c for _, c in s.vocab_aligned], cos[best], atol=1e-5)
        with torch.no_grad():
            b = sae.b_dec.detach()
            h = torch.stack([b, b + s.max_activation * sae.W_dec[f].detach()])
            logits = mlm.cls(h[None])[0].double().numpy()
        delta = logits[1] - logits[0]
        delta[~ok] = -np.inf
        best = np.argsort(-delta)[:TOP_VOCAB]
        np.testing.assert_allclose([v for _, v in s.promoted], delta[best], atol=1e-4)


def test_find_by_word_is_every_feature_with_that_word_among_its_examples(built):
    index, sae, _ = built
    first = index.summary(index.features()[0]).top_examples[0]
    word = first.tokens[first.position]
    want = {}
    for f in range(sae.width):
        for e in index.summary(f).top_examples:
            if e.tokens[e.position].lower().removeprefix("##") == word.lower().removeprefix("##"):
                want[f] = max(want.get(f, 0), e.activation)
    got = index.find(word.upper())
    assert dict(got) == pytest.approx(want) and got and [a for _, a in got] == sorted(want.values(), reverse=True)
    assert index.find("zebra-not-a-token") == []
    with pytest.raises(InputError):
        index.find("  ")
    with pytest.raises(InputError, match="not one of"):
        index.summary(sae.width)


def test_token_features_are_each_tokens_strongest_codes(built, bert_pair):
    _, sae, meta = built
    got = token_features(bert_pair[0], sae, meta, "the cat sat on the mat.", top=3)
    x = torch.cat([b.acts for b in iter_activations(bert_pair[0], ["the cat sat on the mat."], meta.site,
                                                      include_special=True)])
    with torch.no_grad():
        codes = sae.encode(x)
    assert [t for t, _ in got][:3] == ["[CLS]", "the", "cat"] and len(got) == len(codes)
    for (_, feats), row in zip(got, codes):
        v, i = row.topk(3)
        assert feats == [(int(a), pytest.approx(float(b), abs=1e-6)) for a, b in zip(i, v) if b > 0]


def test_the_index_is_refused_when_damaged_or_of_other_weights(built, trained, tmp_path):
    copy = tmp_path / "c"
    shutil.copytree(trained[0], copy)
    data = (copy / "feature_index.safetensors").read_bytes()
    (copy / "feature_index.safetensors").write_bytes(data[:100])
    with pytest.raises(InputError, match="cannot be read"):
        FeatureIndex.load(copy)
    shutil.rmtree(copy)
    shutil.copytree(trained[0], copy)
    from safetensors.torch import load_file, save_file
    t = load_file(str(copy / "sae_weights.safetensors"))
    save_file({**t, "b_enc": t["b_enc"] + 1}, str(copy / "sae_weights.safetensors"))
    with pytest.raises(InputError, match="other SAE weights"):
        FeatureIndex.load(copy)
    (copy / "feature_index.json").unlink()
    with pytest.raises(InputError, match="no feature index yet"):
        FeatureIndex.load(copy)
