"""`train` writes its weights, trainer state and probe snapshots with the mode any new file
gets (0o666 less the umask), not safetensors' 0o600: other users the umask lets read the run
can load the model. Checked by mode under two umasks, and by a real other user reading it."""
import os
import shutil
import stat

import pytest

from tests.support.train_corpus import write_corpus

TINY = ["--layers", "1", "--dim", "32", "--heads", "2", "--ffn", "64", "--threads", "1", "--precision", "fp32",
        "--batch-size", "16", "--max-length", "24", "--eval-sentences", "50", "--init", "fresh",
        "--tokenizer", "word", "--device", "cpu", "--no-progress"]


@pytest.fixture()
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def modes(folder):
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
            for p in folder.rglob("*") if p.is_file() and p.name != "lock"}


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_train_writes_files_as_the_umask_allows(tmp_path, umask, capsys, mask):
    from app.cli import main
    corpus = write_corpus(tmp_path / "c.txt", n=200)
    umask(mask)
    out = tmp_path / "run"
    code = main(["train", "--corpus", str(corpus), "--out", str(out), "--steps", "2", *TINY])
    assert code == 0, capsys.readouterr().err
    found = modes(out)
    assert "model.safetensors" in found and "trainer_state.safetensors" in found
    assert any(name.startswith("snapshots/") for name in found)
    assert found == {name: 0o666 & ~mask for name in found}, found


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_another_user_loads_the_trained_weights(tmp_path, umask):
    """`nobody` reads model.safetensors of a run saved with umask 022 (0o600 refused it)."""
    import tempfile

    from transformers import AutoTokenizer

    from core.encoder.weights import load_folder, save_checkpoint
    from tests.support.tiny_models import make_tiny_bert
    base = tempfile.mkdtemp(prefix="modes-", dir="/tmp")
    os.chmod(base, 0o755)
    src = make_tiny_bert(tmp_path / "m")
    model, _, _ = load_folder(src)
    folder = save_checkpoint(model, AutoTokenizer.from_pretrained(str(src)), os.path.join(base, "ck"))
    load_folder(folder)                # every module the load needs is imported before the drop
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            load_folder(folder)
            os.write(w, b"loaded")
        except BaseException as e:     # noqa: BLE001 - reported to the parent
            os.write(w, f"{type(e).__name__}: {e}".encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    said = os.read(r, 4096).decode()
    os.close(r)
    shutil.rmtree(base)
    assert said == "loaded", said
