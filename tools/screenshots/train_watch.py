"""Screenshots of the Train tab's watch views (docs/screenshots/train-watch-*.png) for docs/lab.md.

    QT_QPA_PLATFORM=xcb xvfb-run -a .venv/bin/python -m tools.screenshots.train_watch [OUT] [--steps N]

Trains a small encoder (2 layers x 64, 4 heads) on the bundled sample corpus, watched, then opens
its run folder in the Train panel ("Open run…") and saves the loss, gradient flow (lines and
heatmap), heads (the all-heads grid half-way through the run, entropies) and embeddings (probe-set
cosines, anisotropy, held-out accuracy) pages.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tools.screenshots.common import grab, panel_shots_setup, spin

PAGES = [("Loss", "train-watch-loss"), ("Gradient flow", "train-watch-gradients"),
         ("Heads", "train-watch-heads"), ("Embeddings", "train-watch-embeddings")]


def train_run(folder: Path, steps: int) -> Path:
    from core.assets import sample_corpus
    from core.train.config import TrainConfig
    from core.train.trainer import Trainer
    cfg = TrainConfig(corpus=str(sample_corpus()), out=str(folder), steps=steps, layers=2, dim=64, heads=4,
                      ffn=256, batch_size=32, log_every=10, probe_every=max(10, steps // 30), device="cpu",
                      threads=1, probe_sentence="The cat chased the mouse.")   # every word in the corpus: no [UNK]
    Trainer(cfg).run(progress=lambda ev: ev["kind"] == "eval" and print(f"  step {ev['step']}", flush=True))
    return folder


def main(argv=None) -> int:
    app, args, size, _minilm, state = panel_shots_setup(
        __doc__, argv, extra=lambda ap: ap.add_argument("--steps", type=int, default=400))
    from app.gui.panels.train.panel import TrainPanel

    folder = train_run(Path(tempfile.mkdtemp(prefix="encoderscope-watch-shots-")) / "run", args.steps)
    panel = TrainPanel(state)
    panel.resize(*size)
    panel.show()
    panel.open_run(folder)
    spin(app, until=lambda: bool(panel.views.record.probes) and not state.jobs.busy, timeout=60)
    views = panel.views
    steps = views.heads_slider.steps
    views.heads_slider.set_step(steps[len(steps) // 2])       # half-way: heads part-formed
    views.flush()
    spin(app, until=lambda: views.grid_step == views.heads_slider.step(), timeout=30)   # read by a worker
    for title, name in PAGES:
        views.setCurrentIndex(next(i for i in range(views.count()) if views.tabText(i) == title))
        views.flush()
        spin(app, 0.5)
        grab(panel, args.out / f"{name}.png")
    views.measure.setCurrentIndex(1)                          # update / weight ratios
    views.setCurrentIndex(1)
    views.flush()
    spin(app, 0.5)
    grab(panel, args.out / "train-watch-update-ratio.png")
    panel.close()
    state.shutdown(10_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
