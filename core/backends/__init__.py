"""The two encoders behind core.backend.Backend: ours (scratch.py) and transformers (hf.py)."""
