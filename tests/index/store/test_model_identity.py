"""A store is never searched or extended with another network than the one that built it.

The fingerprint covers the weights, the config and tokenizer files, the pooling, the width and
the precision policy; a model folder whose config no longer fits its weights is one `error:`
line; `info --check` embeds a sample of stored texts again (which also catches stores written
before the fingerprint covered config and tokenizer).
"""
import json
import shlex
import shutil

import numpy as np
import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, make_tiny_distilbert, one_error

TEXTS = ["THE CAT SAT ON THE MAT", "A DOG RAN IN THE PARK", "THE BIRD FLEW OVER THE RIVER",
         "WE READ A BOOK IN THE GARDEN", "THE KING AND THE QUEEN ATE FOOD"]


@pytest.fixture()
def model(tmp_path):
    return make_tiny_bert(tmp_path / "m")


@pytest.fixture()
def store(tmp_path, model, capsys):
    (tmp_path / "a.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    code, _, err = cli(capsys, "ingest", tmp_path / "a.txt", "--model", model, "--store",
                       tmp_path / "s", "--quiet")
    assert code == 0, err
    return tmp_path / "s"


def edit_json(path, **changes):
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            data[key].update(value)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def case_sensitive(model):
    """Another tokenizer: one that keeps case (the texts are upper case, the vocabulary not)."""
    edit_json(model / "tokenizer.json", normalizer={"lowercase": False})
    edit_json(model / "tokenizer_config.json", do_lower_case=False)


def test_changed_heads_are_refused_by_search_ingest_and_check_and_the_rebuild_works(
        tmp_path, model, store, capsys):
    edit_json(model / "config.json", num_attention_heads=2)
    code, out, err = cli(capsys, "search", TEXTS[0], "--store", store)
    msg = one_error(code, err)
    assert "config or tokenizer" in msg and out == ""
    code, _, err = cli(capsys, "ingest", tmp_path / "a.txt", "--store", store, "--quiet")
    one_error(code, err)
    code, _, err = cli(capsys, "info", "--check", "--store", store)
    one_error(code, err)
    rebuild = shlex.split(msg.split("`")[1])[1:]
    code, _, err = cli(capsys, *rebuild, "--quiet")
    assert code == 0, err
    code, out, _ = cli(capsys, "search", TEXTS[0], "--store", store, "-k", "1")
    assert code == 0 and out.startswith("1.0000")
    code, _, err = cli(capsys, "info", "--check", "--store", store)
    assert code == 0 and "sampled sentences embedded again" in err


def test_swapped_tokenizer_is_refused(model, store, capsys):
    case_sensitive(model)
    code, out, err = cli(capsys, "search", TEXTS[1], "--store", store)
    one_error(code, err)
    assert out == ""


def test_check_reembeds_a_sample_and_catches_a_store_older_than_the_network_fingerprint(
        tmp_path, model, capsys):
    """A store whose fingerprint predates config/tokenizer hashes opens as before, and
    `info --check` finds the changed tokenizer by embedding its texts again."""
    from core.encoder.backends import get_backend
    from index.opening import open_store
    backend = get_backend(str(model))
    old = backend.fingerprint("mean").to_dict()
    del old["network_sha256"], old["precision_policy"]
    with open_store(tmp_path / "old", writable=True, create=True, fingerprint=old) as s:
        s.add_texts(TEXTS, backend)
    code, _, err = cli(capsys, "info", "--check", "--store", tmp_path / "old")
    assert code == 0 and f"{len(TEXTS)} sampled sentences embedded again" in err
    case_sensitive(model)
    code, _, err = cli(capsys, "info", "--check", "--store", tmp_path / "old")
    assert "do not give their stored vectors" in one_error(code, err)


def test_fingerprint_covers_config_tokenizer_and_policy_but_not_names(tmp_path, model):
    from core.encoder.fingerprint import Fingerprint, network_hash
    before = network_hash(model)
    edit_json(model / "config.json", _name_or_path="elsewhere", transformers_version="0.0")
    assert network_hash(model) == before            # names and versions change no vector
    edit_json(model / "config.json", num_attention_heads=2)
    assert network_hash(model) != before
    a = Fingerprint("m", "w", "mean", 8, True, "n1", "p")
    assert not a.compatible(Fingerprint("m", "w", "mean", 8, True, "n2", "p"))
    assert not a.compatible(Fingerprint("m", "w", "mean", 8, True, "n1", "q"))
    assert a.compatible(Fingerprint("m", "w", "mean", 8, True))    # an older store: unknown


SIZE_CHANGES = [
    ("bert", {"hidden_size": 48}), ("bert", {"intermediate_size": 80}),
    ("bert", {"vocab_size": 50}), ("bert", {"max_position_embeddings": 64}),
    ("distilbert", {"dim": 48}), ("distilbert", {"hidden_dim": 80}),
    ("distilbert", {"vocab_size": 5000}), ("distilbert", {"max_position_embeddings": 512}),
]


@pytest.mark.parametrize("layout, change", SIZE_CHANGES)
def test_config_sizes_that_do_not_fit_the_weights_are_one_error_line(tmp_path, capsys, layout,
                                                                     change):
    make = make_tiny_bert if layout == "bert" else make_tiny_distilbert
    folder = make(tmp_path / "m")
    edit_json(folder / "config.json", **change)
    (tmp_path / "a.txt").write_text("the cat sat\n", encoding="utf-8")
    for backend in ("scratch", "hf"):
        for argv in (["embed", "the cat"], ["fill-mask", "the [MASK] sat"],
                     ["ingest", tmp_path / "a.txt", "--store", tmp_path / "s", "--quiet"]):
            code, _, err = cli(capsys, *argv, "--model", folder, "--backend", backend)
            assert "fit" in one_error(code, err)


def test_store_search_with_a_model_whose_sizes_changed_is_one_error_line(tmp_path, model, store,
                                                                        capsys):
    edit_json(model / "config.json", intermediate_size=80)
    code, _, err = cli(capsys, "search", "the cat", "--store", store)
    assert "does not fit its weights" in one_error(code, err)


def test_learned_positions_relabelled_sinusoidal_are_refused(tmp_path, capsys):
    learned = make_tiny_distilbert(tmp_path / "learned")
    edit_json(learned / "config.json", sinusoidal_pos_embds=True)
    for argv in (["embed", "the cat"], ["fill-mask", "the [MASK] sat"]):
        code, _, err = cli(capsys, *argv, "--model", learned)
        assert "sinusoidal" in one_error(code, err)
    code, out, _ = cli(capsys, "models", "--folder", learned, "--json")   # and listed as unusable
    (row,) = [r for r in json.loads(out)["models"] if r["name"] == str(learned)]
    assert code == 0 and not row["available"] and "sinusoidal" in row["error"]
    real = make_tiny_distilbert(tmp_path / "sin", sinusoidal=True)   # a true sinusoid loads
    code, out, _ = cli(capsys, "embed", "the cat", "--model", real, "--json")
    assert code == 0 and np.isclose(np.linalg.norm(json.loads(out)["vectors"][0]), 1, atol=1e-5)
    code, out, _ = cli(capsys, "models", "--folder", real, "--json")
    assert [r for r in json.loads(out)["models"] if r["name"] == str(real)][0]["available"]


def test_a_model_edited_in_place_is_loaded_again(tmp_path, model):
    from core.encoder.backends import get_backend
    a = get_backend(str(model))
    shutil.copy(model / "config.json", tmp_path / "c.json")
    edit_json(model / "config.json", num_attention_heads=2)
    b = get_backend(str(model))
    assert a is not b and b.n_heads == 2 and a.fingerprint() != b.fingerprint()
