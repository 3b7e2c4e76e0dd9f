import os

# Qt aborts the process without a display; every test runs offscreen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The hub is unreachable here: never wait on it in a test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# The default precision is "auto" (bf16 where the CPU has it natively): CI machines differ, so
# the suite pins fp32 for numbers that must not depend on the CPU; tests/test_precision.py
# tests "auto" itself (it clears this variable).
os.environ["ENCODERSCOPE_PRECISION"] = "fp32"

import pytest  # noqa: E402

from tests.helpers import make_tiny_distilbert  # noqa: E402


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory):
    """A tiny random DistilBertForMaskedLM + WordPiece vocab, saved as a real model folder."""
    return make_tiny_distilbert(tmp_path_factory.mktemp("tiny_distilbert"))
