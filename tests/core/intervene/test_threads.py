"""One loaded model, many jobs (issue 49, item 5): every hook Encoderscope puts on a model acts
only for the call that registered it, whatever thread runs beside it.

Four threads share one tiny model: one computes the heads' mean outputs (hooks recording
out_lin's input), one runs an intervention (heads zeroed, FFN off) and patches a sentence, one
embeds plainly, one records a walkthrough's intermediates. Each repeats its job; every result
must equal the one the same job gives when run alone, one after another. Before the hooks were
scoped, the means' hooks recorded the other threads' batches ("The size of tensor a (17) must
match the size of tensor b (19)") or silently summed them.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.encoder.scoped_hooks import forward_is_plain, scoped_hooks
from core.intervene.apply import intervene
from core.intervene.means import mean_head_outputs
from core.intervene.patching import patched_run
from core.intervene.spec import Intervention, parse_site
from core.walkthrough.capture import capture
from tests.support.tiny_models import make_tiny_bert

MEAN_TEXTS = ["the cat sat on the mat", "a dog ran", "hello world", "one two three four five six seven"] * 4
PLAIN_TEXTS = ["a much longer sentence with many more tokens than the others have in it at all", "short"] * 6
SPEC = Intervention(heads={(0, 1), (1, 2)}, ffn_off={1})
ROUNDS = 12


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    folder = make_tiny_bert(tmp_path_factory.mktemp("tiny_threads"), n_layers=2, n_heads=4, mlm=False)
    return get_backend(str(folder), "scratch", device="cpu", precision="fp32")


def _means(b):
    return mean_head_outputs(b, MEAN_TEXTS, batch_size=5).numpy()


def _intervened(b):
    with intervene(b, SPEC):
        out = b.embed(PLAIN_TEXTS[:3])
    spec, source, _, _ = patched_run(b, "the cat sat", "the dog ran", [parse_site("L1.resid")])
    with intervene(b, spec, patch_source=source):
        patched = b.embed(["the cat sat"])
    return np.concatenate([out, patched])


def _plain(b):
    return b.embed(PLAIN_TEXTS)


def _walkthrough(b):
    return capture(b.encoder, b.encode_ids(["the cat sat on the mat"])[0][0], None, 1, 2, "mean")


def test_three_jobs_on_one_model_give_the_numbers_each_gives_alone(backend):
    jobs = {"means": _means, "intervened": _intervened, "plain": _plain, "walkthrough": _walkthrough}
    alone = {name: job(backend) for name, job in jobs.items()}
    start = threading.Barrier(len(jobs))
    results = {name: [] for name in jobs}
    errors = []

    def work(name):
        try:
            start.wait()
            for _ in range(ROUNDS):
                results[name].append(jobs[name](backend))
        except Exception as e:      # noqa: BLE001 - reported below, with the job's name
            errors.append(f"{name}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(n,)) for n in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for name, got in results.items():
        assert len(got) == ROUNDS, name
        for value in got:
            if name == "walkthrough":       # step name -> array
                assert value.keys() == alone[name].keys()
                for step in value:
                    np.testing.assert_allclose(value[step], alone[name][step], rtol=0, atol=1e-6, err_msg=step)
            else:
                np.testing.assert_allclose(value, alone[name], rtol=0, atol=1e-6, err_msg=name)


def test_other_threads_scoped_hooks_leave_this_thread_on_the_fast_path(backend):
    """A thread with no hooks of its own keeps the packed path (and its numbers) while another
    thread's scoped hooks sit on the modules; an unscoped hook still turns it off for everyone."""
    modules = list(backend.encoder.modules())
    layer = backend.encoder.transformer.layer[0]
    seen = {}
    with scoped_hooks() as register:
        register(layer.ffn, "post", lambda m, a, o: torch.zeros_like(o))
        assert not forward_is_plain(modules)          # this thread: its hook must act
        t = threading.Thread(target=lambda: seen.__setitem__("other", forward_is_plain(modules)))
        t.start()
        t.join()
    assert seen["other"] is True
    handle = layer.ffn.register_forward_hook(lambda m, a, o: None)
    try:
        assert not forward_is_plain(modules)
    finally:
        handle.remove()
    assert forward_is_plain(modules)
