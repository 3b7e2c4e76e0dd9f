"""The Train panel's settings: the corpus and held-out share, the starting point, objective,
attention, pooling and architecture, the training hyper-parameters, the output folder and the
watch settings. Their widgets are the panel's attributes (the panel and its tests read them
there)."""
from __future__ import annotations

import time
from pathlib import Path

from PySide6 import QtWidgets

from app.gui.panels.train.watch_settings import WatchSettings
from app.gui.widgets.browse_row import browse_row
from app.gui.widgets.model_choice import POOLING_LABELS, offered_devices  # no torch import
from core.encoder.sources import DEFAULT_MODEL

STARTS = [  # (label, init, tokenizer)
    ("Fresh encoder, word vocabulary from the corpus", "fresh", "word"),
    ("Fresh encoder, minilm's WordPiece vocabulary", "fresh", "wordpiece"),
    (f"{DEFAULT_MODEL} (+ a fresh MLM head)", DEFAULT_MODEL, "wordpiece"),
]
OBJECTIVES = [
    ("Masked-LM (predict hidden words)", "mlm"),
    ("Contrastive (SimCSE: better search embeddings)", "simcse"),
    ("Masked-LM, then contrastive", "mlm+simcse"),
    ("Next token (causal mask)", "clm"),
]
ATTENTIONS = [("Bidirectional (each token sees all)", "bidirectional"),
              ("Causal (each token sees itself and earlier ones)", "causal")]


def default_output_folder() -> Path:
    from core.paths import models_dir
    return models_dir() / time.strftime("run-%Y%m%d-%H%M%S")


def output_folder(text: str) -> Path:
    """The output folder as typed, ~ expanded; a relative name goes under the models folder: a
    desktop app's working directory is wherever it was started from, not a place to write."""
    from core.paths import models_dir
    path = Path(text.strip()).expanduser()
    return path if path.is_absolute() else models_dir() / path


def build_settings(panel, left: QtWidgets.QVBoxLayout) -> None:
    """The settings' group boxes, added to `left`; the panel's slots handle their signals."""
    box = QtWidgets.QGroupBox("Data")
    form = QtWidgets.QFormLayout(box)
    row = QtWidgets.QHBoxLayout()
    panel.corpus = QtWidgets.QComboBox()
    panel.corpus.setMinimumContentsLength(24)
    panel.corpus.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    panel.corpus.setToolTip("The sentences to train on: the open store, the bundled sample corpus, "
                            "or a .txt (one sentence per line, or prose), .csv/.tsv ('text' column) "
                            "or .jsonl ('text' field) file")
    panel.corpus_browse = QtWidgets.QPushButton("File…")
    panel.corpus_browse.clicked.connect(panel._browse_corpus)
    row.addWidget(panel.corpus, 1)
    row.addWidget(panel.corpus_browse)
    form.addRow("Corpus", row)
    panel.heldout = QtWidgets.QDoubleSpinBox(decimals=1, minimum=0.0, maximum=50.0, value=5.0, suffix=" %")
    panel.heldout.setToolTip("Sentences kept out of training to measure how well the model generalises")
    form.addRow("Held out", panel.heldout)
    left.addWidget(box)

    box = QtWidgets.QGroupBox("Model")
    form = QtWidgets.QFormLayout(box)
    row = QtWidgets.QHBoxLayout()
    panel.start_from = QtWidgets.QComboBox()
    for label, init, tok in STARTS:
        panel.start_from.addItem(label, (init, tok))
    panel.start_from.currentIndexChanged.connect(panel._update_enabled)
    panel.init_browse = QtWidgets.QPushButton("Folder…")
    panel.init_browse.setToolTip("Continue training a model folder (a checkpoint, or a DistilBERT/BERT folder)")
    panel.init_browse.clicked.connect(panel._browse_init)
    row.addWidget(panel.start_from, 1)
    row.addWidget(panel.init_browse)
    form.addRow("Start from", row)
    panel.objective = QtWidgets.QComboBox()
    for label, key in OBJECTIVES:
        panel.objective.addItem(label, key)
    form.addRow("Objective", panel.objective)
    panel.attention = QtWidgets.QComboBox()
    for label, key in ATTENTIONS:
        panel.attention.addItem(label, key)
    panel.attention.setToolTip("Next-token prediction needs the causal mask: choosing it sets causal")
    panel.pooling = QtWidgets.QComboBox()
    for key, label in POOLING_LABELS.items():
        panel.pooling.addItem(label, key)
    panel.pooling.setCurrentIndex(panel.pooling.findData("mean"))
    panel.pooling.setToolTip("The sentence vector contrastive training shapes, and the model's default "
                             "pooling; attention pooling learns a query vector (contrastive objectives)")
    panel.objective.currentIndexChanged.connect(panel._objective_changed)
    form.addRow("Attention", panel.attention)
    form.addRow("Pooling", panel.pooling)
    panel.layers = QtWidgets.QSpinBox(minimum=1, maximum=24, value=2)
    panel.dim = QtWidgets.QSpinBox(minimum=8, maximum=2048, value=128, singleStep=32)
    panel.heads = QtWidgets.QSpinBox(minimum=1, maximum=32, value=4)
    panel.ffn = QtWidgets.QSpinBox(minimum=8, maximum=8192, value=512, singleStep=128)
    panel.positions = QtWidgets.QComboBox()
    panel.positions.addItems(["learned", "sinusoidal"])
    panel.norm = QtWidgets.QComboBox()
    panel.norm.addItem("pre-norm (trains easily)", "pre")
    panel.norm.addItem("post-norm (BERT)", "post")
    arch = QtWidgets.QGridLayout()
    for i, (name, w) in enumerate((("Layers", panel.layers), ("Dim", panel.dim),
                                   ("Heads", panel.heads), ("FFN", panel.ffn))):
        arch.addWidget(QtWidgets.QLabel(name), i // 2, 2 * (i % 2))
        arch.addWidget(w, i // 2, 2 * (i % 2) + 1)
    arch.addWidget(QtWidgets.QLabel("Positions"), 2, 0)
    arch.addWidget(panel.positions, 2, 1)
    arch.addWidget(QtWidgets.QLabel("Norm"), 2, 2)
    arch.addWidget(panel.norm, 2, 3)
    panel.arch_box = QtWidgets.QWidget()
    panel.arch_box.setLayout(arch)
    form.addRow(panel.arch_box)
    left.addWidget(box)

    box = QtWidgets.QGroupBox("Training")
    form = QtWidgets.QFormLayout(box)
    panel.steps = QtWidgets.QSpinBox(minimum=1, maximum=10_000_000, value=1000, singleStep=100)
    panel.batch = QtWidgets.QSpinBox(minimum=2, maximum=4096, value=32)
    panel.lr = QtWidgets.QLineEdit()
    panel.lr.setPlaceholderText("auto (5e-4 fresh, 2e-4 minilm + new head, 5e-5 imported)")
    panel.seed = QtWidgets.QSpinBox(minimum=0, maximum=2**31 - 1, value=0)
    panel.device = QtWidgets.QComboBox()
    for d in offered_devices():
        panel.device.addItem({"auto": "Auto (GPU when present)", "cpu": "CPU"}.get(d, d.upper()), d)
    form.addRow("Steps", panel.steps)
    form.addRow("Batch size", panel.batch)
    form.addRow("Learning rate", panel.lr)
    form.addRow("Seed", panel.seed)
    form.addRow("Device", panel.device)
    panel.out = QtWidgets.QLineEdit(str(default_output_folder()))
    panel.out.setToolTip("Where checkpoints go; the folder becomes a model folder")
    form.addRow("Output", browse_row(panel.out, "…", panel._browse_out))
    left.addWidget(box)
    panel.watch_box = WatchSettings()
    left.addWidget(panel.watch_box)
