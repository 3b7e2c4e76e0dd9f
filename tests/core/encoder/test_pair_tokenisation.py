"""One pair tokenisation (Backend.encode_input): the inspector (Backend.inspect) and the
walkthrough (core.walkthrough.steps.explain) feed the encoder the same ids, token type ids and
positions for a sentence pair, and both equal what the model's own Hugging Face tokenizer makes
of the pair (the independent reference), also when the pair is cut to the model's length."""
from __future__ import annotations

import pytest

from core.encoder.backends import get_backend
from core.walkthrough.steps import explain
from tests.support.tiny_models import make_tiny_bert

FIRST, SECOND = "the cat sat on the mat", "a dog ran in the park"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return get_backend(str(make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))), device="cpu")


def fed(backend, run):
    """(input ids, token type ids, position ids) the encoder's embeddings received during run()."""
    seen = {}
    emb = backend.encoder.embeddings

    def take_inputs(_module, args, kwargs):
        ids = args[0] if args else kwargs["input_ids"]
        types = args[1] if len(args) > 1 else kwargs.get("token_type_ids")
        seen["ids"] = ids[0].tolist()
        seen["types"] = [0] * len(seen["ids"]) if types is None else types[0].tolist()

    def take_positions(_module, args):
        seen["positions"] = args[0][0].tolist()

    hooks = [emb.register_forward_pre_hook(take_inputs, with_kwargs=True),
             emb.position_embeddings.register_forward_pre_hook(take_positions)]
    try:
        run()
    finally:
        for h in hooks:
            h.remove()
    return seen["ids"], seen["types"], seen["positions"]


@pytest.mark.parametrize("second", [SECOND, " ".join([SECOND] * 40)])    # the long one is cut
def test_inspector_and_walkthrough_feed_the_encoder_the_same_pair(tiny_bert, second):
    from transformers import AutoTokenizer
    ins = fed(tiny_bert, lambda: tiny_bert.inspect(FIRST, pair=second))
    walk = fed(tiny_bert, lambda: explain(tiny_bert, FIRST, pair=second, layer=1))
    assert ins == walk
    ids, types, positions = ins
    hf = AutoTokenizer.from_pretrained(tiny_bert.source.folder)
    ref = hf(FIRST, second, truncation="longest_first", max_length=tiny_bert.max_length)
    assert ids == ref["input_ids"] and types == ref["token_type_ids"]
    assert positions == list(range(len(ids)))
    assert set(types) == {0, 1} and types[0] == 0 and types[-1] == 1
    full = len(hf(FIRST, second)["input_ids"])
    assert tiny_bert.inspect(FIRST, pair=second).truncated == full - len(ids)
    assert explain(tiny_bert, FIRST, pair=second, layer=0).truncated == full - len(ids)


def test_one_text_has_no_types_for_the_inspector_and_zeros_for_the_walkthrough(tiny_bert):
    ids, types, cut = tiny_bert.encode_input(FIRST)
    assert types is None and cut == 0
    walk = explain(tiny_bert, FIRST, layer=0)
    assert walk.ids == ids and walk.token_type_ids == [0] * len(ids)
