"""The Features tab's screenshots (docs/app.md, docs/features.md): an SAE trained from the tab on minilm
over the sample corpus, the feature browser, the quality table, a steered search, the sweep (which of
A's features carry it toward B), and Step by step listing each token's features.

    xvfb-run -a .venv/bin/python -m tools.screenshots.features
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tools.screenshots.common import sample_window, save, spin

WORD = "storm"        # the browser finds the features that fire on it


def main(argv=None) -> int:
    app, w = sample_window("encoderscope-features-shots-")
    w.resize(1400, 900)
    w.show_panel("Features")
    panel = w.optional_panels["Features"]
    got = {}
    for name in ("opened", "rows_shown", "feature_shown", "quality_shown", "edit_shown", "sweep_shown", "failed"):
        getattr(panel, name).connect(lambda value, name=name: got.__setitem__(name, value))
    bar = panel.bar
    bar.width_box.setValue(1536)
    bar.k_box.setValue(32)
    bar.tokens_box.setValue(60_000)
    bar.batch_box.setValue(1024)
    bar.folder.setText(str(Path(tempfile.mkdtemp(prefix="encoderscope-sae-")) / "minilm-L3"))
    bar.train_button.click()
    if not spin(app, until=lambda: "rows_shown" in got or "failed" in got, timeout=1200) or "failed" in got:
        print(f"training failed: {got.get('failed')}", file=sys.stderr)
        return 1
    panel.feature_list.word.setText(WORD)
    got.pop("rows_shown")
    panel.feature_list.word.returnPressed.emit()
    spin(app, until=lambda: "rows_shown" in got and "feature_shown" in got and not w.state.jobs.busy, timeout=120)
    spin(app, 0.5)
    save(w, "tab-features")
    panel.edit_box.alpha.setValue(8.0)
    panel.edit_box.query.setText("a storm is coming")
    panel.edit_box.steer_button.click()
    if spin(app, until=lambda: "edit_shown" in got and not w.state.jobs.busy, timeout=300):
        spin(app, 0.3)
        save(w, "features_steer")
    panel.quality_view.run_button.click()
    if spin(app, until=lambda: "quality_shown" in got and not w.state.jobs.busy, timeout=900):
        spin(app, 0.3)
        save(w, "features_quality")
    panel.pages.setCurrentWidget(panel.sweep_box)
    panel.sweep_box.text_a.setText("a storm is coming over the hills")
    panel.sweep_box.text_b.setText("a calm day is coming over the hills")
    panel.sweep_box.bar.run_button.click()
    if spin(app, until=lambda: "sweep_shown" in got and not w.state.jobs.busy, timeout=300):
        spin(app, 0.3)
        save(w, "features_sweep")
    walk = w.optional_panels["Step by step"]
    w.show_panel("Step by step")
    shown = []
    walk.token_features.shown.connect(shown.append)
    walk.text_edit.setText("a storm is coming over the hills")
    walk.explain_current()
    if spin(app, until=lambda: shown and not w.state.jobs.busy, timeout=300):
        spin(app, 0.3)
        save(w, "features_step_by_step")
    w.close()
    w.state.jobs.shutdown(20_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
