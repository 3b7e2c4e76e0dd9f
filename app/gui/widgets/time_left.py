"""How long a run of counted parts still takes, in words, from its pace so far.

    time_left_words(elapsed_s=12.0, done=6, total=84)    # "about 2 min 36 s left"
"""
from __future__ import annotations


def time_left_words(elapsed_s: float, done: int, total: int) -> str:
    """'' until the first part is done (no pace yet); then the rest at the mean pace so far."""
    if done <= 0 or total <= done or elapsed_s <= 0:
        return ""
    left = round(elapsed_s / done * (total - done))
    if left < 60:
        return f"about {max(left, 1)} s left"
    minutes, seconds = divmod(left, 60)
    if minutes >= 60:
        hours, minutes = divmod(minutes, 60)
        return f"about {hours} h {minutes} min left"
    return f"about {minutes} min {seconds} s left"
