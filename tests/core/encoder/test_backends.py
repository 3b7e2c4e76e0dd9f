"""Both backends through the one API: same numbers on the same weights, and clear errors."""
import numpy as np
import pytest
import torch

from core.encoder.backends import EmbedStats, get_backend
from core.encoder.catalog import list_models
from core.encoder.fingerprint import Fingerprint
from core.errors import InputError, ModelUnavailable, NoMLMHead

SENTENCES = ["The cat sat on the mat.", "Stock markets fell sharply on Monday.",
             "A kitten was sitting on the rug.", "hi"]


@pytest.fixture(scope="module")
def both(minilm, minilm_hf):
    """minilm on our encoder and on transformers."""
    return minilm, minilm_hf


def test_backends_agree_on_minilm(both):
    ours, hf = both
    for pooling in ("mean", "cls", "max"):
        a, b = ours.embed(SENTENCES, pooling=pooling), hf.embed(SENTENCES, pooling=pooling)
        assert a.dtype == np.float32 and a.shape == (4, 384)
        np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(a, b, atol=1e-5)
    ia, ib = ours.inspect(SENTENCES[0]), hf.inspect(SENTENCES[0])
    assert ia.tokens == ib.tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert ia.attentions.shape == (6, 12, 9, 9) and ia.hidden_states.shape == (7, 9, 384)
    np.testing.assert_allclose(ia.attentions, ib.attentions, atol=1e-5)
    np.testing.assert_allclose(ia.attentions.sum(-1), 1.0, atol=1e-5)


def test_embeddings_match_sentence_transformers_recipe(both):
    """all-MiniLM-L6-v2 is mean pooling + L2 norm over BertModel: do it by hand with transformers."""
    ours, hf = both
    tok = hf.tokenizer
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = hf.model(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).numpy()
    np.testing.assert_allclose(ours.embed(SENTENCES), ref, atol=1e-5)


def test_embeddings_are_meaningful_and_batch_independent(both):
    ours, _ = both
    v = ours.embed(SENTENCES, batch_size=1)
    np.testing.assert_allclose(v, ours.embed(SENTENCES, batch_size=3), atol=1e-5)
    sims = v @ v.T
    assert sims[0, 2] > 0.5 > sims[0, 1]       # paraphrase close, unrelated far


def test_order_kept_with_length_bucketing(both):
    ours, _ = both
    texts = ["short", "a much much longer sentence about many different things and more", "mid length one"]
    together = ours.embed(texts, batch_size=2)
    one_by_one = np.stack([ours.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


def test_truncation_is_reported(both):
    ours, _ = both
    stats = EmbedStats()
    v = ours.embed(["word " * 700, "short"], stats=stats)
    assert stats.truncated == 1 and stats.truncated_indices == [0] and v.shape == (2, 384)
    assert ours.inspect("word " * 700).truncated == 702 - 512


def test_progress_and_cancel(both):
    import threading
    ours, _ = both
    seen = []
    ours.embed(SENTENCES * 3, batch_size=4, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(4, 12), (8, 12), (12, 12)]
    from core.errors import Cancelled
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        ours.embed(SENTENCES, cancel=ev)


@pytest.mark.parametrize("bad", ["", "   \n\t"])
def test_empty_text_is_refused(both, bad):
    with pytest.raises(InputError, match="empty"):
        both[0].embed(["fine", bad])


def test_fingerprint_is_backend_independent(both):
    ours, hf = both
    a, b = ours.fingerprint("mean"), hf.fingerprint("mean")
    assert a == b and a.compatible(b) and a.dim == 384
    assert not a.compatible(ours.fingerprint("cls"))
    assert Fingerprint.from_dict(a.to_dict()) == a
    assert "minilm" in a.describe()


def test_backend_cache_returns_same_object(both):
    assert get_backend("minilm", "scratch", device="cpu") is both[0]


def test_tiny_distilbert_backends_agree(tiny_distilbert):
    ours, hf = get_backend(str(tiny_distilbert), "scratch"), get_backend(str(tiny_distilbert), "hf")
    np.testing.assert_allclose(ours.embed(SENTENCES), hf.embed(SENTENCES), atol=1e-5)
    np.testing.assert_allclose(ours.inspect(SENTENCES[0]).attentions, hf.inspect(SENTENCES[0]).attentions,
                               atol=1e-5)
    fa = ours.fill_mask("the [MASK] sat on the [MASK] .", top_k=5, per_layer=True).to_dict()
    fb = hf.fill_mask("the [MASK] sat on the [MASK] .", top_k=5, per_layer=True).to_dict()
    for ma, mb in zip(fa["masks"], fb["masks"]):
        assert [p["token_id"] for p in ma["predictions"]] == [p["token_id"] for p in mb["predictions"]]
        np.testing.assert_allclose([p["score"] for p in ma["predictions"]],
                                   [p["score"] for p in mb["predictions"]], atol=1e-5)
    assert fa["joint"]["text"] == fb["joint"]["text"]
    assert fa["joint"]["score"] == pytest.approx(fb["joint"]["score"], rel=1e-4)
    assert len(fa["per_layer"][0]["layers"]) == 3          # embeddings + 2 layers


def test_fill_mask_matches_transformers_pipeline(tiny_distilbert):
    from transformers import pipeline
    pipe = pipeline("fill-mask", model=str(tiny_distilbert), top_k=5)
    text = "the [MASK] sat on the mat ."
    expected = pipe(text)
    got = get_backend(str(tiny_distilbert), "scratch").fill_mask(text, top_k=5).masks[0]["predictions"]
    assert [p["token_id"] for p in got] == [e["token"] for e in expected]
    np.testing.assert_allclose([p["score"] for p in got], [e["score"] for e in expected], atol=1e-5)
    assert [p["token"] for p in got] == [e["token_str"].strip() for e in expected]


def test_fill_mask_targets_score_multi_piece_words_honestly(tiny_distilbert):
    b = get_backend(str(tiny_distilbert), "scratch")
    text = "the [MASK] sat on the mat ."
    res = b.fill_mask(text, targets=["cat", "dogs"], top_k=5).masks[0]["predictions"]
    by_word = {r["token"]: r for r in res}
    assert by_word["cat"]["multi_piece"] is False
    full = b.fill_mask(text, top_k=200).masks[0]["predictions"]
    assert by_word["cat"]["score"] == pytest.approx(next(p["score"] for p in full if p["token"] == "cat"), abs=1e-6)
    dogs = by_word["dogs"]
    assert dogs["multi_piece"] is True and dogs["pieces"] == ["dog", "##s"]
    # p(dog) at the first of two masks, then p(##s | dog) at the second
    p1 = b.fill_mask("the [MASK] [MASK] sat on the mat .", top_k=200).masks[0]["predictions"]
    p_dog = next(p["score"] for p in p1 if p["token"] == "dog")
    p2 = b.fill_mask("the dog [MASK] sat on the mat .", top_k=200).masks[0]["predictions"]
    p_s = next(p["score"] for p in p2 if p["token_id"] == b.tokenizer.convert_tokens_to_ids("##s"))
    assert dogs["score"] == pytest.approx(p_dog * p_s, rel=1e-4)


def test_joint_completion_fills_every_mask(tiny_distilbert):
    b = get_backend(str(tiny_distilbert), "scratch")
    res = b.fill_mask("[MASK] cat [MASK] on the [MASK] .", top_k=3)
    assert len(res.masks) == 3 and len(res.joint["tokens"]) == 3
    assert "[MASK]" not in res.joint["text"] and 0 < res.joint["score"] <= 1


@pytest.mark.parametrize("text,error,match", [
    ("", InputError, "empty"),
    ("   ", InputError, "empty"),
    ("no mask here", InputError, "no \\[MASK\\]"),
    (" ".join(["[MASK]"] * 20), InputError, "too many"),
])
def test_fill_mask_bad_inputs(tiny_distilbert, text, error, match):
    with pytest.raises(error, match=match):
        get_backend(str(tiny_distilbert), "scratch").fill_mask(text)


def test_unknown_target_is_refused(tiny_distilbert):
    with pytest.raises(InputError, match="not in the model's vocabulary"):
        get_backend(str(tiny_distilbert), "scratch").fill_mask("the [MASK] .", targets=["§§§"])


def test_minilm_has_no_mlm_head(both):
    with pytest.raises(NoMLMHead, match="no masked-LM head"):
        both[0].fill_mask("the [MASK] sat.")


def test_missing_folder_and_wrong_files(tmp_path):
    with pytest.raises(ModelUnavailable, match="does not exist"):
        get_backend(str(tmp_path / "nope"))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("hello")
    with pytest.raises(ModelUnavailable, match="lacks config.json"):
        get_backend(str(tmp_path / "junk"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "distilbert"}')
    (bad / "model.safetensors").write_bytes(b"not really safetensors")
    with pytest.raises(ModelUnavailable):
        get_backend(str(bad))


def test_hub_model_offline_gives_one_clear_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable) as e:
        get_backend("distilbert-base-uncased")
    msg = str(e.value)
    assert "distilbert-base-uncased" in msg and "minilm" in msg and "cache" in msg
    # what it suggests works for what was asked: minilm cannot fill masks, and it says so
    assert "cannot fill in masks" in msg and "train a masked-LM" in msg


def test_bad_backend_and_pooling(both):
    with pytest.raises(InputError, match="backend"):
        get_backend("minilm", "onnx")
    with pytest.raises(InputError, match="pooling"):
        both[0].embed(["x"], pooling="median")


def test_list_models(tiny_distilbert):
    rows = {r["name"]: r for r in list_models([tiny_distilbert])}
    assert rows["minilm"]["available"] and rows["minilm"]["mlm_head"] is False and rows["minilm"]["dim"] == 384
    assert rows["distilbert-base-uncased"]["source"] == "hub"
    tiny = rows[str(tiny_distilbert)]
    assert tiny["available"] and tiny["mlm_head"] and tiny["layers"] == 2


def test_checkpoint_roundtrip(tmp_path, tiny_distilbert):
    from core.encoder.weights import load_folder, save_checkpoint
    b = get_backend(str(tiny_distilbert), "scratch")
    out = save_checkpoint(b.model, b.tokenizer, tmp_path / "ckpt")
    again = get_backend(str(out), "scratch")
    assert again.source.kind == "trained" and again.has_mlm
    np.testing.assert_allclose(again.embed(SENTENCES), b.embed(SENTENCES), atol=1e-6)
    model, cfg, layout = load_folder(out)
    assert layout == "encoderscope" and cfg == b.config


def test_inspect_sentence_pair_uses_token_types(both):
    ours, hf = both
    a, b = ours.inspect("the cat sat", pair="a dog ran"), hf.inspect("the cat sat", pair="a dog ran")
    assert a.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "ran", "[SEP]"]
    np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-5)
    # token type 1 for the second sentence really changes the numbers
    flat = ours.inspect("the cat sat [SEP] a dog ran")
    assert flat.tokens == a.tokens and np.abs(flat.attentions - a.attentions).max() > 1e-3


def test_trained_models_in_the_data_folder_are_listed(tmp_path, monkeypatch, tiny_distilbert):
    from core.encoder.weights import save_checkpoint
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    b = get_backend(str(tiny_distilbert))
    out = save_checkpoint(b.model, b.tokenizer, tmp_path / "models" / "run-1")
    rows = {r["name"]: r for r in list_models()}
    assert rows[str(out)]["source"] == "trained" and rows[str(out)]["mlm_head"]


def test_the_runs_of_an_experiment_are_listed_too(tmp_path, monkeypatch, tiny_distilbert):
    from core.encoder.catalog import trained_models
    from core.encoder.weights import save_checkpoint
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    b = get_backend(str(tiny_distilbert))
    runs = [save_checkpoint(b.model, b.tokenizer, tmp_path / "models" / "experiments" / "pooling-1" / name)
            for name in ("mean", "cls")]
    alone = save_checkpoint(b.model, b.tokenizer, tmp_path / "models" / "run-1")
    (tmp_path / "models" / "experiments" / "pooling-1" / "notes").mkdir()
    assert trained_models() == sorted([*runs, alone])
    assert {str(p) for p in runs} <= {r["name"] for r in list_models()}


def test_model_retrained_in_place_is_reloaded(tmp_path, tiny_distilbert):
    import os

    from core.encoder.weights import save_checkpoint
    b = get_backend(str(tiny_distilbert))
    out = save_checkpoint(b.model, b.tokenizer, tmp_path / "ckpt")
    first = get_backend(str(out))
    with torch.no_grad():
        b.model.distilbert.embeddings.LayerNorm.bias.add_(1.0)
    save_checkpoint(b.model, b.tokenizer, out)
    st = (out / "model.safetensors").stat()
    os.utime(out / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    second = get_backend(str(out))
    assert second is not first
    assert not np.allclose(first.embed(["a cat"]), second.embed(["a cat"]))
    with torch.no_grad():
        b.model.distilbert.embeddings.LayerNorm.bias.sub_(1.0)


def _copy_weights(src, dst, tokenizer_from=None):
    import shutil
    dst.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(src / name, dst / name)
    if tokenizer_from is not None:
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
            if (tokenizer_from / name).is_file():
                shutil.copy(tokenizer_from / name, dst / name)
    return dst


@pytest.mark.parametrize("backend", ["scratch", "hf"])
def test_folder_without_or_with_the_wrong_tokenizer(tmp_path, tiny_distilbert, backend):
    """transformers builds an empty all-[UNK] tokenizer for a folder without tokenizer files, and a
    bigger vocabulary than the model's crashes inside the embedding: both must be clear errors."""
    from core.encoder.sources import resolve
    no_tok = _copy_weights(tiny_distilbert, tmp_path / "no_tok")
    with pytest.raises(ModelUnavailable, match="no tokenizer files"):
        get_backend(str(no_tok), backend)
    wrong = _copy_weights(tiny_distilbert, tmp_path / "wrong_tok", tokenizer_from=resolve("minilm").folder)
    with pytest.raises(ModelUnavailable, match="30,522 tokens but the model's vocabulary has"):
        get_backend(str(wrong), backend)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8"])
def test_bad_batch_size_is_refused(both, bad):
    """None is not bad: it asks for the device's planned batches (test_batching)."""
    with pytest.raises(InputError, match="batch size"):
        both[0].embed(["a cat"], batch_size=bad)


def test_fill_mask_per_layer_agrees_across_backends_and_ends_at_the_output(tiny_distilbert):
    ours, hf = get_backend(str(tiny_distilbert), "scratch"), get_backend(str(tiny_distilbert), "hf")
    text = "the [MASK] sat on the [MASK] ."
    fa, fb = ours.fill_mask(text, top_k=4, per_layer=True), hf.fill_mask(text, top_k=4, per_layer=True)
    for la, lb, m in zip(fa.per_layer, fb.per_layer, fa.masks):
        assert la["position"] == m["position"] and len(la["layers"]) == 3
        for ga, gb in zip(la["layers"], lb["layers"]):
            assert [g["token"] for g in ga] == [g["token"] for g in gb]
            np.testing.assert_allclose([g["score"] for g in ga], [g["score"] for g in gb], atol=1e-5)
        # The last layer's guesses are the model's own predictions.
        assert [g["token"] for g in la["layers"][-1]] == [p["token"] for p in m["predictions"]]
        np.testing.assert_allclose([g["score"] for g in la["layers"][-1]],
                                   [p["score"] for p in m["predictions"]], atol=1e-6)
    # top-k beyond the vocabulary gives the whole vocabulary, per layer too, not a crash
    big = ours.fill_mask("the [MASK] .", top_k=10**6, per_layer=True)
    V = len(ours.tokenizer)
    assert len(big.masks[0]["predictions"]) == V and len(big.per_layer[0]["layers"][0]) == V


def test_joint_score_is_the_product_of_the_sequential_fills(tiny_distilbert):
    b = get_backend(str(tiny_distilbert), "scratch")
    res = b.fill_mask("the [MASK] sat on the [MASK] .", top_k=1)
    (m1, m2) = res.masks
    first = max((m1, m2), key=lambda m: m["predictions"][0]["score"])
    second = m2 if first is m1 else m1
    words = ["the", "[MASK]", "sat", "on", "the", "[MASK]", "."]
    words[first["position"] - 1] = first["predictions"][0]["token"]   # position counts [CLS]
    again = b.fill_mask(" ".join(words), top_k=1).masks[0]
    assert again["position"] == second["position"]
    expected = first["predictions"][0]["score"] * again["predictions"][0]["score"]
    assert res.joint["score"] == pytest.approx(expected, rel=1e-5)


def test_mask_in_any_case_and_empty_targets(tiny_distilbert):
    b = get_backend(str(tiny_distilbert), "scratch")
    upper = b.fill_mask("the [MASK] sat .", top_k=3).masks
    assert b.fill_mask("the [mask] sat .", top_k=3).masks == upper
    assert b.fill_mask("the [Mask] sat .", top_k=3, targets=[]).masks == upper   # [] = no restriction
    for empty in ("", " , ,"):
        with pytest.raises(InputError, match="targets hold no words"):
            b.fill_mask("the [MASK] sat .", targets=empty)


def test_concurrent_loads_share_one_model(tmp_path, tiny_distilbert):
    """Workers asking for the same model at once get the one object, loaded once."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor
    folder = tmp_path / "fresh"
    shutil.copytree(tiny_distilbert, folder)
    barrier = __import__("threading").Barrier(6)

    def load(_):
        barrier.wait()
        return get_backend(str(folder), "scratch")

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(load, range(6)))
    assert all(g is got[0] for g in got)
    np.testing.assert_allclose(got[0].embed(SENTENCES), get_backend(str(tiny_distilbert)).embed(SENTENCES), atol=1e-6)


def test_a_loaded_model_holds_every_weight_of_its_checkpoint(tiny_distilbert):
    """Loading skips the random initialisation: every parameter must then be the file's."""
    from safetensors.torch import load_file

    from core.encoder.weights import load_folder
    torch.manual_seed(0)
    model, _, _ = load_folder(tiny_distilbert)
    saved = load_file(str(tiny_distilbert / "model.safetensors"))
    params = dict(model.named_parameters(remove_duplicate=False))
    assert set(params) == set(saved) | {"vocab_projector.weight"}
    for name, p in params.items():
        expected = saved["distilbert.embeddings.word_embeddings.weight" if name == "vocab_projector.weight" else name]
        assert torch.equal(p.detach(), expected), name
    assert model.vocab_projector.weight is model.distilbert.embeddings.word_embeddings.weight


def test_joint_completion_keeps_the_users_text(tiny_distilbert):
    """An uncased model reads lowercase; the completion it offers is the user's own sentence,
    case and spacing kept, with each mask filled in."""
    from core.encoder.fillmask import fill_in
    b = get_backend(str(tiny_distilbert))
    res = b.fill_mask("The Cat [MASK] on the MAT , said [MASK] .")
    words = [b.tokenizer.decode([b.tokenizer.convert_tokens_to_ids(t)]).strip() for t in res.joint["tokens"]]
    assert res.joint["text"] == f"The Cat {words[0]} on the MAT , said {words[1]} ."
    assert fill_in("a [MASK] b [MASK]", "[MASK]", ["x", "##y"]) == "a x by"
    assert fill_in("a [MASK] b [MASK]", "[MASK]", ["x"]) == "a x b [MASK]"
