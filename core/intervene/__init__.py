"""Interventions: switch parts of the encoder off, patch them from another sentence, measure the effect.

spec.py names an intervention (a frozen value); apply.py applies one to a loaded encoder for the
duration of a ``with`` block; means.py computes the corpus means of mean ablation; patching.py
runs sentence A with sites taken from sentence B; effects.py and importance.py measure.
Layers and heads count from 1 wherever a person reads them (3.5 = layer 3, head 5), from 0 here.
"""
