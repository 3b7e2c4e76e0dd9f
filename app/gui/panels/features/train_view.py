"""The Features tab's top bar: what an SAE trains on and where it goes, Train (or resume), Cancel, Open.

    bar = TrainBar()
    bar.settings()              # TrainConfig's fields: site, width, k, tokens, batch, seed
    bar.source()                # ("corpus" | "sample" | "file", the file)
    bar.folder.text()           # the SAE's folder: a folder holding a checkpoint resumes
    bar.train_requested / cancel_requested / open_requested / index_requested
    bar.set_running(True, label) ; bar.on_progress(done, total, message) ; bar.say(text, error=False)

Train, its progress (with the time left) and Cancel are the app's RunBar (app/gui/widgets/run_bar.py).

The defaults are the issue's (docs/features.md justifies them): the middle layer's residual stream,
8 × the model's width features, k 32. ``set_model(n_layers, dim)`` fills them in for the model.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.widgets.line_edit import long_line_edit
from app.gui.widgets.run_bar import RunBar
from app.gui.widgets.spin_box import spin_box

SOURCE_TITLES = (("sample", "Sample corpus"), ("corpus", "The open corpus"), ("file", "A text file…"))


class TrainBar(QtWidgets.QWidget):
    train_requested = QtCore.Signal()
    cancel_requested = QtCore.Signal()
    open_requested = QtCore.Signal()
    index_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.source_box = QtWidgets.QComboBox()
        self.source_box.setObjectName("features_source")
        for key, title in SOURCE_TITLES:
            self.source_box.addItem(title, key)
        self.source_box.setToolTip("The sentences the SAE trains on and the browser shows")
        self.file = long_line_edit("", "a .txt/.csv/.jsonl file", "features_file")
        self.file.setVisible(False)
        self.source_box.currentIndexChanged.connect(
            lambda _i: self.file.setVisible(self.source_box.currentData() == "file"))
        self.site = long_line_edit("L1.resid", "L3.resid", "features_site")
        self.site.setMaximumWidth(110)
        self.site.setToolTip("Where the SAE reads the activations, as patch --site names it: "
                             "L3.resid is the residual stream after layer 3")
        self.width_box = spin_box("features_width", 16, 1 << 20, 3072,
                                  tooltip="How many features (default 8 × the model's width)")
        self.width_box.setSingleStep(64)
        self.k_box = spin_box("features_k", 1, 4096, 32, tooltip="TopK: how many features may fire on one token")
        self.tokens_box = spin_box("features_tokens", 100, 100_000_000, 200_000,
                                   tooltip="How many activation tokens training reads (passes over the corpus "
                                           "as needed)")
        self.tokens_box.setSingleStep(10_000)
        self.batch_box = spin_box("features_batch", 16, 1 << 20, 4096,
                                  tooltip="Activation tokens per optimiser step")
        self.seed_box = spin_box("features_seed", 0, 2**31 - 1, 0,
                                 tooltip="The same seed, corpus and settings give the same SAE")
        self.folder = long_line_edit("", "the SAE's folder", "features_folder")
        self.folder.setToolTip("Where the SAE is saved (safetensors + cfg.json, SAELens's layout). A folder "
                               "with an unfinished run resumes it")
        choose = QtWidgets.QToolButton()
        choose.setText("…")
        choose.clicked.connect(self._choose_folder)
        self.run_bar = RunBar("Train", "features")      # the app's Run / progress / Cancel bar
        self.train_button, self.cancel_button, self.progress = (self.run_bar.run_button, self.run_bar.cancel_button,
                                                               self.run_bar.progress)
        self.train_button.setToolTip("Train an SAE into the folder (or resume the run saved there), then "
                                     "index its features over the sentences and open it")
        self.cancel_button.setToolTip("Stop at the next step; the checkpoint stays: Train resumes it")
        self.open_button = QtWidgets.QPushButton("Open SAE…")
        self.open_button.setObjectName("features_open")
        self.index_button = QtWidgets.QPushButton("Index features")
        self.index_button.setObjectName("features_index")
        self.index_button.setToolTip("Find each feature's top examples over the chosen sentences (saved in "
                                     "the SAE's folder)")
        self.index_button.setEnabled(False)
        self.train_button.clicked.connect(self.train_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.open_button.clicked.connect(self.open_requested)
        self.index_button.clicked.connect(self.index_requested)
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        settings = QtWidgets.QHBoxLayout()          # packed from the left: each label beside its box
        for title, widget in (("Sentences", self.source_box), (None, self.file), ("Site", self.site),
                              ("Width", self.width_box), ("k", self.k_box), ("Tokens", self.tokens_box),
                              ("Batch", self.batch_box), ("Seed", self.seed_box)):
            if title:
                settings.addSpacing(8)
                settings.addWidget(QtWidgets.QLabel(title))
            settings.addWidget(widget)
        settings.addStretch(1)
        outer.addLayout(settings)
        folder_row = QtWidgets.QHBoxLayout()
        folder_row.addWidget(QtWidgets.QLabel("Folder"))
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(choose)
        outer.addLayout(folder_row)
        buttons = QtWidgets.QHBoxLayout()
        for b in (self.open_button, self.index_button):
            buttons.addWidget(b)
        buttons.addWidget(self.run_bar, 1)
        outer.addLayout(buttons)
        self.message = QtWidgets.QLabel("")
        self.message.setObjectName("features_message")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.message)

    def set_model(self, n_layers: int, dim: int) -> None:
        """The defaults for a model: its middle layer, 8 × its width."""
        from core.features.collect import default_site
        self.site.setText(default_site(n_layers))
        self.width_box.setValue(8 * dim)

    def settings(self) -> dict:
        return {"site": self.site.text().strip(), "width": self.width_box.value(), "k": self.k_box.value(),
                "tokens": self.tokens_box.value(), "batch": self.batch_box.value(), "seed": self.seed_box.value()}

    def source(self) -> tuple[str, str]:
        return self.source_box.currentData(), self.file.text().strip()

    def set_running(self, running: bool, message: str = "") -> None:
        self.run_bar.set_running(running, message)
        for b in (self.open_button, self.index_button):
            b.setEnabled(not running)

    def on_progress(self, done: int, total: int, message: str) -> None:
        self.run_bar.on_progress(done, total, message)

    def say(self, text: str, error: bool = False) -> None:
        self.message.setText(f"<span style='color:#b00020'>{html.escape(text)}</span>" if error else text)

    def _choose_folder(self) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "The SAE's folder (a new or an unfinished one)")
        if folder:
            self.folder.setText(folder)
