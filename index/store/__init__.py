"""The shared bottom of every store: the Store interface, adding, the embedding pipeline, durability,
the store's files, fingerprints, whitening, records, errors and the one location module."""
