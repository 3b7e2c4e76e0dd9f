"""The Intervene tab's screenshots (docs/interventions.md): before | after | difference at the
default window (1200×780, intervene_effects.png) and a large one (1600×1000,
intervene_effects_1600x1000.png), the tab before Apply (intervene_empty.png), fill-mask's guesses
(intervene_fill.png: with ENCODERSCOPE_MLM_MODEL set to a model with a masked-LM head, else the
words saying minilm has none), the metrics and the ranking, the importance map, and Step by step
following the intervention.

    QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots.intervene \
        [--map-cache DIR | --compute-map]

--map-cache: a folder holding a computed minilm map (`encoderscope importance --metric spearman`
writes one to DATA/cache/importance); without it the map is computed here (minutes on a laptop).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.screenshots.common import sample_window, save, spin

HEADS = {(0, 3), (1, 6), (2, 2), (5, 9)}       # 1.4, 2.7, 3.3, 6.10 (0-based here)
DEFAULT, LARGE = (1200, 780), (1600, 1000)     # the app's default window, and a large one
QUERY = "a pet sleeping in the sun"


def shoot_map(app, w, panel, metric: str) -> None:
    panel.views.setCurrentWidget(panel.importance_view)
    maps = []
    panel.map_shown.connect(maps.append)
    panel.importance_view.metric.setCurrentIndex(panel.importance_view.metric.findData(metric))
    panel.importance_view.compute_button.click()
    if not spin(app, until=lambda: maps and not w.state.jobs.busy, timeout=1800):
        print("the map did not finish: no importance shot", file=sys.stderr)
        return
    spin(app, 0.3)
    save(w, "intervene_importance")


def shoot_fill(app, w, panel) -> None:
    """Fill-mask's guesses before | after: on ENCODERSCOPE_MLM_MODEL (a model with a masked-LM
    head) when set, else the tab's words for minilm, which has none."""
    import os

    from core.intervene.spec import Intervention
    folder = os.environ.get("ENCODERSCOPE_MLM_MODEL")
    if folder:
        w.inspect_bar.set_weights(folder)
        w.state.set_inspect_choice(w.state.choice.with_(model=folder))
        spin(app, until=lambda: panel.follow.backend is not None and getattr(panel.follow.backend, "has_mlm", False)
             and not w.state.jobs.busy, timeout=300)
        done = []
        panel.effects_shown.connect(done.append)
        panel.editor.set_value(Intervention(heads=HEADS, ffn_off={0}))
        panel.apply()
        spin(app, until=lambda: done and not w.state.jobs.busy, timeout=300)
    panel.views.setCurrentWidget(panel.fill_view)
    spin(app, 0.5)
    save(w, "intervene_fill")
    panel.views.setCurrentWidget(panel.effects_view)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--map-cache", type=Path, help="folder of cached importance maps")
    ap.add_argument("--compute-map", action="store_true", help="compute the map here when no cache has it")
    ap.add_argument("--metric", default="spearman")
    args = ap.parse_args(argv)
    app, w = sample_window("encoderscope-intervene-shots-")
    w.resize(*DEFAULT)
    from app.gui.panels import model_calls
    from core.intervene.spec import Intervention
    if args.map_cache is not None:
        model_calls.importance_cache_dir = lambda: args.map_cache
    w.show_panel("Intervene")
    panel = w.optional_panels["Intervene"]
    spin(app, until=lambda: panel.follow.backend is not None, timeout=300)
    spin(app, 0.5)
    save(w, "intervene_empty")
    panel.editor.set_value(Intervention(heads=HEADS, ffn_off={0}))
    done = []
    panel.effects_shown.connect(done.append)
    panel.apply()
    spin(app, until=lambda: done and not w.state.jobs.busy, timeout=300)
    spin(app, 0.5)
    save(w, "intervene_effects")
    w.resize(*LARGE)
    spin(app, 0.8)
    save(w, "intervene_effects_1600x1000")
    w.resize(*DEFAULT)

    panel.views.setCurrentWidget(panel.metrics_view)
    got = []
    panel.metrics_shown.connect(got.append)
    panel.ranking_shown.connect(got.append)
    panel.measure()
    spin(app, until=lambda: len(got) == 1 and not w.state.jobs.busy, timeout=600)
    panel.metrics_view.query_edit.setText(QUERY)
    panel.rank(QUERY)
    spin(app, until=lambda: len(got) == 2 and not w.state.jobs.busy, timeout=300)
    spin(app, 0.3)
    save(w, "intervene_metrics")

    walk = w.optional_panels["Step by step"]
    w.show_panel("Step by step")
    explained = []
    walk.explained.connect(explained.append)
    walk.explain_text("The cat sat on the mat because it was tired.", layer=1, head=1)
    spin(app, until=lambda: explained and not w.state.jobs.busy, timeout=300)
    walk.show_step("heads_concat")
    spin(app, 0.5)
    save(w, "walkthrough_intervened")
    if args.map_cache is None and not args.compute_map:
        print("no --map-cache or --compute-map: no importance shot", file=sys.stderr)
    else:
        w.show_panel("Intervene")
        shoot_map(app, w, panel, args.metric)
    w.show_panel("Intervene")
    shoot_fill(app, w, panel)
    w.close()
    w.state.jobs.shutdown(20_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
