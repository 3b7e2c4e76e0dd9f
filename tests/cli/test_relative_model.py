"""A store made with a model folder named relative to the working folder records the folder's
absolute location, so it is searched from anywhere; a store that recorded a relative name (made
before) gets a message saying where the folder was looked for, and its advice works."""
import json
import re
import sqlite3

import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error

TEXTS = ["the cat sat on the mat", "the dog ran in the park"]


@pytest.fixture()
def made(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    make_tiny_bert(work / "ck")
    (work / "a.txt").write_text("\n".join(TEXTS) + "\n")
    monkeypatch.chdir(work)
    code, _, err = cli(capsys, "ingest", "a.txt", "--store", "s", "--model", "ck", "--quiet")
    assert code == 0, err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return work


def test_a_relative_model_folder_is_recorded_absolute_and_found_from_elsewhere(made, capsys):
    code, out, err = cli(capsys, "info", "--store", made / "s")
    assert code == 0 and re.search(rf"^model +{re.escape(str(made / 'ck'))} ", out, re.M), out
    code, out, err = cli(capsys, "search", "cat sat", "-k", "1", "--store", made / "s")
    assert code == 0 and "the cat sat on the mat" in out, err


def test_a_store_that_recorded_a_relative_name_says_where_it_looked(made, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    db = sqlite3.connect(made / "s" / "store.db")
    fp = json.loads(db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()[0])
    fp["model"] = "ck"                        # as stores made before recorded it
    db.execute("UPDATE meta SET value=? WHERE key='fingerprint'", (json.dumps(fp),))
    db.commit()
    db.close()
    code, _, err = cli(capsys, "search", "cat sat", "--store", made / "s")
    msg = one_error(code, err)
    assert re.search(r"If 'ck' is a model folder, it is not in \S+elsewhere: give its full path", msg), msg
    code, out, err = cli(capsys, "search", "cat sat", "-k", "1", "--store", made / "s", "--model", made / "ck")
    assert code == 0 and "the cat sat on the mat" in out, err
