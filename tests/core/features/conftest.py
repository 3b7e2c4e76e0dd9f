import pytest

from tests.support.feature_models import small_config, tiny_bert_pair, tiny_corpus


@pytest.fixture(scope="session")
def bert_pair(tmp_path_factory):
    """(our backend, transformers' BertModel) of one tiny 3-layer BERT."""
    return tiny_bert_pair(tmp_path_factory.mktemp("features_bert"))


@pytest.fixture(scope="session")
def corpus():
    return tiny_corpus()


@pytest.fixture(scope="session")
def trained(bert_pair, corpus, tmp_path_factory):
    """(folder, TrainResult) of a small SAE trained at L2.resid of the tiny BERT."""
    from core.features.train import train_sae
    folder = tmp_path_factory.mktemp("features_sae") / "sae"
    return folder, train_sae(bert_pair[0], corpus, small_config(), folder)
