"""The one intervention the app applies: set in the Intervene tab, followed by Step by step.

    current = current_intervention(state)        # one per AppState, made on first use
    current.changed.connect(lambda spec: ...)     # a core.intervene Intervention (NOTHING when cleared)
    current.set(spec)                              # the Intervene tab's Apply / a map cell's click
    current.set(spec, patch_from)                  # with patch sites: sentence B and the alignment
    current.clear()
    current.spec                                   # what is applied now
    current.patch_from                             # core.walkthrough.patched.PatchFrom, or None
    current.fitting(backend)                       # the same, checked against the model to run

The value is only a name of what to switch off: every view applies it inside its own worker
(core.intervene.apply.intervene is thread-confined), and drops it when the inspected model
changes to one it does not fit (``check``). A patch is aligned to one model's tokens: another
model drops it (the Intervene tab aligns it again on the new model when it re-applies).
"""
from __future__ import annotations

import html

from PySide6 import QtCore

from core.errors import InputError
from core.intervene.spec import NOTHING, Intervention


class CurrentIntervention(QtCore.QObject):
    changed = QtCore.Signal(object)               # the Intervention now applied
    dropped = QtCore.Signal(str)                  # why it was cleared for a model lacking a part

    def __init__(self, parent=None):
        super().__init__(parent)
        self.spec: Intervention = NOTHING
        self.patch_from = None                    # sentence B of spec.patch (Step by step follows it)

    def set(self, spec: Intervention, patch_from=None) -> None:
        patch_from = patch_from if spec.patch else None
        if spec != self.spec or patch_from != self.patch_from:
            self.spec, self.patch_from = spec, patch_from
            self.changed.emit(spec)

    def clear(self) -> None:
        self.set(NOTHING)

    def check(self, backend) -> str:
        """Drop the parts ``backend`` (a newly inspected model) lacks, keep the rest (positions,
        scaling, the layers and heads it has); returns what was dropped and why ('' when all fits)."""
        if backend is None or self.spec.is_empty:
            return ""
        aligned_for = getattr(self.patch_from, "model", "")
        if self.spec.patch and aligned_for and aligned_for != getattr(backend, "model_name", aligned_for):
            self.set(self.spec.without_patch())   # B's tokens were another model's
            if self.spec.is_empty:
                return ""
        try:
            self.spec.check(int(backend.n_layers), int(backend.n_heads))
        except InputError as e:
            kept = self.spec.within(int(backend.n_layers), int(backend.n_heads))
            reason = what_changed(self.spec, kept, str(e))
            self.set(kept)
            self.dropped.emit(reason)
            return reason
        return ""

    def fitting(self, backend) -> Intervention:
        """The intervention to run on ``backend``: ``check``ed first, so a view that asks before
        the model switch reached this object never applies a part the model lacks."""
        self.check(backend)
        return self.spec


def what_changed(before: Intervention, after: Intervention, why: str) -> str:
    """A model lacking some parts: only the parts that changed named, each once ("heads 1.2, 7.1
    zeroed became heads 1.2 zeroed; positions off kept"), never "X became X"."""
    if after.is_empty:
        return f"{before.describe()} was cleared: {why}"
    old, new = before.describe().split("; "), after.describe().split("; ")
    gone, came = [p for p in old if p not in new], [p for p in new if p not in old]
    kept = [p for p in new if p in old]
    said = f"{', '.join(gone)} became {', '.join(came)}" if came else f"{', '.join(gone)} dropped"
    return f"{why}: {said}" + (f"; {', '.join(kept)} kept" if kept else "")


def intervention_note(spec: Intervention) -> str:
    """What a tab showing the clean model says while an intervention is applied elsewhere."""
    if spec.is_empty:
        return ""
    return (f"<br><span style='color:#b35900'>The Intervene tab has {html.escape(spec.describe())}: this tab "
            "shows the model with every part on (Intervene shows both, side by side).</span>")


def current_intervention(state) -> CurrentIntervention:
    """The AppState's CurrentIntervention (a child object, made on first use)."""
    current = getattr(state, "_current_intervention", None)
    if current is None:
        current = CurrentIntervention(state)
        state._current_intervention = current
        if hasattr(state, "inspect_backend_changed"):
            state.inspect_backend_changed.connect(current.check)     # whichever tab is built
    return current
