"""Code the tests share (no tests here): tiny models, fake vectors, stores, a Milvus server,
the reliability driver, the store contract's pieces, the training corpus, paths."""
