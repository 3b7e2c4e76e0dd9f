"""`models --folder` says "available" exactly for the folders that load: a changed layer count,
a changed norm placement or missing tokenizer files make a folder unusable, with the reason,
and every folder it calls available embeds. `train --init` of a folder without tokenizer files
is one error naming them (never a loss that became nan)."""
import json
import shutil

import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from transformers import AutoTokenizer

    from core.encoder.weights import load_folder, save_checkpoint
    root = tmp_path_factory.mktemp("folders")
    good = make_tiny_bert(root / "good")
    layers = root / "layers"                      # one more layer in config.json than the weights hold
    shutil.copytree(good, layers)
    cfg = json.loads((layers / "config.json").read_text())
    cfg["num_hidden_layers"] += 1
    (layers / "config.json").write_text(json.dumps(cfg))
    no_tokenizer = root / "no-tokenizer"
    shutil.copytree(good, no_tokenizer)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (no_tokenizer / name).unlink()
    model, _, _ = load_folder(good)
    checkpoint = save_checkpoint(model, AutoTokenizer.from_pretrained(str(good)), root / "checkpoint")
    norm = root / "norm"                           # a post-norm checkpoint relabelled pre-norm
    shutil.copytree(checkpoint, norm)
    meta = json.loads((norm / "encoderscope.json").read_text())
    assert meta["config"]["norm"] == "post"
    meta["config"]["norm"] = "pre"
    (norm / "encoderscope.json").write_text(json.dumps(meta))
    return {"good": good, "checkpoint": checkpoint, "layers": layers, "norm": norm,
            "no-tokenizer": no_tokenizer}


def test_available_means_it_loads(folders, capsys):
    argv = [a for f in folders.values() for a in ("--folder", f)]
    code, out, _ = cli(capsys, "models", *argv, "--json")
    rows = {r["name"]: r for r in json.loads(out)["models"]}
    reasons = {"layers": "missing keys", "norm": "missing keys", "no-tokenizer": "no tokenizer files"}
    for name, folder in folders.items():
        row = rows[str(folder)]
        code, _, err = cli(capsys, "embed", "the cat sat", "--model", folder)
        assert row["available"] == (code == 0), (name, row, err)
        if name in reasons:
            assert row["available"] is False and reasons[name] in row["error"], row
        else:
            assert row["available"] is True, row
    code, out, _ = cli(capsys, "models", *argv)
    shown = {line.split()[0]: line for line in out.splitlines() if line[:1] not in (" ", "")}
    assert " unusable " in shown[str(folders["layers"])] and " available " in shown[str(folders["good"])]


def test_train_from_a_folder_without_tokenizer_files_names_them(folders, tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"the cat number {i} sat on the mat.\n" for i in range(60)))
    code, _, err = cli(capsys, "train", "--init", folders["no-tokenizer"], "--corpus", corpus,
                       "--out", tmp_path / "out", "--steps", "2")
    msg = one_error(code, err)
    assert "no tokenizer files" in msg and "nan" not in msg, msg
