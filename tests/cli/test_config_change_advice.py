"""After a model folder's config changes, ingest names the one command that works (re-embed
with --rebuild, or for a whitened store a new whitened --store), never "the same command
without --model" (which loads the same changed files again); each command it names is run.
`migrate --verify` says what changed, never "try the other --backend" (both encoders hash
the same files)."""
import json
import re
import shlex
import shutil

import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error

TEXTS = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river"]


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


@pytest.fixture()
def setup(tmp_path, base_model):
    model = tmp_path / "model"
    shutil.copytree(base_model, model)
    lines = tmp_path / "a.txt"
    lines.write_text("\n".join(TEXTS) + "\n")
    more = tmp_path / "b.txt"
    more.write_text("a new line about the sky\n")
    return model, lines, more


def change_config(model):
    cfg = json.loads((model / "config.json").read_text())
    cfg["layer_norm_eps"] = 1e-5
    (model / "config.json").write_text(json.dumps(cfg))


def command_in(msg: str) -> list[str]:
    return shlex.split(re.search(r"`encoderscope ([^`]+)`", msg).group(1))


@pytest.mark.parametrize("with_model", [True, False], ids=["--model", "store's model"])
def test_the_advice_after_a_config_change_is_the_rebuild_and_it_works(tmp_path, setup, capsys, with_model):
    model, lines, more = setup
    store = tmp_path / "s"
    assert cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet")[0] == 0
    change_config(model)
    again = ["ingest", more, "--store", store, "--quiet"] + (["--model", model] if with_model else [])
    msg = one_error(*cli(capsys, *again)[::2])
    assert "without --model" not in msg and "then run the same ingest command again" in msg, msg
    code, _, err = cli(capsys, *command_in(msg))
    assert code == 0, err
    code, out, err = cli(capsys, *again)
    assert code == 0 and "added 1" in out and "holds 4" in out, err


def test_a_whitened_store_is_advised_a_new_whitened_store_and_it_works(tmp_path, setup, capsys):
    model, lines, _ = setup
    store = tmp_path / "w"
    assert cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet", "--whiten")[0] == 0
    change_config(model)
    msg = one_error(*cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet")[::2])
    assert "without --model" not in msg and "use it with" not in msg, msg
    argv = [str(tmp_path / "w2") if a == "NEW_STORE" else a for a in command_in(msg)]
    code, out, err = cli(capsys, *argv, "--quiet")
    assert code == 0 and "holds 3 sentences, whitened" in out, err


def test_migrate_verify_says_what_changed_and_its_advice_works(tmp_path, setup, capsys):
    model, lines, _ = setup
    store = tmp_path / "s"
    assert cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet")[0] == 0
    change_config(model)
    for backend in ("scratch", "hf"):
        msg = one_error(*cli(capsys, "migrate", "--from", store, "--to", tmp_path / f"to-{backend}",
                             "--verify", "--backend", backend, "--quiet")[::2])
        assert "--backend" not in msg and "config or tokenizer files changed" in msg, msg
        assert "leave out --verify" in msg
    code, out, err = cli(capsys, "migrate", "--from", store, "--to", tmp_path / "to-hf", "--quiet")
    assert code == 0 and "the destination holds 3" in out, err
