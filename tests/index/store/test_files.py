"""A store never writes outside itself: a link planted for any file a store owns is refused with
one line naming it, and what the link points to stays byte-identical under every writing
command; a store without a folder (a server) has no markers at all."""
import os
import shutil
import stat

import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error

TEXTS = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river"]
OWNED = ["lock", "store.db", "store.db-wal", "store.db-shm", "manifest.json", "INDEX",
         "vectors-0000000001.f32", "whitening.safetensors", "incomplete-migrate"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


@pytest.fixture(scope="module")
def made(tmp_path_factory, model):
    """Two files of sentences."""
    base = tmp_path_factory.mktemp("made")
    lines = base / "a.txt"
    lines.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    more = base / "more.txt"
    more.write_text("a king read a book\nthe queen ate food\n", encoding="utf-8")
    return base, lines, more


def _ingest(capsys, lines, store, model, *more):
    code, out, err = cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet", *more)
    assert code == 0, err


def _plant(store, name, victim):
    """Replace the store's `name` with a link to `victim` (which gets the file's bytes, or
    bytes of its own when the store has no such file)."""
    path = store / name
    if path.exists() and not path.is_symlink():
        shutil.copyfile(path, victim)
        path.unlink()
    else:
        victim.write_bytes(b"precious bytes that are not the store's\n" * 4)
    path.symlink_to(victim)
    return path


@pytest.mark.parametrize("name", OWNED)
def test_a_link_in_place_of_a_store_file_is_refused_and_its_target_kept(
        tmp_path, model, made, capsys, name):
    base, lines, more = made
    store = tmp_path / "S"
    other = tmp_path / "other"
    _ingest(capsys, lines, store, model, *(("--index", "hnsw") if name == "INDEX" else ()))
    _ingest(capsys, more, other, model)
    if name == "INDEX":         # hnsw: a flat index of a format 3 store has no file
        name = next(p.name for p in store.glob("index-*.faiss"))
    victim = tmp_path / "victim"
    link = _plant(store, name, victim)
    before = victim.read_bytes()
    commands = [("ingest", more, "--store", store, "--model", model, "--quiet"),
                ("remove", "--store", store, "1"),
                ("info", "--repair", "--store", store),
                ("info", "--check", "--store", store),
                ("ingest", "--rebuild", "--store", store, "--model", model, "--quiet"),
                ("migrate", "--from", other, "--to", store, "--quiet"),
                ("search", "cat", "--store", store, "--model", model)]
    for argv in commands:
        code, _, err = cli(capsys, *argv)
        msg = one_error(code, err)
        assert f"{link} is a symbolic link" in msg, (argv, msg)
        assert victim.read_bytes() == before, argv
        assert link.is_symlink()
    # the remedy the line gives works: remove the link and the same command runs
    link.unlink()
    if name in ("store.db", "manifest.json") or name.startswith("index-"):
        shutil.copyfile(victim, link)       # "put a copy of the file it points to in its place"
    code, out, err = cli(capsys, "ingest", more, "--store", store, "--model", model, "--quiet")
    assert code == 0, err
    assert victim.read_bytes() == before


def test_a_lite_store_refuses_links_for_its_lock_and_unclean_marker(tmp_path, model, made,
                                                                    capsys):
    pytest.importorskip("milvus_lite")
    _, lines, more = made
    folder = tmp_path / "L"
    store = f"milvus-lite:{folder}"
    _ingest(capsys, lines, store, model)
    for name in ("lock", "unclean", "encoderscope-milvus.json"):
        victim = tmp_path / f"victim-{name}"
        link = _plant(folder, name, victim)
        before = victim.read_bytes()
        for argv in [("ingest", more, "--store", store, "--model", model, "--quiet"),
                     ("search", "cat", "--store", store, "--model", model),
                     ("info", "--repair", "--store", store)]:
            code, _, err = cli(capsys, *argv)
            assert f"{link} is a symbolic link" in one_error(code, err), argv
            assert victim.read_bytes() == before, (name, argv)
        link.unlink()
        if name == "encoderscope-milvus.json":
            shutil.copyfile(victim, link)


def test_the_lock_is_opened_without_following_a_link_planted_after_the_check(tmp_path):
    """The lock's open itself refuses a link (O_NOFOLLOW), not only the check at open."""
    from index.store.durability import WriterLock
    from index.store.files import StoreFileIsLink
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me\n")
    (tmp_path / "lock").symlink_to(victim)
    with pytest.raises(StoreFileIsLink):
        WriterLock(tmp_path).acquire()
    assert victim.read_bytes() == b"keep me\n"


def test_migrate_to_a_server_never_touches_the_null_device(tmp_path, monkeypatch, model, made,
                                                           capsys):
    """A destination without a folder has no marker: nothing named by os.devnull (patched here
    to a stand-in, never the real device) is created, written or removed."""
    import index.corpus.migrate as migrate_mod
    from index.store.location import parse_location
    stand_in = tmp_path / "null"
    os.mkfifo(stand_in)
    monkeypatch.setattr(os, "devnull", str(stand_in))
    server = parse_location("http://127.0.0.1:19530")
    assert migrate_mod._marker(server) is None
    migrate_mod.mark_incomplete(server, parse_location(str(tmp_path / "src")))
    assert migrate_mod.incomplete_source(server) is None
    assert stat.S_ISFIFO(os.lstat(stand_in).st_mode)


@pytest.mark.parametrize("kind", ["fifo", "file", "devnull"])
def test_milvus_lite_at_a_path_that_is_not_a_folder_is_one_line(tmp_path, model, made, capsys,
                                                                kind):
    pytest.importorskip("milvus_lite")
    _, lines, _ = made
    path = tmp_path / "p"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "file":
        path.write_text("notes\n")
    else:
        path = "/dev/null"
    for argv in [("ingest", lines, "--store", f"milvus-lite:{path}", "--model", model),
                 ("search", "cat", "--store", f"milvus-lite:{path}", "--model", model)]:
        code, _, err = cli(capsys, *argv)
        assert "not a store folder" in one_error(code, err)
    if kind == "file":
        assert path.read_text() == "notes\n"


def test_migrate_to_the_null_device_is_one_line(tmp_path, model, made, capsys):
    _, lines, _ = made
    src = tmp_path / "src"
    _ingest(capsys, lines, src, model)
    code, _, err = cli(capsys, "migrate", "--from", src, "--to", "/dev/null", "--quiet")
    assert "not a store folder" in one_error(code, err)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_store_folder_the_user_may_not_read_is_one_line(tmp_path, model, made, capsys,
                                                          monkeypatch):
    """Run as root here, so the permission is taken away where the OS checks it: every look
    inside the folder is refused as it would be for another user."""
    _, lines, _ = made
    store = tmp_path / "S"
    _ingest(capsys, lines, store, model)
    real_stat, real_lstat, real_listdir = os.stat, os.lstat, os.listdir

    def refused(real):
        def call(path, *a, **kw):
            if str(path).startswith(str(store) + os.sep) or (real is real_listdir
                                                              and str(path) == str(store)):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *a, **kw)
        return call
    monkeypatch.setattr(os, "stat", refused(real_stat))
    monkeypatch.setattr(os, "lstat", refused(real_lstat))
    monkeypatch.setattr(os, "listdir", refused(real_listdir))
    for argv in [("search", "cat", "--store", store, "--model", model),
                 ("info", "--store", store),
                 ("migrate", "--from", store, "--to", tmp_path / "copy", "--quiet")]:
        code, _, err = cli(capsys, *argv)
        assert "permission denied" in one_error(code, err), argv
