"""The store says what fixes an error as data; the command line words it as a command
(app/cli/remedies.py). Each suggested command is run for real in tests/cli/test_messages.py."""
from types import SimpleNamespace

import pytest

from app.cli.remedies import worded
from index.map.corpus_map import EmptyStore
from index.store.errors import ModelMismatch, StoreCorrupted, StoreNotFound


def args(**kw):
    return SimpleNamespace(**{"store": None, "repair": False, **kw})


def test_each_remedy_becomes_the_command_that_applies_it():
    assert worded(StoreNotFound("no store at my store", location="my store"), args()) == (
        "no store at my store: ingest some files first (encoderscope ingest FILE --store 'my store')")
    assert worded(StoreCorrupted("index damaged", remedy="repair"), args(store="s")) == (
        "index damaged: run `encoderscope info --repair --store s`")
    rebuild = {"model": "a model", "pooling": "cls", "location": "/x"}
    assert worded(ModelMismatch("other model", rebuild=rebuild), args()) == (
        "other model: `encoderscope ingest --rebuild --model 'a model' --pooling cls --store /x`")
    assert worded(EmptyStore("nothing to map"), args(store="s")) == (
        "nothing to map: add some with `encoderscope ingest FILE --store s`")


def test_no_command_where_there_is_none_to_give():
    assert worded(StoreCorrupted("db damaged", remedy="restore"), args()) == "db damaged"
    assert worded(StoreCorrupted("index damaged", remedy="repair"), args(repair=True)) == "index damaged"
    assert worded(StoreNotFound("no store"), args()) == "no store"
    said = "other model; `encoderscope search ...`"     # the command already chose its words
    assert worded(ModelMismatch(said, rebuild={"model": "m", "pooling": "mean", "location": "x"}), args()) == said


def test_a_fix_given_as_data_is_worded_as_the_options_that_apply_it():
    from core.errors import InputError, NoMLMHead
    assert worded(InputError("a.csv has columns x, y: choose the one that holds the text",
                             fix={"kind": "column", "columns": ["x", "y"]}), args()) == (
        "a.csv has columns x, y: choose the one that holds the text with --column NAME")
    assert worded(InputError("line 3: not UTF-8", fix={"kind": "encoding", "choices": ["cp1252", "latin-1"]}),
                  args()).startswith("line 3: not UTF-8; if the file is in another encoding, add --encoding ")
    assert "`encoderscope train --init minilm" in worded(NoMLMHead("no head", fix={"kind": "train_mlm",
                                                                                   "init": "minilm"}), args())


FIXES = [   # one of each kind core/ and index/ give (EncoderscopeError.fix)
    {"kind": "settings", "settings": {"lr": None, "precision": "fp32"}},
    {"kind": "train", "settings": {"objective": "simcse", "pooling": "attention"}},
    {"kind": "train_mlm", "init": "minilm"},
    {"kind": "resume", "out": "/runs/my run"},
    {"kind": "reembed"},
    {"kind": "whiten_again"},
    {"kind": "store_elsewhere", "folder": "C:\\corpora\\news", "server": "http://localhost:19530"},
]


def test_a_setting_fix_is_worded_as_options_on_the_command_line():
    from core.errors import EncoderscopeError, settings_fix
    error = EncoderscopeError("the loss became nan at step 3: lower the learning rate or use fp32",
                              fix=settings_fix(lr=None, precision="fp32"))
    assert worded(error, args()) == ("the loss became nan at step 3: lower the learning rate or use fp32 "
                                     "(--lr, --precision fp32)")
    assert worded(EncoderscopeError("x", fix=FIXES[1]), args()) == (
        "x: `encoderscope train --objective simcse --pooling attention --corpus FILE --out DIR`, then --model DIR")
    assert worded(EncoderscopeError("x", fix=FIXES[3]), args()) == "x with `encoderscope train --resume '/runs/my run'`"


def test_every_fix_is_worded_by_both_front_ends_and_the_app_names_no_option():
    from app.cli.remedies import _fix_worded
    from app.gui.wording import gui_fix
    for fix in FIXES:
        cli, app = _fix_worded(fix), gui_fix(fix)
        assert cli and (app or fix["kind"] == "whiten_again"), fix    # the app makes no whitened store
        assert "--" not in app and "encoderscope " not in app, app
    assert gui_fix({"kind": "settings", "settings": {"backend": "hf", "lr": None}}) == (
        " (Encoder: Hugging Face transformers; Train: Learning rate)")


def test_the_app_shows_the_fix_in_its_own_words():
    pytest.importorskip("PySide6", reason="the app's wording needs PySide6 (a bare GPU box has none)")
    from app.gui.workers import readable_error
    from core.errors import EncoderscopeError, settings_fix
    error = EncoderscopeError("bf16 is not supported on this CPU; use fp32", fix=settings_fix(precision="fp32"))
    assert readable_error(error) == "bf16 is not supported on this CPU; use fp32 (Model → Precision: fp32)"
