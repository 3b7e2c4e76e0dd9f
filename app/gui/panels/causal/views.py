"""The Causal tab's four pages, each a form, a Run button, progress with Cancel and its picture:

    SweepView        patching sweep heat-map (fraction of the way to B, or the change of p at the mask)
    AttributionView  one bar per token, the completeness gap under it
    TraceView        causal-trace heat-map (share of the clean output recovered)
    CutsView         attention edges knocked out, and what that changes

Each emits run_requested (its page's settings as a dict) and cancel_requested; the panel runs them.
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.widgets.doc_link import QuestionLine
from app.gui.widgets.empty_state import EmptyState
from app.gui.widgets.heatmap import HeatmapWidget
from app.gui.widgets.run_bar import RunBar
from app.gui.widgets.significant import sig, signed

DIVERGING = "CET-D1"


class ValueHeatmap(HeatmapWidget):
    """A heat-map whose tooltip names the cell and its value (``what`` says what the value is)."""
    what = "value"
    click_hint = ""
    spread = None           # a matrix of standard errors beside the values (the trace's over its samples)
    spread_note = ""

    def tooltip_text(self, i: int, j: int) -> str:
        hint = f"<br><i>{self.click_hint}</i>" if self.click_hint else ""
        se = (f" ± {float(self.spread[i, j]):.4f} <small>({self.spread_note})</small>"
              if self.spread is not None else "")
        return (f"<b>{html.escape(self.row_labels[i])}, {html.escape(self.col_labels[j])}</b><br>"
                f"{self.what} <b>{float(self.matrix[i, j]):+.4f}</b>{se}{hint}")


class Page(QtWidgets.QWidget):
    """A page: its question (how to read the answer, a link to its docs section), its form, Run,
    progress and Cancel, a line of numbers, and its picture (words naming the button until drawn)."""
    run_requested = QtCore.Signal(dict)
    cancel_requested = QtCore.Signal()
    run_label = "Run"
    question, how_to_read, doc_section = "", "", ""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.outer = QtWidgets.QVBoxLayout(self)
        self.outer.setContentsMargins(0, 0, 0, 0)
        self.about = QuestionLine(self.question, self.how_to_read, "causal.md", self.doc_section)
        self.outer.addWidget(self.about)
        self.bar = QtWidgets.QHBoxLayout()          # the page's settings, then its RunBar (finish_bar)
        self.run_bar = RunBar(self.run_label, f"causal_{type(self).__name__.lower()}")
        self.run_button, self.progress, self.cancel_button = (self.run_bar.run_button, self.run_bar.progress,
                                                              self.run_bar.cancel_button)
        self.run_button.clicked.connect(lambda: self.run_requested.emit(self.settings()))
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.outer.addLayout(self.bar)
        self.info = QtWidgets.QLabel()
        self.info.setWordWrap(True)
        self.info.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.outer.addWidget(self.info)
        self.stale = QtWidgets.QLabel()
        self.stale.setObjectName("causal_stale")
        self.stale.setWordWrap(True)
        self.stale.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.stale.setStyleSheet("color: #b35900;")
        self.stale.hide()
        self.outer.addWidget(self.stale)

    def set_stale(self, text: str) -> None:
        """Say (or stop saying) that the picture is of other inputs than those typed now."""
        self.stale.setText(text)
        self.stale.setVisible(bool(text))

    def add_picture(self, widget: QtWidgets.QWidget, stretch: int = 1) -> None:
        """The page's picture, behind words (which name the Run button) until there is a result."""
        self.picture = EmptyState(widget, f"causal_{type(self).__name__.lower()}")
        self.outer.addWidget(self.picture, stretch)

    def empty_words(self, note: str = "") -> str:
        return (f"{note + ': ' if note else ''}press “{self.run_label}” above to compute this page for the "
                "sentences at the top.")

    def finish_bar(self) -> None:
        self.bar.addWidget(self.run_bar, 1)
        self.set_running(False)

    def settings(self) -> dict:
        return {}

    def set_running(self, running: bool) -> None:
        self.run_bar.set_running(running)
        if getattr(self, "result", None) is None and hasattr(self, "picture"):
            self.picture.say("Computing … (the bar above shows how far; Cancel stops it)" if running
                             else self.empty_words())

    def on_progress(self, done: int, total: int, message: str) -> None:
        self.run_bar.on_progress(done, total, message)

    def say(self, text: str, error: bool = False) -> None:
        self.info.setText(f"<span style='color:#c0392b'>{html.escape(text)}</span>" if error else text)


class MapPage(Page):
    """A page whose result is one heat-map, shown as it is or, with a [MASK] in A, as its p(token)
    version (the "p" toggle): the sweep and the trace. VALUES and P_VALUES name the result's two
    matrices (P_VALUES is None without a mask); a subclass builds `heatmap` and `show_p`, and draws."""

    VALUES = ""
    P_VALUES = ""

    def clear(self, note: str = "") -> None:
        self.result = None
        self.heatmap.set_matrix(np.zeros((0, 0)), [], [])
        self.picture.say(note if note.endswith("…") else self.empty_words(note))
        self.info.setText("")

    def show_result(self, r) -> None:
        self.result = r
        self.picture.show_content()
        self.show_p.setEnabled(getattr(r, self.P_VALUES) is not None)
        self._draw()

    def matrix(self) -> np.ndarray:
        p = getattr(self.result, self.P_VALUES)
        return p if self.show_p.isChecked() and p is not None else getattr(self.result, self.VALUES)


class SweepView(MapPage):
    cell_clicked = QtCore.Signal(str)       # the clicked cell's site, as `patch --site` takes it
    run_label = "Run sweep"
    question = "Where in the network does the difference between A and B live?"
    how_to_read = ("Each cell patches one site (a layer at one token, one head, or one FFN) from B into A: "
                   "0 = A's vector unchanged, 1 = it became B's. Click a cell to walk that patch step by step.")
    doc_section = "1. Patching sweeps"
    VALUES, P_VALUES = "values", "delta_p"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None
        self.kind = QtWidgets.QComboBox()
        for key, text in (("resid", "residual stream (layer x token)"), ("heads", "heads (layer x head)"),
                          ("ffn", "FFNs (layer)")):
            self.kind.addItem(text, key)
        self.show_p = QtWidgets.QCheckBox("show the change of p at the [MASK]")
        self.show_p.toggled.connect(self._draw)
        for w in (QtWidgets.QLabel("sites"), self.kind, self.show_p):
            self.bar.addWidget(w)
        self.finish_bar()
        self.heatmap = ValueHeatmap(row_title="layer", col_title="site")
        self.heatmap.what = "fraction of the way to B"
        self.heatmap.click_hint = "click to apply this one patch and walk it in Step by step"
        self.heatmap.set_show_values(True)
        self.heatmap.set_colormap(DIVERGING)
        self.heatmap.colorbar.getAxis("right").setLabel("fraction of the way to B")
        self.heatmap.cell_clicked.connect(self._clicked)
        self.add_picture(self.heatmap)
        self.clear()

    def settings(self) -> dict:
        return {"kind": self.kind.currentData()}

    def _draw(self) -> None:
        r = self.result
        if r is None:
            return
        m = self.matrix()
        top = max(float(np.abs(m).max()), 1e-9)
        p_shown = m is r.delta_p
        self.heatmap.what = f"change of p({r.target})" if p_shown else "fraction of the way to B"
        title = (f"p({r.target}) patched − p in A" if p_shown else "fraction of the way to B")
        self.heatmap.set_matrix(m, r.rows, r.cols, title=title, levels=(-top, top))
        self.heatmap.top_axis.setLabel({"resid": "token of A", "heads": "head", "ffn": "FFN (every token)"}.get(
            r.site, "site"), color=self.heatmap.fg.name())
        self.heatmap.colorbar.getAxis("right").setLabel("Δp" if p_shown else "fraction of the way to B")
        extra = (f" · p({html.escape(str(r.target))}) at the mask: A {sig(r.p_a)}, B {sig(r.p_b)}"
                 if r.delta_p is not None else "")
        self.info.setText(f"cos(A, B) <b>{r.cosine_a_b:.4f}</b> · {r.site} sites · {r.pooling} pooling · "
                          f"{r.precision}{extra} · <i>click a cell to apply that one patch and walk it step by "
                          "step</i>")

    def site(self, row: int, col: int) -> str:
        kind = self.result.site
        if kind == "resid":
            return f"L{row + 1}.resid@{col}"
        return f"L{row + 1}.H{col + 1}" if kind == "heads" else f"L{row + 1}.ffn"

    def _clicked(self, row: int, col: int) -> None:
        if self.result is not None:
            self.cell_clicked.emit(self.site(row, col))


class AttributionView(Page):
    run_label = "Attribute"
    question = "Which tokens of A drive the score: its cosine with B, or p(word) at the [MASK]?"
    how_to_read = ("One bar per token: red raises the score, blue lowers it. Integrated gradients' bars add "
                   "up to the score's change from the baseline; the gap says how closely.")
    doc_section = "3. Gradient attributions"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None
        self.target = QtWidgets.QComboBox()
        self.target.addItem("cosine with sentence B", "other")
        self.target.addItem("p(word) at the [MASK]", "word")
        self.method = QtWidgets.QComboBox()
        self.method.addItem("integrated gradients", "ig")
        self.method.addItem("grad × input", "grad-x-input")
        self.steps = QtWidgets.QSpinBox()
        self.steps.setRange(1, 1024)
        self.steps.setValue(32)
        self.steps.setPrefix("steps ")
        for w in (QtWidgets.QLabel("of"), self.target, self.method, self.steps):
            self.bar.addWidget(w)
        self.finish_bar()
        self.plot = pg.PlotWidget()
        self.plot.setBackground(None)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.7)
        self.plot.addItem(self.bars)
        self.plot.showGrid(y=True, alpha=0.3)
        self.plot.setLabel("bottom", "token of A")
        self.plot.setLabel("left", "attribution")
        self.plot.getAxis("left").enableAutoSIPrefix(False)      # the axis reads as the bars' own numbers
        self.value_items: list = []              # each bar's number, over (or under) it
        self._hover = pg.SignalProxy(self.plot.scene().sigMouseMoved, rateLimit=30, slot=self._mouse_moved)
        self.add_picture(self.plot)
        self.clear()

    def settings(self) -> dict:
        return {"target": self.target.currentData(), "method": self.method.currentData(), "steps": self.steps.value()}

    def bar_tooltip(self, i: int) -> str:
        r = self.result
        a = np.asarray(r.attributions, dtype=float)
        share = f" ({a[i] / a.sum():.0%} of the sum)" if abs(a.sum()) > 1e-12 else ""
        return (f"token {i} <b>{html.escape(r.tokens[i])}</b>: {html.escape(r.method)} <b>{a[i]:+.6f}</b>{share}"
                f"<br>{'raises' if a[i] >= 0 else 'lowers'} {html.escape(r.target)}")

    def _mouse_moved(self, evt) -> None:
        if self.result is None:
            return
        x = self.plot.getViewBox().mapSceneToView(evt[0]).x()
        i = int(round(x))
        if 0 <= i < len(self.result.tokens) and abs(x - i) <= 0.35:
            QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), self.bar_tooltip(i), self.plot)
        else:
            QtWidgets.QToolTip.hideText()

    def clear(self, note: str = "") -> None:
        self.result = None
        for item in self.value_items:
            self.plot.removeItem(item)
        self.value_items = []
        self.bars.setOpts(x=[], height=[], width=0.7)
        self.plot.getAxis("bottom").setTicks([[]])
        self.picture.say(note if note.endswith("…") else self.empty_words(note))
        self.info.setText("")

    def show_result(self, r) -> None:
        self.result = r
        self.picture.show_content()
        a = np.asarray(r.attributions, dtype=float)
        brushes = [pg.mkBrush("#c0392b" if v >= 0 else "#2e86c1") for v in a]
        self.bars.setOpts(x=np.arange(len(a)), height=a, width=0.7, brushes=brushes)
        self.plot.getAxis("bottom").setTicks([[(i, t) for i, t in enumerate(r.tokens)]])
        self.plot.setLabel("left", f"{r.method} attribution")
        for item in self.value_items:
            self.plot.removeItem(item)
        self.value_items = []
        for i, v in enumerate(a):
            item = pg.TextItem(signed(v, 2), color="#333333", anchor=(0.5, 1.0 if v >= 0 else 0.0))
            item.setPos(i, v)
            self.plot.addItem(item)
            self.value_items.append(item)
        text = f"{html.escape(r.method)} of {html.escape(r.target)} = <b>{r.target_value:.6f}</b> · {r.precision}"
        if r.baseline_value is None:
            text += (f"<br>sum of the bars <b>{a.sum():+.6f}</b> (grad × input is a first-order estimate: unlike "
                     "integrated gradients, its bars need not add up to the score's change)")
        if r.baseline_value is not None:
            text += (f"<br>baseline ({r.baseline} at every token but the specials): {r.baseline_value:.6f} · sum "
                     f"{a.sum():+.6f} vs f(x) − f(baseline) {r.target_value - r.baseline_value:+.6f} · "
                     f"<b>completeness gap {r.completeness_gap:.2e}</b> ({r.relative_gap:.2%}, {r.steps} steps)")
        self.info.setText(text)


class TraceView(MapPage):
    run_label = "Trace"
    question = "Where in the network is the information about the corrupted words carried?"
    how_to_read = ("The words get noise (or B's words); each cell puts one clean hidden state back (a layer at "
                   "a token): 1 = the clean output recovered, 0 = still corrupted.")
    doc_section = "2. Causal tracing (Meng et al. 2022)"
    VALUES, P_VALUES = "recovered", "p_recovered"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None
        self.words = QtWidgets.QLineEdit()
        self.words.setPlaceholderText("words to corrupt, e.g. cat")
        self.words.setObjectName("trace_words")
        self.noise = QtWidgets.QDoubleSpinBox()
        self.noise.setRange(0.1, 100.0)
        self.noise.setValue(3.0)
        self.noise.setPrefix("noise ")
        self.noise.setSuffix(" × emb std")
        self.samples = QtWidgets.QSpinBox()
        self.samples.setRange(1, 100)
        self.samples.setValue(10)
        self.samples.setPrefix("samples ")
        self.seed = QtWidgets.QSpinBox()
        self.seed.setRange(0, 1_000_000)
        self.seed.setPrefix("seed ")
        self.resample = QtWidgets.QCheckBox("resample from B")
        self.resample.setToolTip("Instead of noise: the words get B's word embeddings at the same positions "
                                 "(B needs as many tokens as A)")
        self.show_p = QtWidgets.QCheckBox("p at the [MASK]")
        self.show_p.toggled.connect(self._draw)
        for w in (self.words, self.noise, self.samples, self.seed, self.resample, self.show_p):
            self.bar.addWidget(w)
        self.finish_bar()
        self.heatmap = ValueHeatmap(row_title="restored state", col_title="token")
        self.heatmap.what = "share of the clean output recovered"
        self.heatmap.colorbar.getAxis("right").setLabel("share recovered")
        self.heatmap.set_show_values(True)
        self.add_picture(self.heatmap)
        self.clear()

    def settings(self) -> dict:
        return {"words": self.words.text(), "noise": self.noise.value(), "samples": self.samples.value(),
                "seed": self.seed.value(), "resample": self.resample.isChecked()}

    def _draw(self) -> None:
        r = self.result
        if r is None:
            return
        m = self.matrix()
        p_shown = m is r.p_recovered
        title = f"share of p({r.target}) recovered" if p_shown else "share of the clean vector recovered"
        self.heatmap.set_matrix(m, r.rows, r.cols, levels=(0.0, max(1.0, float(np.nanmax(m)))), title=title)
        se = r.p_recovered_se if p_shown else r.recovered_se
        self.heatmap.spread = None if se is None else np.asarray(se)
        self.heatmap.spread_note = f"standard error over the {r.samples} noise samples"
        corrupted = ", ".join(r.tokens[p] for p in r.corrupted)
        extra = (f" · p({html.escape(str(r.target))}): clean {sig(r.p_clean)}, corrupted {sig(r.p_corrupted)}"
                 if r.p_clean is not None else "")
        how = (f"resampled from “{html.escape(r.resampled_from)}”" if r.resampled_from is not None else
               f"with noise std {r.noise_std:.4f} ({r.noise_multiple:g} × the word embeddings' std), "
               f"{r.samples} samples, seed {r.seed}")
        self.info.setText(f"corrupted <b>{html.escape(corrupted)}</b> {how} · "
                          f"cos(corrupted, clean) {r.cosine_corrupted:.4f}{extra}"
                          + (f" · largest standard error over the samples ±{float(np.nanmax(se)):.3f} "
                             "(hover a cell for its own)" if se is not None else ""))


class CutsView(Page):
    run_label = "Cut"
    question = "Which attention connection carries it?"
    how_to_read = ("A cut L[.H]:Q>K stops query Q reading key K in that layer (and head); the lines say what "
                   "changes, the maps show the first cut's head before and after.")
    doc_section = "4. Attention-edge knock-out"
    walk_requested = QtCore.Signal()        # "Step by step": walk the sentence with these cuts

    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None
        self.cuts = QtWidgets.QLineEdit()
        self.cuts.setObjectName("cuts")
        self.cuts.setPlaceholderText("L[.H]:Q>K, comma-separated (e.g. 3:[MASK]>cat) — or click the Attention heatmap")
        self.bar.addWidget(self.cuts, 2)
        self.finish_bar()
        self.walk_button = QtWidgets.QPushButton("Step by step")
        self.walk_button.setToolTip("Walk the sentence through every step with these edges cut, at the first "
                                    "cut's layer: its masked scores show the -inf")
        self.walk_button.clicked.connect(self.walk_requested)
        self.bar.addWidget(self.walk_button)
        self.table = QtWidgets.QLabel()
        self.table.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.table.setWordWrap(True)
        self.outer.addWidget(self.table)
        # the first cut's head (or its layer's mean over heads), before and after
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.before, self.after = ValueHeatmap(), ValueHeatmap()
        for m, name in ((self.before, "before"), (self.after, "after")):
            m.what = f"attention weight {name}"
            m.set_show_values(True)
            split.addWidget(m)
        self.add_picture(split)
        self.clear()

    def settings(self) -> dict:
        return {"cuts": [c.strip() for c in self.cuts.text().split(",") if c.strip()]}

    def add_cut(self, text: str) -> None:
        have = self.settings()["cuts"]
        if text not in have:
            self.cuts.setText(", ".join(have + [text]))

    def clear(self, note: str = "") -> None:
        self.result = None
        self.walk_button.setEnabled(False)
        self.table.setText("")
        for m in (self.before, self.after):
            m.set_matrix(np.zeros((0, 0)), [], [])
        self.picture.say(note if note.endswith("…") else self.empty_words(note))
        self.info.setText("")

    def empty_words(self, note: str = "") -> str:
        return (f"{note + ': ' if note else ''}type cuts above (or click a cell of the Attention tab's heatmap) "
                f"and press “{self.run_label}”.")

    def shown_head(self, r) -> tuple[int, int | None]:
        first = sorted(r.spec.cuts, key=lambda c: (c.layer, -1 if c.head is None else c.head))[0]
        return first.layer, first.head

    def show_result(self, r) -> None:
        self.result = r
        self.picture.show_content()
        self.walk_button.setEnabled(True)
        diff = np.abs(r.attention.difference).max(axis=(2, 3))
        l, h = np.unravel_index(int(np.argmax(diff)), diff.shape)
        names = ", ".join(sorted(c.describe(r.tokens) for c in r.spec.cuts))
        change = (f"the largest change of a weight is {diff[l, h]:.4f}, in head {l + 1}.{h + 1}" if diff[l, h] >= 5e-5
                  else "no weight of any head changes by 0.0001 or more")
        rows = [f"<b>attention edges cut: {html.escape(names)}</b>", f"sentence vector: cosine with the uncut one "
                f"<b>{r.cosine:.6f}</b> · attention: {change}"]
        if r.fill is not None:
            before = ", ".join(f"{p['token']} {p['score']:.3f}" for p in r.fill.before.masks[0]["predictions"])
            after = ", ".join(f"{p['token']} {p['score']:.3f}" for p in r.fill.after.masks[0]["predictions"])
            rows += [f"[MASK] before: {html.escape(before)} · after: {html.escape(after)}"]
            if r.fill.target:
                rows.append(f"p({html.escape(r.fill.target)}): {sig(r.fill.target_before)} → "
                            f"{sig(r.fill.target_after)}")
        self.table.setText("<br>".join(rows))
        layer, head = self.shown_head(r)
        where = f"layer {layer + 1}, " + ("mean over heads" if head is None else f"head {head + 1}")
        for m, att, name in ((self.before, r.attention.before, "before"), (self.after, r.attention.after, "after")):
            grid = att[layer].mean(0) if head is None else att[layer, head]
            m.set_matrix(grid, r.tokens, r.tokens, title=f"{where}, {name}", levels=(0.0, 1.0))
            m.set_marks([(c.query, c.key) for c in r.spec.cuts if c.layer == layer and c.head in (None, head)])
        self.info.setText("")


# Twin of app.gui.panels.causal.views.AttributionView, alike: two pages' controls built the same
#   Qt way (combo boxes, a spin box, a chart); what they ask for and show differs.
class HeadGradientView(Page):
    run_label = "Compute"
    question = "Does one backward pass (Michel et al.'s I_h) know which heads matter?"
    how_to_read = ("Left: I_h for each layer and head; right: the metric's drop measured with that head switched "
                   "off. Their Spearman says how well the cheap estimate ranks the heads.")
    doc_section = "5. Michel et al.'s gradient head importance, beside the measured drop"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None
        self.metric = QtWidgets.QComboBox()
        self.metric.addItem("Spearman (shipped eval pairs)", "spearman")
        self.metric.addItem("masked-token log-probability (needs a masked-LM head)", "mlm")
        for w in (QtWidgets.QLabel("metric"), self.metric):
            self.bar.addWidget(w)
        self.finish_bar()
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.gradient = ValueHeatmap(row_title="layer", col_title="head")
        self.gradient.what = "I_h = E|dL/d gate|"
        self.drop = ValueHeatmap(row_title="layer", col_title="head")
        self.drop.what = "measured drop"
        self.drop.set_colormap(DIVERGING)
        self.gradient.colorbar.getAxis("right").setLabel("I_h")
        self.drop.colorbar.getAxis("right").setLabel("drop")
        for m in (self.gradient, self.drop):
            m.set_show_values(True)
            split.addWidget(m)
        self.add_picture(split)
        self.clear()

    def settings(self) -> dict:
        return {"metric": self.metric.currentData()}

    def clear(self, note: str = "") -> None:
        self.result = None
        for m in (self.gradient, self.drop):
            m.set_matrix(np.zeros((0, 0)), [], [])
        self.picture.say(note if note.endswith("…") else self.empty_words(note))
        self.info.setText("")

    def empty_words(self, note: str = "") -> str:
        return (f"{note + ': ' if note else ''}press “{self.run_label}” above (the measured drop is cached, like "
                "the Intervene tab's importance map).")

    def show_result(self, r) -> None:
        self.result = r
        self.picture.show_content()
        L, H = r.gradient.shape
        rows, cols = [f"L{l + 1}" for l in range(L)], [f"H{h + 1}" for h in range(H)]
        self.gradient.set_matrix(r.gradient, rows, cols, title="gradient importance I_h",
                                 levels=(0.0, max(float(r.gradient.max()), 1e-12)))
        top = max(float(np.abs(r.map.heads).max()), 1e-9)
        self.drop.set_matrix(r.map.heads, rows, cols, title=f"measured drop in {r.map.metric}", levels=(-top, top))
        self.info.setText(f"Spearman of I_h with the measured drop over {L * H} heads: <b>{r.spearman:+.3f}</b> "
                          f"(with |drop|: {r.spearman_abs:+.3f}; I_h has no sign) · loss {html.escape(r.loss)}")
