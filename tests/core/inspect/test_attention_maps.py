"""core/inspect/attention_maps.py: aggregations, rollout (hand-computed), hiding tokens, export."""
import numpy as np
import pytest

from core.inspect import attention_maps as A


def random_attentions(L=3, H=4, T=7, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(L, H, T, T))
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


# Two layers, two heads, two tokens; worked out by hand below.
HAND = np.array([
    [[[1.0, 0.0], [0.5, 0.5]],      # layer 0 head 0
     [[1.0, 0.0], [0.5, 0.5]]],     # layer 0 head 1 (same) -> mean A0 = [[1, 0], [.5, .5]]
    [[[0.0, 1.0], [1.0, 0.0]],      # layer 1 head 0
     [[1.0, 0.0], [0.0, 1.0]]],     # layer 1 head 1        -> mean A1 = all 0.5
])


def test_rollout_hand_computed_two_layers():
    # Â0 = (A0 + I) / 2 = [[1, 0], [.25, .75]];  Â1 = (A1 + I) / 2 = [[.75, .25], [.25, .75]]
    # R0 = Â0;  R1 = Â1 @ Â0 = [[.75 + .0625, .1875], [.25 + .1875, .5625]]
    r = A.rollout_layers(HAND)
    np.testing.assert_allclose(r[0], [[1.0, 0.0], [0.25, 0.75]])
    np.testing.assert_allclose(r[1], [[0.8125, 0.1875], [0.4375, 0.5625]])
    np.testing.assert_allclose(A.rollout(HAND), r[1])
    np.testing.assert_allclose(A.rollout(HAND, upto=0), r[0])
    np.testing.assert_allclose(A.aggregate(HAND, "rollout", layer=1), r[1])


def test_rollout_without_residual_is_plain_product():
    r = A.rollout_layers(HAND, residual=False)
    np.testing.assert_allclose(r[1], np.full((2, 2), 0.5) @ np.array([[1, 0], [0.5, 0.5]]))


@pytest.mark.parametrize("mode", A.MODES)
def test_every_aggregation_has_rows_summing_to_one(mode):
    a = random_attentions()
    for layer in range(a.shape[0]):
        m = A.aggregate(a, mode, layer=layer, head=2)
        assert m.shape == (7, 7)
        np.testing.assert_allclose(m.sum(-1), 1.0, atol=1e-5)


def test_rollout_rows_sum_to_one_deep_and_long():
    a = random_attentions(L=12, H=12, T=128, seed=3)
    r = A.rollout_layers(a)
    np.testing.assert_allclose(r.sum(-1), 1.0, atol=1e-9)
    assert (r >= 0).all()


def test_head_and_mean():
    a = random_attentions()
    np.testing.assert_array_equal(A.aggregate(a, "head", 1, 3), a[1, 3])
    np.testing.assert_allclose(A.aggregate(a, "mean", 2), a[2].mean(0))
    with pytest.raises(ValueError, match="head 4 is out of range"):
        A.head_matrix(a, 0, 4)
    with pytest.raises(ValueError, match="unknown aggregation"):
        A.aggregate(a, "max")
    with pytest.raises(ValueError, match="shape"):
        A.check_attentions(np.zeros((2, 3, 4)))


def test_hide_special_tokens_raw_and_renormalised():
    tokens = ["[CLS]", "the", "cat", "[SEP]", "[PAD]"]
    keep = A.keep_indices(tokens, hide_special=True)
    assert keep.tolist() == [1, 2]
    assert A.keep_indices(tokens).tolist() == [0, 1, 2, 3]          # padding hidden by default
    assert A.keep_indices(tokens, hide_padding=False).tolist() == [0, 1, 2, 3, 4]
    m = random_attentions(1, 1, 5)[0, 0]
    raw = A.hide(m, keep)
    np.testing.assert_array_equal(raw, m[np.ix_([1, 2], [1, 2])])   # not renormalised by default
    assert (raw.sum(-1) < 1).all()
    ren = A.hide(m, keep, renormalise=True)
    np.testing.assert_allclose(ren.sum(-1), 1.0)
    np.testing.assert_allclose(ren, raw / raw.sum(-1, keepdims=True))
    # stacks of matrices too
    assert A.hide(random_attentions(2, 3, 5), keep).shape == (2, 3, 2, 2)


def test_matrix_csv_round_trip(tmp_path):
    m = random_attentions(1, 1, 4)[0, 0]
    labels = ["[CLS]", "a,b", 'say "hi"', "[SEP]"]                   # CSV quoting survives
    path = A.write_matrix_csv(tmp_path / "m.csv", m, labels)
    back, rows, cols = A.read_matrix_csv(path)
    assert rows == labels and cols == labels
    np.testing.assert_allclose(back, m, rtol=1e-7)


def test_all_heads_csv_and_npz(tmp_path):
    a = random_attentions(2, 3, 4)
    tokens = ["[CLS]", "x", "y", "[SEP]"]
    text = A.all_heads_csv(a, tokens)
    lines = text.strip().split("\n")
    assert lines[0] == "layer,head,query_index,query_token,key_index,key_token,weight"
    assert len(lines) == 1 + 2 * 3 * 4 * 4
    layer, head, qi, qt, ki, kt, w = lines[1 + (1 * 3 + 2) * 16 + 2 * 4 + 1].split(",")
    assert (layer, head, qi, qt, ki, kt) == ("1", "2", "2", "y", "1", "x")
    assert float(w) == pytest.approx(float(a[1, 2, 2, 1]), rel=1e-7)
    p = A.write_npz(tmp_path / "all", a, tokens, model="tiny")
    assert p.name == "all.npz"
    z = np.load(p)
    np.testing.assert_array_equal(z["attentions"], a)
    assert z["tokens"].tolist() == tokens and str(z["model"]) == "tiny"
    np.testing.assert_allclose(z["rollout"], A.rollout_layers(a), atol=1e-6)


def test_top_links_and_entropy():
    m = np.array([[0.1, 0.9, 0.0], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
    links = A.top_links(m, ["a", "b", "c"], k=2)
    assert links[0] == ("a", "b", pytest.approx(0.9))
    assert links[1] == ("c", "a", pytest.approx(0.5))
    e = A.entropy(np.eye(3))
    np.testing.assert_allclose(e, 0.0, atol=1e-9)


def test_all_heads_csv_streamed_to_file_with_progress_and_cancel(tmp_path):
    import threading

    from core.errors import Cancelled
    a = random_attentions(2, 3, 5)
    tokens = ["[CLS]", "a,b", 'say "hi"', "x", "[SEP]"]
    seen = []
    path = A.write_all_heads_csv(tmp_path / "all.csv", a, tokens,
                                 progress=lambda done, total, msg: seen.append((done, total)))
    assert path.read_text(encoding="utf-8") == A.all_heads_csv(a, tokens)
    assert seen == [(n, 6) for n in range(1, 7)]
    import csv
    rows = list(csv.reader(path.open(newline="", encoding="utf-8")))
    assert rows[1 + (1 * 3 + 2) * 25 + 2 * 5 + 1][3:6] == ['say "hi"', "1", "a,b"]
    # a cancelled export raises Cancelled and leaves the older file untouched, no part file
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        A.write_all_heads_csv(path, a, tokens, cancel=stop)
    assert path.read_text(encoding="utf-8") == A.all_heads_csv(a, tokens)
    assert [p.name for p in tmp_path.iterdir()] == ["all.csv"]
    with pytest.raises(OSError):
        A.write_npz(tmp_path / "missing" / "x.npz", a, tokens)
    assert not (tmp_path / "missing").exists()


def test_distinct_labels_tell_repeated_tokens_apart():
    toks = ["[CLS]", "moons", "of", "moons", "[SEP]", "the", "[SEP]"]
    assert A.distinct_labels(toks) == ["[CLS]", "moons@2", "of", "moons@4", "[SEP]@5", "the",
                                       "[SEP]@7"]
    m = np.eye(7) * 0.1
    m[1, 0], m[3, 0] = 0.5, 0.4
    links = A.top_links(m, A.distinct_labels(toks), k=2)
    assert [(q, k) for q, k, _ in links] == [("moons@2", "[CLS]"), ("moons@4", "[CLS]")]
