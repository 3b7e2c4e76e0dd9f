import os

# Qt aborts the process without a display; every test runs offscreen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The hub is unreachable here: never wait on it in a test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402

from tests.helpers import make_tiny_distilbert  # noqa: E402


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory):
    """A tiny random DistilBertForMaskedLM + WordPiece vocab, saved as a real model folder."""
    return make_tiny_distilbert(tmp_path_factory.mktemp("tiny_distilbert"))
