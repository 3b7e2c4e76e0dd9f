"""The Features tab's sweep (which of A's features, set to B's values, move A toward B) on a tiny SAE:
its table is `encoderscope features sweep`'s output at every digit the CLI prints, a row clicked shows
that feature in the browser, Cancel stops the worker and keeps the last sweep, and a sweep whose A or B
was edited since says it is stale."""
from __future__ import annotations

import re
import threading

from tests.support.tiny_models import cli_clean

A, B = "the cat sat on the mat.", "the dog ran in the park."


def opened_panel(qtbot, make_panel, models, trained):
    panel = make_panel(models[0])
    with qtbot.waitSignal(panel.opened, timeout=60_000):
        assert panel.open_folder(trained.folder)
    with qtbot.waitSignal(panel.rows_shown, timeout=30_000):
        pass
    return panel


def swept(qtbot, panel, a=A, b=B):
    panel.sweep_box.text_a.setText(a)
    panel.sweep_box.text_b.setText(b)
    got = []
    panel.sweep_shown.connect(got.append)
    panel.failed.connect(got.append)
    panel.sweep_box.bar.run_button.click()
    qtbot.waitUntil(lambda: bool(got), timeout=60_000)
    assert not isinstance(got[0], str), got[0]
    return got[0]


def test_the_sweep_table_is_the_cli_s_at_every_digit_and_a_row_shows_its_feature(qtbot, make_panel, models,
                                                                                   trained, capsys):
    panel = opened_panel(qtbot, make_panel, models, trained)
    sweep = swept(qtbot, panel)
    table = panel.sweep_box.table
    n = table.rowCount()
    assert n == len(sweep.effects) > 3
    code, out, err = cli_clean(capsys, "features", "sweep", str(trained.folder), A, B, "--top", str(n),
                               "--device", "cpu", "--precision", "fp32")
    assert code == 0, err
    head, _columns, *rows = out.strip().splitlines()
    assert head in panel.sweep_box.summary.text()               # alignment, site and the all-at-once share
    assert len(rows) == n
    for r, line in enumerate(rows):
        feature, in_a, in_b, toward = line.split()
        assert [table.item(r, c).text() for c in (0, 2, 3, 4)] == [feature, in_a, in_b, toward], r
        assert table.item(r, 1).text() == trained.index.label(int(feature))
    assert re.search(r"\d+\.\d%", rows[0])                      # a share was printed, not '-'
    # a row clicked: that feature in the browser (its row in the list, its page)
    r = min(2, n - 1)
    feature = int(table.item(r, 0).text())
    listed = [row.feature for row in panel.feature_list.model.rows]
    with qtbot.waitSignal(panel.feature_shown, timeout=30_000) as shown:
        table.cellClicked.emit(r, 3)
    assert shown.args[0].feature == feature
    assert panel.pages.currentIndex() == 0
    if feature in listed:
        assert panel.feature_list.table.currentIndex().row() == listed.index(feature)


def test_cancel_stops_the_sweep_and_keeps_the_last_one(qtbot, make_panel, models, trained, monkeypatch):
    from app.gui.panels.features import compute as C
    panel = opened_panel(qtbot, make_panel, models, trained)
    first = swept(qtbot, panel)
    rows = panel.sweep_box.table.rowCount()
    real = C.sweep_fn
    started, cancel_seen = threading.Event(), []

    def held(*args, progress=None, cancel=None):
        started.set()
        assert cancel.wait(30)                          # until Cancel is pressed, then core's own check
        cancel_seen.append(True)
        return real(*args, progress=progress, cancel=cancel)
    monkeypatch.setattr(C, "sweep_fn", held)
    panel.sweep_box.text_b.setText("a bird flew over the house.")
    panel.sweep_box.bar.run_button.click()
    qtbot.waitUntil(started.is_set, timeout=10_000)
    assert panel.sweep_box.bar.cancel_button.isEnabled() and not panel.sweep_box.bar.run_button.isEnabled()
    with qtbot.waitSignal(panel.cancelled, timeout=30_000) as sig:
        panel.sweep_box.bar.cancel_button.click()
    assert sig.args == ["features.sweep"] and cancel_seen
    assert "Cancelled" in panel.sweep_box.summary.text()
    assert panel.sweep_box.sweep is first and panel.sweep_box.table.rowCount() == rows
    assert not panel.sweep_box.stale.isHidden()                  # the kept sweep is of the old B
    qtbot.waitUntil(lambda: panel.sweep_box.bar.run_button.isEnabled(), timeout=10_000)


def test_editing_a_or_b_marks_the_sweep_stale_and_typing_them_back_clears_it(qtbot, make_panel, models, trained):
    panel = opened_panel(qtbot, make_panel, models, trained)
    swept(qtbot, panel)
    box = panel.sweep_box
    assert box.stale.isHidden()
    box.text_a.setText("the cat sat on the rug.")
    assert not box.stale.isHidden() and "the cat sat on the mat." in box.stale.text()
    assert "Sweep" in box.stale.text()
    box.text_a.setText(A)
    assert box.stale.isHidden()
    box.text_b.setText(B + " ")                       # the same sentence once trimmed: not stale
    assert box.stale.isHidden()
    box.text_b.setText("a bird.")
    assert not box.stale.isHidden()
    swept(qtbot, panel, A, "a bird.")
    assert box.stale.isHidden()
