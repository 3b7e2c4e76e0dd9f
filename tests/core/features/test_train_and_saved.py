"""The SAE as saved: codes and reconstruction equal NumPy from the file's weights; the same seed
gives the same SAE; a stopped run resumed equals one that ran through; planted directions are
found; damaged, foreign and mismatched folders are refused with one clear error."""
import json
import shutil

import numpy as np
import pytest
import torch

from core.errors import InputError
from core.features.collect import iter_activations
from core.features.saved import META_FILE, SAELENS_CFG, WEIGHTS_FILE, check_model, load_sae
from core.features.train import TrainConfig, held_out_mask, train_on_activations, train_sae
from tests.support.feature_models import small_config


def numpy_codes(w: dict, x: np.ndarray, k: int) -> np.ndarray:
    """TopK SAE codes written out in float64 from the weights alone."""
    pre = x @ w["W_enc"].astype(np.float64) + w["b_enc"].astype(np.float64)
    codes = np.zeros_like(pre)
    top = np.argsort(-pre, axis=1, kind="stable")[:, :k]
    rows = np.arange(len(pre))[:, None]
    codes[rows, top] = np.maximum(pre[rows, top], 0.0)
    return codes


def test_codes_and_reconstruction_equal_numpy_from_the_saved_file(trained, bert_pair, corpus):
    from safetensors.numpy import load_file
    folder, result = trained
    w = load_file(str(folder / WEIGHTS_FILE))
    sae, meta = load_sae(folder)
    x = torch.cat([b.acts for b in iter_activations(bert_pair[0], corpus[:20], meta.site)])
    with torch.no_grad():
        x_hat, codes = sae(x)
    want = numpy_codes(w, x.double().numpy(), meta.k)
    np.testing.assert_allclose(codes.numpy(), want, atol=1e-6, rtol=1e-6)
    assert ((codes > 0).sum(1) <= meta.k).all() and (codes > 0).sum(1).float().mean() > meta.k / 2
    np.testing.assert_allclose(x_hat.numpy(), want @ w["W_dec"].astype(np.float64) + w["b_dec"], atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(w["W_dec"], axis=1), 1.0, atol=1e-6)
    # it learned something: better than the mean at reconstructing the tokens
    fvu = float(((x_hat - x) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())
    assert fvu < 0.8, fvu


def test_saelens_layout_on_disk(trained):
    folder, result = trained
    cfg = json.loads((folder / SAELENS_CFG).read_text())
    assert cfg["architecture"] == "topk" and cfg["apply_b_dec_to_input"] is False
    assert (cfg["d_in"], cfg["d_sae"], cfg["k"]) == (32, 64, 4)
    assert cfg["metadata"]["hook_name"] == "L2.resid"


def test_same_seed_same_sae_and_another_seed_another(bert_pair, corpus, trained, tmp_path):
    from safetensors.numpy import load_file
    again = train_sae(bert_pair[0], corpus, small_config(), tmp_path / "again")
    first = load_file(str(trained[0] / WEIGHTS_FILE))
    second = load_file(str(tmp_path / "again" / WEIGHTS_FILE))
    for name in first:
        assert np.array_equal(first[name], second[name]), name
    other = train_sae(bert_pair[0], corpus, small_config(seed=1), tmp_path / "other")
    assert not np.array_equal(first["W_dec"], load_file(str(other.folder / WEIGHTS_FILE))["W_dec"])
    assert again.tokens_trained == trained[1].tokens_trained


def test_a_stopped_run_resumed_equals_one_that_ran_through(bert_pair, corpus, trained, tmp_path):
    from safetensors.numpy import load_file
    steps = []

    def stop_after_5():
        steps.append(1)
        return len(steps) > 6           # the first call is before collecting the first round
    first = train_sae(bert_pair[0], corpus, small_config(), tmp_path / "run", should_stop=stop_after_5)
    assert not first.finished and 0 < first.tokens_trained < trained[1].tokens_trained
    load_sae(tmp_path / "run")          # what it had is saved and opens
    second = train_sae(bert_pair[0], corpus, small_config(), tmp_path / "run")
    assert second.resumed and second.finished and second.tokens_trained == trained[1].tokens_trained
    want = load_file(str(trained[0] / WEIGHTS_FILE))
    got = load_file(str(tmp_path / "run" / WEIGHTS_FILE))
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    with pytest.raises(InputError, match="another k:"):
        train_sae(bert_pair[0], corpus, small_config(k=5), tmp_path / "run")
    with pytest.raises(InputError, match="another corpus_sha256"):
        train_sae(bert_pair[0], corpus[:-1], small_config(), tmp_path / "run")


def test_held_out_split_is_seeded_and_both_sides_non_empty():
    a = held_out_mask(1000, 0.1, 0)
    assert np.array_equal(a, held_out_mask(1000, 0.1, 0)) and 60 < a.sum() < 140
    assert not np.array_equal(a, held_out_mask(1000, 0.1, 1))
    assert held_out_mask(2, 0.01, 0).sum() == 1 and held_out_mask(2, 0.99, 0).sum() == 1
    assert held_out_mask(5, 0.0, 0).sum() == 0


def test_planted_sparse_directions_are_recovered():
    """Known answer: activations made of 2 of 24 unit directions each (random positive weights,
    plus an offset); the trained decoder has a row within cosine 0.95 of at least 90% of them."""
    torch.manual_seed(1)
    d, n_dirs, n, active = 16, 24, 20000, 2
    dirs = torch.randn(n_dirs, d)
    dirs /= dirs.norm(dim=1, keepdim=True)
    idx = torch.stack([torch.randperm(n_dirs)[:active] for _ in range(n)])
    coef = torch.rand(n, active) * 2 + 0.5
    x = (coef[:, :, None] * dirs[idx]).sum(1) + 0.3 * torch.randn(d)
    sae, result = train_on_activations(x, TrainConfig(width=64, k=3, tokens=200_000, batch=1024, lr=1e-2, seed=0))
    best = (dirs @ sae.W_dec.detach().T).max(1).values
    assert (best >= 0.95).float().mean() >= 0.9, best
    # and a shuffled control (the same norms, random directions) is not "recovered" by chance
    control = torch.randn(n_dirs, d)
    control /= control.norm(dim=1, keepdim=True)
    assert ((control @ sae.W_dec.detach().T).max(1).values >= 0.95).float().mean() < 0.5


def test_load_refuses_damaged_foreign_and_odd_folders(trained, tmp_path):
    folder = trained[0]

    def copy(name):
        c = tmp_path / name
        shutil.copytree(folder, c)
        return c
    with pytest.raises(InputError, match="no SAE folder"):
        load_sae(tmp_path / "missing")
    foreign = copy("foreign")
    (foreign / META_FILE).unlink()
    with pytest.raises(InputError, match="another tool"):
        load_sae(foreign)
    cut = copy("cut")
    data = (cut / WEIGHTS_FILE).read_bytes()
    (cut / WEIGHTS_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="cannot be read"):
        load_sae(cut)
    bad_json = copy("bad_json")
    (bad_json / META_FILE).write_text("{not json")
    with pytest.raises(InputError, match="cannot be read"):
        load_sae(bad_json)
    wider = copy("wider")
    meta = json.loads((wider / META_FILE).read_text())
    (wider / META_FILE).write_text(json.dumps({**meta, "width": 65}))
    with pytest.raises(InputError, match="W_enc should be"):
        load_sae(wider)
    from safetensors.torch import load_file, save_file
    scaled = copy("scaled")
    t = load_file(str(scaled / WEIGHTS_FILE))
    save_file({**t, "W_dec": t["W_dec"] * 2}, str(scaled / WEIGHTS_FILE))
    with pytest.raises(InputError, match="not unit vectors"):
        load_sae(scaled)
    nan = copy("nan")
    save_file({**t, "b_enc": t["b_enc"] * float("nan")}, str(nan / WEIGHTS_FILE))
    with pytest.raises(InputError, match="NaN"):
        load_sae(nan)


def test_check_model_refuses_an_sae_of_another_model(trained, bert_pair, tiny_distilbert):
    from core.encoder.backends import get_backend
    _, meta = load_sae(trained[0])
    check_model(meta, bert_pair[0])
    other = get_backend(str(tiny_distilbert), "scratch", device="cpu", precision="fp32")
    with pytest.raises(InputError, match="trained on"):
        check_model(meta, other)


def test_a_folder_with_an_sae_and_no_state_is_not_overwritten(trained, bert_pair, corpus, tmp_path):
    c = tmp_path / "done"
    shutil.copytree(trained[0], c)
    for name in ("train_state.json", "train_state.safetensors"):
        (c / name).unlink()
    with pytest.raises(InputError, match="already holds an SAE"):
        train_sae(bert_pair[0], corpus, small_config(), c)


def test_streamed_training_resumes_exactly_too(bert_pair, corpus, tmp_path, monkeypatch):
    """A corpus too large to keep (the budget set to 0 here) streams round by round, every epoch
    collected again: a stopped and resumed run still equals one that ran through."""
    from safetensors.numpy import load_file

    from core.features import train
    monkeypatch.setattr(train, "CACHE_BYTES", 0)
    monkeypatch.setattr(train, "ROUND_SENTENCES", 40)       # several rounds per epoch
    straight = train_sae(bert_pair[0], corpus, small_config(), tmp_path / "straight")
    calls = []
    stopped = train_sae(bert_pair[0], corpus, small_config(), tmp_path / "run",
                        should_stop=lambda: calls.append(1) or len(calls) > 9)
    assert not stopped.finished
    resumed = train_sae(bert_pair[0], corpus, small_config(), tmp_path / "run")
    assert resumed.tokens_trained == straight.tokens_trained
    want = load_file(str(tmp_path / "straight" / WEIGHTS_FILE))
    got = load_file(str(tmp_path / "run" / WEIGHTS_FILE))
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
