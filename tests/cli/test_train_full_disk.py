"""`train` on a full disk (a 5 MiB tmpfs in a private mount namespace) is one `error:` line
naming the file it could not write; the checkpoint before it is kept byte for byte, and the
command the line suggests continues the run once space is freed."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.cli.test_train import TINY
from tests.support.paths import ROOT, child_env
from tests.support.train_corpus import write_corpus

IN_NAMESPACE = r"""
set -u
mount -t tmpfs -o size=5m tmpfs "$FS" || exit 77
cp -r "$RUN" "$FS/run"
AVAIL=$(df --output=avail -B4096 "$FS" | tail -1)
dd if=/dev/zero of="$FS/fill" bs=4096 count=$((AVAIL - 48)) 2>/dev/null
"$PY" -m app.cli train --resume "$FS/run" --steps 40 --checkpoint-every 3 --log-every 1 --no-progress \
    > "$OUTDIR/stdout" 2> "$OUTDIR/stderr"
echo $? > "$OUTDIR/rc"
cmp "$RUN/model.safetensors" "$FS/run/model.safetensors" && echo same > "$OUTDIR/kept"
cp "$FS/run/trainer_state.json" "$OUTDIR/state.json"
rm "$FS/fill"
CMD=$(grep -o '`encoderscope [^`]*`' "$OUTDIR/stderr" | tr -d '`' | sed 's/^encoderscope //')
eval "\"$PY\" -m app.cli $CMD --no-progress" > /dev/null 2> "$OUTDIR/stderr2"
echo $? > "$OUTDIR/rc2"
cp "$FS/run/trainer_state.json" "$OUTDIR/state2.json"
"""


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a private tmpfs")
def test_a_full_disk_during_training_keeps_the_last_checkpoint(tmp_path, capsys):
    from app.cli import main
    corpus = write_corpus(tmp_path / "gen.txt", n=200)
    run = tmp_path / "run"
    assert main(["train", "--corpus", str(corpus), "--out", str(run), "--steps", "2",
                 "--no-progress", *TINY]) == 0
    capsys.readouterr()
    fs, outdir = tmp_path / "fs", tmp_path / "out"
    fs.mkdir()
    outdir.mkdir()
    env = child_env(FS=str(fs), RUN=str(run), OUTDIR=str(outdir), PY=sys.executable)
    p = subprocess.run(["unshare", "-rm", "bash", "-c", IN_NAMESPACE], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    if p.returncode == 77 or not (outdir / "rc").exists():
        pytest.skip(f"cannot mount a tmpfs in a private namespace here: {p.stderr[-300:]}")
    err = (outdir / "stderr").read_text()
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert (outdir / "rc").read_text().strip() == "2" and len(errors) == 1, err
    assert "Traceback" not in err
    assert "the disk is full" in errors[0] and f"could not write the checkpoint {fs}/run/" in \
        errors[0], errors[0]
    assert (outdir / "kept").exists(), "the checkpoint before the full disk was changed"
    assert json.loads((outdir / "state.json").read_text())["step"] == 2
    # the suggested command continues the run once there is space
    assert (outdir / "rc2").read_text().strip() == "0", (outdir / "stderr2").read_text()
    assert json.loads((outdir / "state2.json").read_text())["step"] >= 2


class _FullDisk(Exception):
    """What safetensors raises when the disk fills under it (not an OSError, no file named)."""


_FullDisk.__name__ = "SafetensorError"


@pytest.mark.parametrize("failing, raised, wrote", [
    ("trainer_state.safetensors", _FullDisk("Io error: No space left on device (os error 28)"), False),
    ("trainer_state.safetensors", OSError(28, "No space left on device"), True),
    ("model.safetensors", _FullDisk("Io error: No space left on device (os error 28)"), True),
    ("trainer_state.json", OSError(28, "No space left on device"), False),
], ids=["state-safetensors", "state-oserror", "weights", "state-json"])
def test_a_full_disk_names_the_file_that_failed(tmp_path, capsys, monkeypatch, failing, raised, wrote):
    """The message names the file being written when the disk filled (it named the file written
    last, encoderscope.json, whichever failed)."""
    import pathlib

    import core.encoder.weights as weights
    import core.train.saving as saving
    from app.cli import main
    from tests.support.tiny_models import one_error
    corpus = write_corpus(tmp_path / "gen.txt", n=200)
    real_save, real_text = saving.save_file, pathlib.Path.write_text

    def save_file(tensors, path, *a, **kw):
        if pathlib.Path(path).name.startswith(failing):
            if wrote:                                     # what it wrote before the disk filled
                pathlib.Path(path).write_bytes(b"\0" * 64)
            raise raised
        return real_save(tensors, path, *a, **kw)

    def write_text(self, *a, **kw):
        if self.name == failing:
            raise raised
        return real_text(self, *a, **kw)
    monkeypatch.setattr(saving, "save_file", save_file)
    monkeypatch.setattr(weights, "save_file", save_file)
    monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    code = main(["train", "--corpus", str(corpus), "--out", str(tmp_path / "run"), "--steps", "2",
                 "--no-progress", *TINY])
    line = one_error(code, capsys.readouterr().err)
    assert f"could not write the checkpoint {tmp_path / 'run' / failing}: the disk is full" in line, line
