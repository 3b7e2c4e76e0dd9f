"""The encoder's inner layers are named in core/encoder/ only: every other module reaches the model
through its seams (core/encoder/model.py) and its sites (core/encoder/sites.py).

The walkthrough is the one deliberate exception: it shows the model weight by weight under the
names its state_dict has (the DistilBERT file layout: "transformer.layer.0.attention.q_lin.weight"),
re-derives every step from those weights in NumPy, and records each module's own input and output;
a few of its step names are the layers' names too ("position_embeddings"). The list below is exact:
a file that stops naming them must leave it, and no other file may join it silently.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INNER = re.compile(r"\b(q_lin|k_lin|v_lin|out_lin|lin1|lin2|sa_layer_norm|output_layer_norm"
                   r"|word_embeddings|position_embeddings)\b")
ALLOWED = {
    "core/walkthrough/numpy_ref.py": "the NumPy reference reads the state_dict by its keys",
    "core/walkthrough/notebook_cells.py": "the exported notebook reads the state_dict by its keys",
    "core/walkthrough/weights.py": "shows each step's weights under their state_dict keys",
    "core/walkthrough/steps.py": "the steps from the state_dict; 'position_embeddings' is a step name",
    "core/walkthrough/batch.py": "the batch view's Q, K from the state_dict",
    "core/walkthrough/capture.py": "records every module's own input and output, module by module",
    "core/walkthrough/architecture.py": "'position_embeddings' is a step name of the drawn diagram",
    "core/walkthrough/text.py": "'position_embeddings' is a step name it words",
    "bench/single_sentence_anatomy.py": "times the packed Linear kernels one by one",
}


def offenders() -> set[str]:
    found = set()
    for top in ("app", "core", "index", "bench", "tools"):
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("core/encoder/"):
                continue
            if INNER.search(path.read_text(encoding="utf-8")):
                found.add(rel)
    return found


def test_no_module_outside_the_encoder_names_its_inner_layers():
    extra = offenders() - set(ALLOWED)
    assert not extra, (f"{sorted(extra)} name the encoder's inner layers: use the seams of "
                       "core/encoder/model.py or a site of core/encoder/sites.py")


def test_the_exceptions_still_need_to_be_exceptions():
    assert set(ALLOWED) <= offenders(), f"no longer naming inner layers: {sorted(set(ALLOWED) - offenders())}"


def test_the_pattern_finds_a_hook_on_an_inner_layer():
    assert INNER.search("register(att.out_lin, 'pre', fn)")
    assert not INNER.search("cfg.max_position_embeddings")
