"""A walk (core.walkthrough.steps.explain) and a batch of two (core.walkthrough.batch) share the
float64 copy of the model: a batch run while the walk's capture hooks sit on that copy must not
put its tensors into the walk's steps (the root of "shapes (10,384) (6,384)" after a model switch,
when the Step by step views all recompute at once)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

WALK = "the cat sat ."
FIRST, SECOND = "a dog ran .", "the small cat sat on the old mat today ."


@pytest.fixture
def backend(tiny_distilbert):
    from core.encoder.backends import get_backend
    return get_backend(str(tiny_distilbert), "scratch", device="cpu", precision="fp32")


def test_a_batch_beside_a_walk_does_not_reach_its_steps(backend, monkeypatch):
    from core.walkthrough import batch as B
    from core.walkthrough import steps as W
    from core.walkthrough.capture import float64_copy

    alone = W.explain(backend, WALK, layer=1, head=1)
    copy = float64_copy(backend.encoder)                  # the one the walk and the batch use
    walker = threading.current_thread()
    batch_has_copy, walk_hooked, batch_done = threading.Event(), threading.Event(), threading.Event()
    batch_result = []
    scores_of_a_row = B.head_scores

    def head_scores_once_the_walk_is_hooked(*args, **kwargs):
        # the batch holds the copy and is in its NumPy part: it goes on when the walk's hooks are set
        batch_has_copy.set()
        walk_hooked.wait(30)
        return scores_of_a_row(*args, **kwargs)

    monkeypatch.setattr(B, "head_scores", head_scores_once_the_walk_is_hooked)

    def run_batch():
        try:
            batch_result.append(B.explain_batch(backend, FIRST, SECOND, layer=0, head=0))
        except Exception as e:                            # noqa: BLE001 - reported below
            batch_result.append(e)
        finally:
            batch_done.set()

    def during_the_walks_forward(_module, _inputs, _output):
        if threading.current_thread() is walker and not walk_hooked.is_set():
            walk_hooked.set()
            batch_done.wait(5)                            # the batch's forward, if it may run now

    batch = threading.Thread(target=run_batch, daemon=True)
    batch.start()
    assert batch_has_copy.wait(60)
    handle = copy.register_forward_hook(during_the_walks_forward)
    try:
        walked = W.explain(backend, WALK, layer=1, head=1)
    finally:
        handle.remove()
    assert walk_hooked.is_set() and batch_done.wait(60)
    assert not isinstance(batch_result[0], Exception), batch_result[0]
    for a, b in zip(walked.steps, alone.steps):
        assert a.name == b.name and a.max_abs_diff == pytest.approx(b.max_abs_diff, abs=1e-12)
        np.testing.assert_array_equal(np.asarray(a.values), np.asarray(b.values))
    assert batch_result[0].real_max_abs_diff < 1e-9


def test_steps_of_two_token_sequences_are_refused_in_words():
    from core.walkthrough.steps import max_abs_diff
    with pytest.raises(ValueError, match=r"shape \(10, 4\).*\(6, 4\).*different token sequences"):
        max_abs_diff(np.zeros((10, 4)), np.zeros((6, 4)))
    assert max_abs_diff(np.array([-np.inf, 1.0]), np.array([-np.inf, 1.5])) == 0.5
