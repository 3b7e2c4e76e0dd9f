"""`train` on a full disk (a 5 MiB tmpfs in a private mount namespace) is one `error:` line
naming the file it could not write; the checkpoint before it is kept byte for byte, and the
command the line suggests continues the run once space is freed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.cli.test_train import TINY
from tests.support.paths import ROOT
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
    env = dict(os.environ, FS=str(fs), RUN=str(run), OUTDIR=str(outdir), PY=sys.executable,
               PYTHONPATH=str(ROOT))
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
