"""The Why view, partly fixed before (D18): a pair that reads 0 is no "most negative" pair, and a
trained model is named by its folder's name, never its path."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.gui.panels.why.test_view import open_why, search


@pytest.mark.slow     # 12-14 s at load 12 (six helpers on 2 cores)
def test_why_lists_no_zero_as_most_negative_and_no_folder_path(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = search(qtbot, w)
    dialog, hit = open_why(qtbot, panel, 1)
    c = dialog.why.contributions
    tiny = np.where(c < 0, -1e-6, c)                  # every negative pair now reads 0.0000
    tiny[0, 0] = -1e-6
    dialog.why.contributions = tiny
    dialog.refresh()
    text = dialog.pairs_label.text()
    negative = re.findall(r"Most negative:</b> (.*)", text)
    assert not negative or "0.0000" not in negative[0] and "e-0" not in negative[0], text
    dialog.why.contributions = np.where(tiny == -1e-6, -0.25, tiny)     # a real negative is listed
    dialog.refresh()
    assert "Most negative" in dialog.pairs_label.text() and "-0.2500" in dialog.pairs_label.text()
    # a trained model's folder: its name in the header, never its path
    folder = "/home/learner/models/experiments/run-3"
    w.state.choice = w.state.choice.with_(model=folder)
    dialog.request(dialog._request[0], dialog._request[1], None)
    assert folder not in dialog.header.text() and "run-3" in dialog.header.text()    # "computing with run-3"
    qtbot.waitUntil(lambda: not w.state.jobs.is_running("why"), timeout=20_000)
