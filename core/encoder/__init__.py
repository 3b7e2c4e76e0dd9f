"""The encoder: our from-scratch model and its maths, weights, tokenizers, model sources, and the two backends
(ours and transformers) behind one API. It knows nothing of training or the walkthrough (an import contract)."""
