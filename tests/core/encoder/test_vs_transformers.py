"""Our encoder against transformers' own modules, on the same weights, in eval mode (fp32).

Hidden states are compared at real-token positions (what anything downstream reads); attention
weights at every position of every layer and head; MLM logits at real-token positions.
"""
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertForMaskedLM,
    DistilBertConfig,
    DistilBertForMaskedLM,
)

from core.encoder.model import EncoderConfig, EncoderForMaskedLM
from core.encoder.sources import resolve
from core.encoder.weights import WeightsError, bert_to_ours, build_model, load_folder
from tests.support.tiny_models import make_tiny_bert

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A cat sat.",
    "Attention lets every token look at every other token in the sentence, weighted by relevance.",
    "hello",
]
TOL = 1e-5
# fp32 against the exact (fp64) result after six layers: rounding adds up to 7e-6 in attention
# probabilities on minilm's weights and 1.02e-5 on its int8-restored copy (the GPU bundle's), and
# other kernels (cuBLAS, oneDNN) round differently; a wrong formula shows at 1e-3 and above.
FP32_VS_EXACT = 3e-5


def max_diff(a, b, keep=None):
    d = (a.double() - b.double()).abs()
    return (d[keep] if keep is not None else d).max().item()


def compare(ours_out, ref_out, mask, ours_logits=None, tol=TOL):
    keep = mask.bool()
    assert len(ours_out.hidden_states) == len(ref_out.hidden_states)
    for layer, (a, b) in enumerate(zip(ours_out.hidden_states, ref_out.hidden_states)):
        assert max_diff(a, b, keep) <= tol, f"hidden state {layer}"
    assert len(ours_out.attentions) == len(ref_out.attentions)
    for layer, (a, b) in enumerate(zip(ours_out.attentions, ref_out.attentions)):
        assert a.shape == b.shape
        assert max_diff(a, b) <= tol, f"attention layer {layer}"
    if ours_logits is not None:
        assert max_diff(ours_logits, ref_out.logits, keep) <= tol


def run_minilm(dtype, device="cpu"):
    """minilm under our encoder and under transformers' BertModel, in ``dtype`` on ``device``:
    (ours, theirs, attention mask) for SENTENCES, a batch with padding."""
    folder = resolve("minilm").folder
    ours, cfg, layout = load_folder(folder)
    assert layout == "bert" and cfg.n_layers == 6 and cfg.dim == 384 and cfg.n_heads == 12
    tok = AutoTokenizer.from_pretrained(str(folder))
    enc = tok(SENTENCES, padding=True, truncation=True, max_length=64, return_tensors="pt").to(device)
    assert (enc["attention_mask"] == 0).any(), "the batch must contain padding"
    ref = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval().to(device, dtype)
    ours = ours.eval().to(device, dtype)
    with torch.no_grad():
        r = ref(**enc, output_hidden_states=True, output_attentions=True)
        o = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], True, True)
    return o, r, enc["attention_mask"]


def test_minilm_matches_bert_model():
    """The same maths as transformers: in fp64 the two agree to 1e-10 (a difference of code shows
    far above that, whatever the weights or the CPU's kernels). In fp32 ours is within FP32_VS_EXACT
    of that exact result. The two fp32 runs are not compared with each other: each carries its own
    rounding, and on some weights (minilm restored from an int8 copy) their errors add up."""
    o64, r64, mask = run_minilm(torch.float64)
    compare(o64, r64, mask, tol=1e-10)
    assert max_diff(o64.last_hidden_state, r64.last_hidden_state, mask.bool()) <= 1e-10
    o32, _, _ = run_minilm(torch.float32)
    assert o32.last_hidden_state.dtype == torch.float32
    compare(o32, r64, mask, tol=FP32_VS_EXACT)
    assert max_diff(o32.last_hidden_state, r64.last_hidden_state, mask.bool()) <= FP32_VS_EXACT


def _distilbert_roundtrip(folder):
    ours, cfg, layout = load_folder(folder)
    assert layout == "distilbert" and isinstance(ours, EncoderForMaskedLM)
    tok = AutoTokenizer.from_pretrained(str(folder))
    enc = tok(SENTENCES, padding=True, truncation=True, max_length=64, return_tensors="pt")
    ref = AutoModelForMaskedLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.no_grad():
        r = ref(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                output_hidden_states=True, output_attentions=True)
        logits, o = ours(enc["input_ids"], enc["attention_mask"], output_hidden_states=True, output_attentions=True)
    compare(o, r, enc["attention_mask"], logits)


def test_tiny_distilbert_mlm_matches(tiny_distilbert):
    _distilbert_roundtrip(tiny_distilbert)


def test_tiny_distilbert_sinusoidal_matches(tmp_path):
    from tests.support.tiny_models import make_tiny_distilbert
    folder = make_tiny_distilbert(tmp_path / "sin", sinusoidal=True, seed=3)
    _distilbert_roundtrip(folder)


def test_distilbert_default_size_matches(tmp_path):
    """768-d, 12 heads, 6 layers, random weights: DistilBERT's real shape."""
    torch.manual_seed(1)
    ref = DistilBertForMaskedLM(DistilBertConfig(vocab_size=30522, attn_implementation="eager")).eval()
    assert (ref.config.dim, ref.config.n_heads, ref.config.n_layers) == (768, 12, 6)
    cfg = EncoderConfig()      # our defaults are DistilBERT's
    ours = build_model(cfg, ref.state_dict(), mlm_head=True).eval()
    ids = torch.randint(5, 30522, (3, 40))
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0
    mask[2, 7:] = 0
    with torch.no_grad():
        r = ref(input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        logits, o = ours(ids, mask, output_hidden_states=True, output_attentions=True)
    compare(o, r, mask, logits)


def test_distilbert_state_dict_loads_strictly_without_renaming():
    torch.manual_seed(0)
    ref = DistilBertForMaskedLM(DistilBertConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32))
    ours = EncoderForMaskedLM(EncoderConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32))
    ours.load_state_dict(ref.state_dict(), strict=True)        # raises on any name difference
    assert set(ours.state_dict()) == set(ref.state_dict())


def test_missing_and_unexpected_keys_are_named():
    cfg = EncoderConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32)
    state = EncoderForMaskedLM(cfg).state_dict()
    state.pop("distilbert.transformer.layer.0.ffn.lin1.weight")
    state["distilbert.transformer.layer.0.extra.weight"] = torch.zeros(1)
    with pytest.raises(WeightsError) as e:
        build_model(cfg, state, mlm_head=True)
    assert "ffn.lin1.weight" in str(e.value) and "extra.weight" in str(e.value)


@pytest.mark.parametrize("weights_file,legacy", [("model.safetensors", False), ("pytorch_model.bin", False),
                                                 ("model.safetensors", True)])
def test_tiny_bert_mlm_matches(tmp_path, weights_file, legacy):
    """The BERT layout with its MLM head (cls.predictions.*) through BERT_KEY_MAP: sentence pairs
    (token types 0 and 1), every layer, every head, and the MLM logits. Also from a
    pytorch_model.bin, and with TF-style LayerNorm.gamma/beta names (bert-base-uncased has them)."""
    ref_folder = make_tiny_bert(tmp_path / "ref", seed=4)
    folder = ref_folder if (weights_file, legacy) == ("model.safetensors", False) else \
        make_tiny_bert(tmp_path / "variant", seed=4, weights_file=weights_file, legacy_layer_norm_names=legacy)
    ours, cfg, layout = load_folder(folder)
    assert layout == "bert" and isinstance(ours, EncoderForMaskedLM) and cfg.type_vocab_size == 2
    tok = AutoTokenizer.from_pretrained(str(folder))
    enc = tok(SENTENCES[:2], SENTENCES[2:], padding=True, truncation=True, max_length=64, return_tensors="pt")
    assert (enc["token_type_ids"] == 1).any() and (enc["attention_mask"] == 0).any()
    ref = BertForMaskedLM.from_pretrained(str(ref_folder), attn_implementation="eager").eval()
    with torch.no_grad():
        r = ref(**enc, output_hidden_states=True, output_attentions=True)
        logits, o = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], True, True)
    compare(o, r, enc["attention_mask"], logits)


class _Trap:
    """A pickle that creates a file when unpickled: what a hostile pytorch_model.bin could do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        from pathlib import Path
        return Path.touch, (Path(self.path),)


def test_bin_weights_load_with_weights_only(tmp_path):
    folder = make_tiny_bert(tmp_path / "bert", mlm=False, weights_file="pytorch_model.bin")
    marker = tmp_path / "code-ran"
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    torch.save({**state, "trap": _Trap(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(WeightsError, match="refused for safety") as refused:
        load_folder(folder)
    assert "weights_only" not in str(refused.value) and "safetensors" in str(refused.value)
    assert not marker.exists(), "unpickling the .bin ran code"
    torch.load(folder / "pytorch_model.bin", weights_only=False)   # the trap is real: plain torch.load springs it
    assert marker.exists()


def test_bert_checkpoint_errors_name_the_keys(tmp_path):
    folder = make_tiny_bert(tmp_path / "bert", mlm=False)
    state = load_file(str(folder / "model.safetensors"))
    prefix = "bert." if any(k.startswith("bert.") for k in state) else ""
    # A key the map does not know is named as the file spells it.
    with pytest.raises(WeightsError, match=r"encoder\.layer\.0\.attention\.self\.rotary\.weight"):
        bert_to_ours({**state, prefix + "encoder.layer.0.attention.self.rotary.weight": torch.zeros(1)})
    save_file({**state, prefix + "encoder.layer.0.attention.self.rotary.weight": torch.zeros(1)},
              str(folder / "model.safetensors"))
    with pytest.raises(WeightsError, match="rotary"):
        load_folder(folder)
    # A missing tensor is named too.
    del state[prefix + "encoder.layer.1.output.dense.weight"]
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(WeightsError, match=r"missing keys: transformer\.layer\.1\.ffn\.lin2\.weight"):
        load_folder(folder)


def test_mlm_state_without_embeddings_or_with_untied_projection_is_a_clear_error():
    cfg = EncoderConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32)
    state = {k: v for k, v in EncoderForMaskedLM(cfg).state_dict().items() if k != "vocab_projector.weight"}
    no_words = {k: v for k, v in state.items() if "word_embeddings" not in k}
    with pytest.raises(WeightsError, match="missing keys: distilbert.embeddings.word_embeddings.weight"):
        build_model(cfg, no_words, mlm_head=True)
    untied = dict(state, **{"vocab_projector.weight": torch.randn(50, 16)})
    with pytest.raises(WeightsError, match="not tied"):
        build_model(cfg, untied, mlm_head=True)
    tied = dict(state, **{"vocab_projector.weight": state["distilbert.embeddings.word_embeddings.weight"].clone()})
    build_model(cfg, tied, mlm_head=True)         # an explicit copy of the tied weight is fine
