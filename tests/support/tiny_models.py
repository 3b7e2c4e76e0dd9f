"""Small local models for tests: built here, saved with save_pretrained, loaded like any folder."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.support.paths import ROOT, child_env

WORDS = ("the a an of to and in is was it on for with as by at from that this be are were "
         "cat dog bird fish sat ran flew swam mat tree river sky house garden park street "
         "quick brown lazy small big red blue green happy sad old new good bad "
         "man woman child teacher student doctor king queen city music book film food water "
         "search vector encoder attention head layer token model learn read write play eat").split()


def write_vocab(folder: Path) -> Path:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = ["##s", "##ed", "##ing", "##er", "##ly", ".", ",", "?", "!", "'"]
    letters = list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    vocab = list(dict.fromkeys(specials + WORDS + pieces + letters))   # unique, in order
    path = folder / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return path


def make_tiny_distilbert(folder: Path, dim=32, n_layers=2, n_heads=4, hidden_dim=64, seed=0,
                         mlm=True, sinusoidal=False) -> Path:
    from transformers import DistilBertConfig, DistilBertForMaskedLM, DistilBertModel, DistilBertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = write_vocab(folder)
    # transformers 5 takes the vocabulary as `vocab` (4.x: `vocab_file`).
    tok = DistilBertTokenizerFast(vocab=str(vocab), do_lower_case=True)
    assert len(tok) > 100, "the tokenizer did not read the vocabulary"
    tok.save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = DistilBertConfig(vocab_size=len(tok), dim=dim, n_layers=n_layers, n_heads=n_heads,
                           hidden_dim=hidden_dim, max_position_embeddings=128, sinusoidal_pos_embds=sinusoidal)
    model = (DistilBertForMaskedLM if mlm else DistilBertModel)(cfg)
    # Random init leaves LayerNorms at identity and biases at zero; perturb them so the
    # comparison exercises every parameter.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name.lower():
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(folder))
    return folder


def make_tiny_bert(folder: Path, dim=32, n_layers=2, n_heads=4, hidden_dim=64, seed=0, mlm=True,
                   weights_file="model.safetensors", legacy_layer_norm_names=False) -> Path:
    """A tiny random BertForMaskedLM (or BertModel) folder in the BERT layout `minilm` uses.

    weights_file="pytorch_model.bin" writes the weights as a torch pickle instead (older hub
    models); legacy_layer_norm_names writes LayerNorm.gamma/beta as TF-converted BERTs do.
    """
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizerFast(vocab=str(write_vocab(folder)), do_lower_case=True)
    assert len(tok) > 100, "the tokenizer did not read the vocabulary"
    tok.save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=dim, num_hidden_layers=n_layers, num_attention_heads=n_heads,
                     intermediate_size=hidden_dim, max_position_embeddings=128, type_vocab_size=2)
    model = (BertForMaskedLM if mlm else BertModel)(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "token_type" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(folder))
    if weights_file == "pytorch_model.bin" or legacy_layer_norm_names:
        state = model.state_dict()
        if legacy_layer_norm_names:
            state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                     for k, v in state.items()}
        if weights_file == "pytorch_model.bin":
            (folder / "model.safetensors").unlink()
            torch.save(state, folder / "pytorch_model.bin")
        else:
            from safetensors.torch import save_file
            save_file({k: v.clone().contiguous() for k, v in state.items() if k != "cls.predictions.decoder.weight"},
                      str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def make_tiny_checkpoint(folder: Path, norm="pre", positions="sinusoidal", activation="gelu_tanh",
                         type_vocab_size=2, dim=32, n_layers=3, n_heads=4, hidden_dim=64, seed=0) -> Path:
    """A tiny Encoderscope checkpoint (our own layout, encoderscope.json) of any architecture the
    encoder supports, e.g. pre-norm with sinusoidal positions, with every parameter shaken so that
    LayerNorms and biases are not at their identity/zero init."""
    from transformers import BertTokenizerFast

    from core.encoder.model import EncoderConfig, EncoderForMaskedLM
    from core.encoder.weights import save_checkpoint

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizerFast(vocab=str(write_vocab(folder)), do_lower_case=True)
    cfg = EncoderConfig(vocab_size=len(tok), max_position_embeddings=64, dim=dim, n_layers=n_layers,
                        n_heads=n_heads, hidden_dim=hidden_dim, dropout=0.0, attention_dropout=0.0,
                        activation=activation, positions=positions, type_vocab_size=type_vocab_size,
                        norm=norm)
    torch.manual_seed(seed)
    model = EncoderForMaskedLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    return save_checkpoint(model.eval(), tok, folder)


def run_cli(argv, capsys):
    """`encoderscope ARGV...` in this process (no new Python, no new torch): (exit code, stdout,
    stderr). Tests of what only a real process shows (exit on a signal, the console script
    itself) run the script in a subprocess instead."""
    from app.cli import main
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def cli_command() -> list[str]:
    """How to start `encoderscope` in a subprocess: the console script installed beside this
    Python, else `python -m app` (the same main), which is all a bare checkout on PYTHONPATH has,
    as on a bare CUDA machine (docs/gpu.md)."""
    import sys
    from pathlib import Path
    script = Path(sys.executable).with_name("encoderscope")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app"]


def cli_clean(capsys, *argv):
    """run_cli, asserting that nothing printed a traceback: (exit code, stdout, stderr)."""
    code, out, err = run_cli(argv, capsys)
    assert "Traceback" not in err
    return code, out, err


def one_error(code, err) -> str:
    """The one `error:` line of a failed command (exit code 2)."""
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert code == 2 and len(lines) == 1, err
    return lines[0]


def hold_writer_lock(folder, program: str):
    """Another process holding the store's writer lock, named `program` on its command line
    (the lock message names the holder); wait for it with `.stdout.readline()` == "held"."""
    import os
    import subprocess
    import sys
    return subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from index.store.durability import WriterLock; "
         "WriterLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)",
         str(folder), program], stdout=subprocess.PIPE, text=True,
        env=child_env(os.getcwd()))


def stored_rows(db) -> int:
    """Rows of a FAISS store's sentence database, read without disturbing its writer (0 while
    it does not exist yet)."""
    import sqlite3
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return c.execute("SELECT COUNT(*) FROM sentences").fetchone()[0]
        finally:
            c.close()
    except sqlite3.Error:
        return 0


def signal_ingest(cmd, store, signum, rows: int = 8, root=None):
    """Start the ingest `cmd`, send it `signum` once its store holds `rows` sentences, and
    return (exit code, stdout, stderr)."""
    import subprocess
    import time
    root = root or ROOT
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(root), cwd=root)
    deadline = time.time() + 120
    while time.time() < deadline and stored_rows(Path(store) / "store.db") < rows and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err
