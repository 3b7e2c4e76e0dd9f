"""The two encoders behind core.backends.base.Backend: ours (scratch.py) and transformers (hf.py)."""
