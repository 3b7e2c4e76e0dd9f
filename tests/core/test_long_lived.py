"""core/long_lived.py: what is alive is out of the collector's walks; garbage cycles are freed
with collect, and wait for the next collecting call without it."""
from __future__ import annotations

import gc
import weakref

import pytest

from core.long_lived import freeze_long_lived


class Node:
    def __init__(self):
        self.me = self      # a cycle: only the cyclic collector frees it


def _tracked(obj) -> bool:
    """Walked by the collector's generations (frozen objects are not listed)."""
    return any(o is obj for o in gc.get_objects())


@pytest.fixture(autouse=True)
def thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_collecting_frees_garbage_cycles_and_freezes_the_rest():
    kept, garbage = Node(), Node()
    gone = weakref.ref(garbage)
    del garbage
    freeze_long_lived()
    assert gone() is None, "a garbage cycle must be collected before the freeze"
    assert gc.get_freeze_count() > 0 and not _tracked(kept), "what is alive must be frozen"
    gc.collect()
    assert kept.me is kept
    gc.unfreeze()
    assert _tracked(kept)


def test_without_collecting_a_garbage_cycle_waits_for_the_next_collecting_call():
    garbage = Node()
    gone = weakref.ref(garbage)
    del garbage
    freeze_long_lived(collect=False)
    gc.collect()                          # full collections skip frozen objects
    assert gone() is not None
    freeze_long_lived()                   # the app's next load: thaw, collect, freeze
    assert gone() is None


def test_objects_made_after_the_freeze_are_collected_as_usual():
    freeze_long_lived(collect=False)
    later = Node()
    gone = weakref.ref(later)
    assert _tracked(later)
    del later
    gc.collect()
    assert gone() is None
