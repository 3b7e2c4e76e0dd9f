"""What the fill-mask panel shows for a model without a masked-LM head: why it cannot fill in
masks, and the models that can (a click switches to one)."""
from __future__ import annotations

import html

from PySide6 import QtWidgets
from PySide6.QtCore import Qt


def mlm_models(list_fn=None) -> list[dict]:
    """Models known to have a masked-LM head (``core.encoder.catalog.list_models()`` filtered)."""
    if list_fn is None:
        from core.encoder.catalog import list_models as list_fn
    try:
        return [m for m in list_fn() if m.get("mlm_head")]
    except Exception:  # noqa: BLE001 - the explanation must show even if listing fails
        return [{"name": "distilbert-base-uncased", "source": "hub", "available": False, "mlm_head": True}]


def no_mlm_html(name: str, models: list[dict], message: str = "") -> str:
    """The explanation for model `name`, with `models` (see mlm_models) as links."""
    items = []
    for m in models:
        label = html.escape(m["name"])
        if m.get("available"):
            note = f"{m.get('source', '')}, on this machine"
        else:
            note = m.get("note") or "not on this machine"
        items.append(f"<li><a href='{html.escape(m['name'])}'><b>{label}</b></a> &nbsp;"
                     f"<span style='color:gray'>({html.escape(note)})</span></li>")
    items.append("<li>a checkpoint you trained in the app (Train panel, or "
                 "<code>encoderscope train</code>): choose its folder with <i>Inspect with → Folder…</i></li>")
    return (
        f"<h3>“{html.escape(name)}” cannot fill in masks</h3>"
        f"<p>Fill-mask needs a <b>masked-language-model head</b>: the small network on top of "
        f"the encoder that turns each token's vector into a probability for every word in the "
        f"vocabulary. Models trained to predict hidden words (BERT, DistilBERT) keep it.</p>"
        f"<p><b>{html.escape(name)}</b> is a sentence-embedding model: after its masked-LM pre-training "
        f"it was fine-tuned to produce sentence vectors and published <i>without</i> that head, "
        f"so there is nothing to turn its vectors back into words. It still works for search, "
        f"the corpus and the attention inspector.</p>"
        f"<p>Switching the <b>inspected</b> model leaves the corpus and search as they are.</p>"
        + (f"<p style='color:gray'>{html.escape(message)}</p>" if message else "")
        + f"<p><b>Models with a masked-LM head</b> (click a name to switch to it):</p>"
        f"<ul>{''.join(items)}</ul>")


def no_mlm_page(panel) -> QtWidgets.QScrollArea:
    """The page that shows the explanation (panel.no_mlm_label); a link switches the model."""
    panel.no_mlm_label = QtWidgets.QLabel()
    panel.no_mlm_label.setObjectName("no_mlm_explanation")
    panel.no_mlm_label.setTextFormat(Qt.TextFormat.RichText)
    panel.no_mlm_label.setWordWrap(True)
    panel.no_mlm_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    panel.no_mlm_label.setOpenExternalLinks(False)
    panel.no_mlm_label.linkActivated.connect(panel._switch_model)
    panel.no_mlm_label.setMargin(24)
    panel.no_mlm_label.setMaximumWidth(760)
    no_page = QtWidgets.QScrollArea()
    no_page.setWidgetResizable(True)
    no_page.setWidget(panel.no_mlm_label)
    return no_page
