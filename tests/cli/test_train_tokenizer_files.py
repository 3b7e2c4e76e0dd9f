"""`train --init FOLDER` and `--resume FOLDER` of a folder with weights but no tokenizer files
are one `error:` line saying so (not a transformers traceback, not a nan loss), and copying the
tokenizer files in, as it says, makes the same command work."""
from __future__ import annotations

import shutil

from tests.cli.test_train import TINY
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error
from tests.support.train_corpus import write_corpus

TOKENIZER = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def _strip(folder, keep):
    keep.mkdir()
    for name in TOKENIZER:
        if (folder / name).exists():
            shutil.move(folder / name, keep / name)


def test_init_and_resume_without_tokenizer_files_are_one_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "gen.txt", n=120)
    model = make_tiny_bert(tmp_path / "m")
    _strip(model, tmp_path / "tok")
    argv = ["train", "--corpus", corpus, "--out", tmp_path / "a", "--init", model, "--steps", "2",
            "--no-progress", "--threads", "1", "--precision", "fp32", "--batch-size", "8"]
    code, _, err = cli(capsys, *argv)
    msg = one_error(code, err)
    assert f"cannot start from {model}" in msg and "no tokenizer files" in msg, msg
    for name in TOKENIZER:            # "copy them from the model the weights came from"
        if (tmp_path / "tok" / name).exists():
            shutil.copy(tmp_path / "tok" / name, model / name)
    code, _, err = cli(capsys, *argv)
    assert code == 0, err

    run = tmp_path / "run"
    code, _, err = cli(capsys, "train", "--corpus", corpus, "--out", run, "--steps", "2",
                       "--no-progress", *TINY)
    assert code == 0, err
    _strip(run, tmp_path / "runtok")
    code, _, err = cli(capsys, "train", "--resume", run, "--steps", "4", "--no-progress")
    msg = one_error(code, err)
    assert f"cannot resume from {run}" in msg and "no tokenizer files" in msg, msg


def test_a_custom_tokenizer_class_gets_our_advice_not_the_librarys(tmp_path, capsys):
    """transformers would say "install sentencepiece or tiktoken" (or enable remote code); we
    never run a folder's code, so the line says what the folder needs instead."""
    import json
    model = make_tiny_bert(tmp_path / "m")
    (model / "tokenizer.json").unlink()
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg["tokenizer_class"] = "MyCustomTokenizer"
    cfg["auto_map"] = {"AutoTokenizer": ["tok.MyCustomTokenizer", None]}
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    code, _, err = cli(capsys, "embed", "the cat", "--model", model)
    msg = one_error(code, err)
    for advice in ("sentencepiece", "tiktoken", "trust_remote_code"):
        assert advice not in msg, msg
    assert "tokenizer.json" in msg


def test_a_model_with_its_own_code_gets_our_advice_not_remote_code(tmp_path, capsys):
    import json
    model = make_tiny_bert(tmp_path / "m")
    cfg = json.loads((model / "config.json").read_text())
    cfg["model_type"] = "my_custom_encoder"
    cfg["auto_map"] = {"AutoConfig": "modeling.MyConfig", "AutoModel": "modeling.MyModel"}
    (model / "config.json").write_text(json.dumps(cfg))
    code, _, err = cli(capsys, "embed", "the cat", "--model", model, "--backend", "hf")
    msg = one_error(code, err)
    assert "trust_remote_code" not in msg and "never runs" in msg, msg
