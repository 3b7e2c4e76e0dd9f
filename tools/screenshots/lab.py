"""Screenshots of the Train tab's lab pages (docs/lab.md): Runs and Experiments.

    QT_QPA_PLATFORM=xcb xvfb-run -a .venv/bin/python -m tools.screenshots.lab [--runs DIR]

--runs DIR: compare every run in DIR on the Runs page (e.g. the folder of
`encoderscope experiment norm ... --out DIR`); without it a tiny positions experiment is trained
first (about a minute) and compared. The Experiments shot is taken while a tiny queue runs.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tools.screenshots.common import OUT, SIZE, qt_app, save, spin

TINY_MODEL = dict(layers=2, dim=32, heads=2, ffn=64, batch_size=16, max_length=24)   # set in the page's fields
RUNNING = dict(threads=1, log_every=5, eval_every=20)


def _lab(tmp: Path):
    os.environ["ENCODERSCOPE_DATA_DIR"] = str(tmp / "data")
    os.environ.setdefault("ENCODERSCOPE_DEVICE", "cpu")
    from app.gui.panels.train.lab import TrainLab
    from app.gui.state import AppState

    lab = TrainLab(AppState())
    lab.resize(*SIZE)
    lab.show()
    return lab


def _run_queue(app, lab, name: str, out: Path, steps: int, until_share: float | None = None):
    view = lab.experiments_view
    lab.show_page("Experiments")
    view.select(name)
    view.steps.setValue(steps)
    view.out.setText(str(out))
    for key, value in TINY_MODEL.items():
        view.model_fields[key].setValue(value)
    view.device.setCurrentIndex(view.device.findData("cpu"))
    view.overrides = dict(RUNNING)
    if not view.start():
        raise SystemExit(f"could not start the {name} experiment: {view.stats.text()}")
    if until_share is None:
        spin(app, until=lambda: not view.running, timeout=900)
    else:
        spin(app, until=lambda: view.progress.value() >= until_share * view.progress.maximum(), timeout=900)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, help="a folder of runs to compare on the Runs page")
    args = parser.parse_args(argv)
    app = qt_app()
    tmp = Path(tempfile.mkdtemp(prefix="encoderscope-lab-shots-"))
    lab = _lab(tmp)

    # Experiments: a tiny queue, caught midway
    _run_queue(app, lab, "positions", tmp / "queue", steps=200, until_share=0.6)
    spin(app, 0.3)
    save(lab, "lab_experiments")
    lab.experiments_view.cancel()
    spin(app, until=lambda: not lab.experiments_view.running, timeout=300)

    runs = lab.runs_view
    if args.runs is None:
        _run_queue(app, lab, "positions", tmp / "positions", steps=60)
        spin(app, until=lambda: runs.comparison is not None, timeout=120)
    else:
        lab.show_page("Runs")
        runs.folder.setText(str(args.runs.resolve()))
        runs.refresh()
        spin(app, until=lambda: runs.listed_folder is not None and not lab.state.jobs.busy, timeout=120)
        runs.select_runs([str(r.path) for r in runs.runs])
        spin(app, until=lambda: runs.comparison is not None, timeout=120)
    spin(app, 0.5)
    save(lab, "lab_runs")
    lab.state.shutdown(30_000)
    print(f"screenshots in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
