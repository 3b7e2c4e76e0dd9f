"""The corpus map: every sentence of a store placed in 2-D, clustered, its neighbour quality measured."""
