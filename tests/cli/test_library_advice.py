"""Advice from transformers or torch that contradicts our security rules never reaches the
user: a pickled .bin that torch refuses under weights_only gets our words (save it as
safetensors), never torch's "weights_only=False will likely succeed", and no code runs."""
from pathlib import Path

import torch

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error


class _Trap:
    """Unpickling this creates a file: what a hostile pytorch_model.bin could do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (Path(self.path),)


def test_the_hf_backend_words_a_weights_only_refusal_as_ours(tmp_path, capsys):
    folder = make_tiny_bert(tmp_path / "evil", mlm=False, weights_file="pytorch_model.bin")
    marker = tmp_path / "code-ran"
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    torch.save({**state, "trap": _Trap(marker)}, folder / "pytorch_model.bin")
    code, _, err = cli(capsys, "embed", "hi", "--model", folder, "--backend", "hf")
    msg = one_error(code, err)
    assert "never loads one unsafely" in msg and "model.safetensors" in msg, msg
    assert "weights_only" not in err and "will likely succeed" not in err and "trust_remote_code" not in err
    assert not marker.exists(), "unpickling the .bin ran code"
