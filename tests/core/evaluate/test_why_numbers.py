"""Why's pairs in words never print a number that reads as another (core/evaluate/why.py)."""
from core.evaluate.why import format_pairs


def test_a_tiny_negative_pair_is_not_written_minus_zero():
    text = format_pairs([("[CLS]", "##ill", -2.1e-6), ("cat", "dog", -0.01234)], digits=4)
    assert text == "[CLS] ↔ ##ill -2.1e-06, cat ↔ dog -0.0123"
    assert "-0.0000" not in text and format_pairs([("a", "b", 0.0)], digits=4) == "a ↔ b 0.0000"
