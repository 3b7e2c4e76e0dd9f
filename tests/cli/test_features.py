"""`encoderscope features train|quality|show|ablate|steer|sweep` and `ablate --sae` on a tiny BERT:
each command's output against the core it words, the commands it suggests work, and bad input is
one `error:` line."""
import json
import math
import shlex

import pytest

from tests.support.feature_models import tiny_bert_pair, tiny_corpus
from tests.support.tiny_models import cli_clean, one_error


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("features_cli")
    backend, _ = tiny_bert_pair(root / "model")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(tiny_corpus(150)) + "\n", encoding="utf-8")
    return root, root / "model", corpus


@pytest.fixture(scope="module")
def trained_cli(setup):
    root, model, corpus = setup
    import io
    import sys
    from contextlib import redirect_stderr, redirect_stdout

    from app.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["features", "train", "--model", str(model), "--corpus", str(corpus), "--out", str(root / "sae"),
                     "--site", "L2.resid", "--width", "48", "--k", "4", "--tokens", "2500", "--batch", "256",
                     "--lr", "3e-3", "--no-progress", "--precision", "fp32", "--device", "cpu"])
    assert code == 0, err.getvalue()
    sys.stdout.flush()
    return root / "sae", out.getvalue()


def test_train_saves_a_loadable_sae_and_its_suggested_commands_work(trained_cli, setup, capsys):
    folder, out = trained_cli
    from core.features.saved import load_sae
    sae, meta = load_sae(folder)
    assert (meta.site, meta.width, meta.k) == ("L2.resid", 48, 4) and meta.tokens_trained >= 2500
    assert "SAE trained: 48 features, k 4, at L2.resid" in out
    suggested = [line.split("encoderscope ", 1)[1] for line in out.splitlines() if "encoderscope features" in line]
    assert len(suggested) == 2
    for command in suggested:
        code, printed, err = cli_clean(capsys, *shlex.split(command))
        assert code == 0, err


def test_quality_json_is_the_core_report(trained_cli, setup, capsys):
    folder, _ = trained_cli
    _, model, corpus = setup
    code, out, err = cli_clean(capsys, "features", "quality", folder, "--corpus", corpus, "--json")
    assert code == 0, err
    got = json.loads(out)
    from core.encoder.backends import get_backend
    from core.features.quality import evaluate_sae
    from core.features.saved import load_sae
    from index.corpus.door import read_training_corpus
    sae, meta = load_sae(folder)
    want = evaluate_sae(get_backend(str(model), "scratch", device="cpu", precision="fp32"), sae, meta,
                        read_training_corpus(str(corpus)))
    assert got["split"] == "held-out"
    assert [r["name"] for r in got["rows"]] == [r.name for r in want.rows]
    assert [r["value"] for r in got["rows"]] == pytest.approx([r.value for r in want.rows], abs=1e-9)
    code, out, _ = cli_clean(capsys, "features", "quality", folder, "--corpus", corpus)
    assert "normalised MSE" in out and "site = mean" in out
    rows = {r.name: r for r in want.rows}
    n = want.n_tokens
    dead_line = next(line for line in out.splitlines() if line.strip().startswith("dead fraction "))
    dead = rows["dead fraction"]
    assert f"{dead.value:.4f}" in dead_line and f"< {dead.bound:.2g} each" in dead_line
    lo, hi = rows["dead at n/2 tokens"].interval
    assert f"[{lo:.4f}, {hi:.4f}]" in next(line for line in out.splitlines() if "dead at n/2 tokens " in line)
    assert f"fewer than {rows['dead fraction'].bound:.2g} of such tokens" in out and f"3/{n:,}" in out
    assert got["rows"][[r["name"] for r in got["rows"]].index("dead fraction")]["bound"] == pytest.approx(
        -math.log(0.05) / n)


def test_show_lists_finds_and_details_features(trained_cli, setup, capsys):
    folder, _ = trained_cli
    _, _, corpus = setup
    code, out, _ = cli_clean(capsys, "features", "show", folder, "--json")
    listed = json.loads(out)["features"]
    assert code == 0 and listed
    dens = [f["density"] for f in listed]
    assert dens == sorted(dens, reverse=True)
    f = listed[0]["feature"]
    code, out, _ = cli_clean(capsys, "features", "show", folder, str(f), "--json")
    detail = json.loads(out)["features"][0]
    example = detail["top_examples"][0]
    word = example["tokens"][example["position"]]
    code, out, _ = cli_clean(capsys, "features", "show", folder, "--word", word, "--json")
    assert f in [x["feature"] for x in json.loads(out)["features"]] or detail["label"]
    code, out, _ = cli_clean(capsys, "features", "show", folder, str(f))
    assert f"feature {f}:" in out and "[[" in out and "aligned with:" in out


def test_show_without_an_index_says_how_to_build_one(trained_cli, tmp_path, capsys):
    import shutil
    folder, _ = trained_cli
    copy = tmp_path / "sae"
    shutil.copytree(folder, copy)
    for name in ("feature_index.json", "feature_index.safetensors"):
        (copy / name).unlink(missing_ok=True)
    code, _, err = cli_clean(capsys, "features", "show", copy)
    assert "--corpus FILE" in one_error(code, err)


def test_ablate_steer_and_sweep(trained_cli, setup, capsys):
    folder, _ = trained_cli
    text = "the cat sat on the mat."
    code, out, err = cli_clean(capsys, "features", "ablate", folder, text, "--feature", "1,2", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["edit"] == "feature 1 off, feature 2 off at L2.resid" and got["cosine"] <= 1.0 + 1e-6
    code, out, _ = cli_clean(capsys, "ablate", text, "--sae", folder, "--feature", "1", "--feature", "2", "--json")
    assert json.loads(out)["cosine"] == got["cosine"]
    code, out, _ = cli_clean(capsys, "features", "steer", folder, text, "--steer", "3=+5", "--json")
    assert json.loads(out)["cosine"] < 0.9999
    code, out, _ = cli_clean(capsys, "features", "sweep", folder, text, "the dog ran in the park.", "--json")
    effects = json.loads(out)["effects"]
    assert effects and json.loads(out)["alignment"] == "by position"


@pytest.mark.parametrize("argv, words", [
    (["features", "ablate", "{sae}", "x y", "--feature", "cat"], "--feature takes feature numbers"),
    (["features", "steer", "{sae}", "x y", "--steer", "3=big"], "--steer takes FEATURE=STRENGTH"),
    (["features", "ablate", "{sae}", "x y"], "nothing to change"),
    (["features", "ablate", "{sae}", "x y", "--feature", "999"], "not one of this SAE's"),
    (["ablate", "x y", "--feature", "1"], "--sae DIR"),
    (["ablate", "x y", "--sae", "{sae}", "--feature", "1", "--heads", "1.1"], "one kind at a time"),
    (["features", "show", "{missing}"], "no SAE folder"),
    (["features", "train", "--corpus", "{corpus}", "--out", "{sae}", "--model", "{model}"], "another width"),
])
def test_bad_input_is_one_error_line(trained_cli, setup, capsys, argv, words, tmp_path):
    folder, _ = trained_cli
    root, model, corpus = setup
    values = {"sae": str(folder), "missing": str(tmp_path / "none"), "corpus": str(corpus), "model": str(model)}
    code, _, err = cli_clean(capsys, *[a.format(**values) for a in argv])
    assert words in one_error(code, err)
