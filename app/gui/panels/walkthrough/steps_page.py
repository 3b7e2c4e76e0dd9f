"""The Step by step tab's Steps page: the model as a map of blocks (or a list of steps) on the
left; the current step, with the pooling comparison under the pooled step, and Previous / Next
on the right. Its widgets are the panel's attributes; the panel's slots take their signals."""
from __future__ import annotations

from PySide6 import QtWidgets
from PySide6.QtCore import Qt

from app.gui.panels.walkthrough.architecture_map import ArchitectureMap
from app.gui.panels.walkthrough.pooling_view import PoolingView
from app.gui.panels.walkthrough.steps_view import StepView
from app.gui.widgets.page_wheel import PageWheel


def build_steps_page(panel) -> QtWidgets.QSplitter:
    """The page (step list and map | the step and its navigation)."""
    steps_page = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
    panel.step_list = QtWidgets.QListWidget()
    panel.step_list.setObjectName("walkthrough_steps")
    panel.step_list.currentRowChanged.connect(panel._row_changed)
    panel.arch_map = ArchitectureMap(panel)            # the model as blocks; the current step in red
    panel.arch_map.step_clicked.connect(panel.show_step)
    panel.arch_map.layer_clicked.connect(panel.jump_to_layer)
    panel.left_tabs = QtWidgets.QTabWidget()
    panel.left_tabs.addTab(panel.arch_map, "Map")
    panel.left_tabs.addTab(panel.step_list, "List")
    panel.left_tabs.setTabToolTip(0, "The model's blocks: click one to see its step; the numbers under the "
                                     "layer jump to the same step in another layer")
    steps_page.addWidget(panel.left_tabs)
    right = QtWidgets.QWidget()
    rl = QtWidgets.QVBoxLayout(right)
    rl.setContentsMargins(6, 0, 0, 0)
    panel.page = QtWidgets.QScrollArea()             # the step scrolls; Previous / Next stay below it
    panel.page.setObjectName("walkthrough_page")
    panel.page.setWidgetResizable(True)
    panel.page.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
    panel.page.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    content = QtWidgets.QWidget()
    cl = QtWidgets.QVBoxLayout(content)
    cl.setContentsMargins(0, 0, 4, 0)
    panel.step_view = StepView(panel)
    panel.step_view.step_requested.connect(panel.show_step)
    panel.pooling_view = PoolingView(panel)        # under the "pooled" step only
    panel.pooling_view.hide()
    cl.addWidget(panel.step_view, 3)
    cl.addWidget(panel.pooling_view, 2)
    panel.page.setWidget(content)
    panel.page_wheel = PageWheel(panel.page)        # plain wheel scrolls the page, Ctrl + wheel zooms a plot
    panel.page_wheel.watch_all(content)
    rl.addWidget(panel.page, 1)
    nav = QtWidgets.QHBoxLayout()
    panel.prev_button = QtWidgets.QPushButton("◀ Previous")
    panel.next_button = QtWidgets.QPushButton("Next ▶")
    panel.prev_button.clicked.connect(panel.previous_step)
    panel.next_button.clicked.connect(panel.next_step)
    panel.position_label = QtWidgets.QLabel("")
    panel.position_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    nav.addWidget(panel.prev_button)
    nav.addWidget(panel.position_label, 1)
    nav.addWidget(panel.next_button)
    rl.addLayout(nav)
    steps_page.addWidget(right)
    steps_page.setStretchFactor(1, 1)
    steps_page.setSizes([380, 820])          # the map at full size: its labels readable (D8)
    return steps_page
