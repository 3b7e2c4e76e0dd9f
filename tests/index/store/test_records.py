"""A sentence's metadata split into columns (index/store/records.py): a reader's usual dict (only
source, row and added) takes a path with no copy; it must split exactly as any other mapping does."""
from __future__ import annotations

import pytest

from index.store.records import SplitMeta, split_meta

METAS = [{"source": "a.txt", "row": 3}, {"source": 7, "row": "12"}, {"row": 0}, {"source": None, "row": None},
         {"added": "not a time", "source": "x"}, {"added": 1.5e9}, {"source": "s", "row": 1, "added": 2},
         {"source": "s", "lang": "fr"}, {"n": [1, 2]}, {"row": 4, "added": 3, "note": None}]


@pytest.mark.parametrize("meta", METAS, ids=[str(m) for m in METAS])
def test_a_plain_dict_splits_as_any_mapping_does(meta):
    before = dict(meta)
    general = split_meta(list(meta.items()))         # not a dict: the copying path
    assert split_meta(meta) == general
    assert meta == before                            # the caller's dict is not changed


def test_the_columns_and_the_rest():
    assert split_meta({"source": 7, "row": "12", "added": "x"}) == SplitMeta("7", 12, None, None)
    assert split_meta({"source": "s", "lang": "fr"}) == SplitMeta("s", None, None, {"lang": "fr"})
    assert split_meta({}) == split_meta(None) == SplitMeta(None, None, None, None)
