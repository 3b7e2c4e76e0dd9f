"""One view's requests to a model: the newest request wins, and nothing computed by a model that is
no longer the one followed reaches the screen.

    follow = FollowModel(state, "walkthrough.positions")            # the inspected model
    follow = FollowModel(state, "search", corpus=True)              # the corpus model
    follow.model_changed.connect(view.on_model)                      # backend, or None while loading
    follow.backend                                                   # the model requests run on now
    follow.run(fn, text, layer, label="Positions",                   # fn(backend, text, layer, progress=,
               on_result=lambda result, backend: ...,                #    cancel=) in a worker, through
               on_error=lambda message: ...)                         #    state.run_latest
    follow.stale(shown_backend)                                      # what is drawn is another model's
    follow.ask_again(view) / follow.ask_again_if_stale(view)         # a view with _requested, _shown_for
                                                                     # (backend first) and show_for(*_requested)

``on_result`` and ``on_error`` are called only for the newest request made through this object,
and only while the model it ran on is still the followed one: a result of an older sentence or of
the model before a switch is dropped. When the model changes (and while it loads) the request
waiting behind a running one is dropped first - it would run the old model - and then
``model_changed`` is emitted, so the view can ask again with the new one.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore


class FollowModel(QtCore.QObject):
    model_changed = QtCore.Signal(object)        # the followed model's Backend, None while it loads

    def __init__(self, state, key: str, corpus: bool = False, parent=None):
        super().__init__(parent if parent is not None else state)
        self.state, self.key, self.corpus = state, key, corpus
        self._newest = 0                          # number of the newest request
        signal = state.backend_changed if corpus else state.inspect_backend_changed
        signal.connect(self._model_changed)

    @property
    def backend(self):
        return self.state.backend if self.corpus else self.state.inspect_backend

    def stale(self, shown_backend) -> bool:
        """Whether what was drawn with ``shown_backend`` is not the followed model's (redo it)."""
        return shown_backend is not self.backend

    def ask_again(self, view) -> None:
        """The model changed: ``view``'s newest request again, for it, while the view is on screen
        (``view._requested``: show_for's arguments, or None)."""
        if self.backend is not None and view._requested is not None and view.isVisible():
            view.show_for(*view._requested)

    def ask_again_if_stale(self, view) -> None:
        """``view`` is shown again: its newest request again if what it drew is another model's
        (``view._shown_for``: (backend, ...) on screen, or None)."""
        shown_model = view._shown_for[0] if view._shown_for else None
        if view._requested is not None and self.stale(shown_model):
            QtCore.QTimer.singleShot(0, lambda: view.show_for(*view._requested))

    def running(self) -> bool:
        return self.state.jobs.is_running(self.key)

    def run(self, fn: Callable, *args, on_result: Callable, on_error: Callable | None = None,
            **kwargs) -> bool:
        """Run ``fn(backend, *args)`` for the followed model, off the UI thread. False (nothing
        run) while the model loads: ask again on ``model_changed``."""
        backend = self.backend
        if backend is None:
            self.drop()
            return False
        self._newest += 1
        number = self._newest
        self.state.run_latest(self.key, fn, backend, *args,
                              on_result=lambda result: self._deliver(number, backend, on_result, result, backend),
                              on_error=lambda message: self._deliver(number, backend, on_error, message), **kwargs)
        return True

    def drop(self) -> None:
        """Forget every request made so far: the waiting one is not run, results are not shown."""
        self._newest += 1
        self.state.drop_waiting(self.key)

    def _deliver(self, number: int, backend, callback: Callable | None, *args) -> None:
        if number != self._newest or backend is not self.backend:
            return                                # an older request's, or the model before a switch
        if callback is None:
            self.state.error.emit(str(args[0]))
        else:
            callback(*args)

    def _model_changed(self, backend) -> None:
        self.drop()
        self.model_changed.emit(backend)
