"""The words the app shows for the encoders a user chooses among: in the model bars, on the
Evaluate page and in the fixes its messages suggest (app/gui/fix_words.py)."""

# What the model bar shows for each of core.names.BACKENDS.
BACKEND_LABELS = {"scratch": "From-scratch encoder", "hf": "Hugging Face transformers"}
