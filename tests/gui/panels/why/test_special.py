"""`why` counts as special exactly the tokens the tokenizer's template added ([CLS], [SEP]); a
[MASK] typed in a text is the text's own token. The count it prints matches the pairs it
lists, and --hide-special hides those pairs and only those, on both backends."""
import json
import re

import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert

TEMPLATE = {"[CLS]", "[SEP]"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


@pytest.mark.parametrize("backend", ["scratch", "hf"])
def test_the_special_pair_count_matches_the_pairs_listed(model, capsys, backend):
    args = ("why", "[MASK]", "The cat sat.", "--model", model, "--backend", backend)
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    full = json.loads(out)
    a, b = full["tokens_a"], full["tokens_b"]
    assert a == ["[CLS]", "[MASK]", "[SEP]"] and b[0] == "[CLS]" and b[-1] == "[SEP]"
    with_special = len(a) * len(b) - sum(t not in TEMPLATE for t in a) * sum(t not in TEMPLATE for t in b)
    assert with_special == 14
    code, out, _ = cli(capsys, *args)
    assert int(re.search(r"the (\d+) pairs with a special token", out).group(1)) == with_special

    code, out, _ = cli(capsys, *args, "--hide-special", "--json")
    hidden = json.loads(out)
    assert hidden["tokens_a"] == ["[MASK]"] and hidden["tokens_b"] == [t for t in b if t not in TEMPLATE]
    assert hidden["hidden"]["pairs"] == with_special
    shown = sum(map(sum, hidden["contributions"]))
    assert shown + hidden["hidden"]["sum"] == pytest.approx(full["score"], abs=1e-4)
    code, out, _ = cli(capsys, *args, "--hide-special")
    listed = re.search(r"top pairs: (.*)", out).group(1)
    assert "[CLS]" not in listed and "[SEP]" not in listed and "[MASK]" in listed
    assert f"their {with_special} pairs" in out


def test_the_why_dialog_hides_the_template_tokens_and_keeps_a_typed_mask(qtbot, model):
    from app.gui.panels.why.view import WhyDialog
    from app.gui.state import AppState
    from core.encoder.backends import get_backend
    from core.evaluate.why import explain
    state = AppState()
    state.backend = get_backend(str(model), "scratch")
    dialog = WhyDialog(state)
    qtbot.addWidget(dialog)
    why = explain(state.backend, "[MASK]", "The cat sat.", "mean")
    dialog._on_result(why, "[MASK]", "The cat sat.", None)
    assert "the 14 pairs with a special token" in dialog.hidden_label.text()
    dialog.hide_special.setChecked(True)
    hm = dialog.heatmap
    assert hm.row_labels == ["[MASK]"] and not TEMPLATE & set(hm.col_labels)
    assert "their 14 pairs" in dialog.hidden_label.text()
