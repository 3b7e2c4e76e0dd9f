"""What the subcommands share: the model options, loading the model they name, JSON output, and
the texts given as arguments or in a file."""
from __future__ import annotations

import argparse
import json
import math
import sys

from core.encoder.sources import DEFAULT_HUB_MODEL, DEFAULT_MODEL
from core.errors import EncoderscopeError
from core.names import BACKENDS, POOLINGS, PRECISION_CHOICES


def add_model_options(p: argparse.ArgumentParser, pooling: bool = True, store_default: str | None = None):
    """--model/--backend/--device/--precision (and --pooling): shared by every command that runs a
    model. store_default: the command takes the model and pooling of a store ("existing": it must
    exist; "new": a new store gets the defaults), so the help says so."""
    if store_default is None:
        model_default = f"default: {DEFAULT_MODEL}"
        pooling_default = "default: the model's own, mean unless it was trained with another"
    else:
        new = "" if store_default == "existing" else f"; a new store: {DEFAULT_MODEL}"
        model_default = f"default: the store's{new}"
        pooling_default = "default: the store's" + ("" if store_default == "existing"
                                                     else "; a new store: the model's own, mostly mean")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"{DEFAULT_MODEL} (packaged, offline), a hub id such as {DEFAULT_HUB_MODEL}, "
                        f"or a model folder / trained checkpoint ({model_default})")
    p.add_argument("--backend", choices=BACKENDS, default="scratch",
                   help="scratch: our from-scratch encoder; hf: Hugging Face transformers (default: scratch)")
    p.add_argument("--device", default=None,
                   help="auto, cpu, cuda or mps (default: $ENCODERSCOPE_DEVICE or auto)")
    p.add_argument("--precision", choices=PRECISION_CHOICES, default=None,
                   help="embedding precision: auto = bf16 where the CPU/GPU computes it natively "
                        "(AVX512-BF16, AMX, CUDA) and the model's bf16 vectors keep cosine >= 0.9999 "
                        "with fp32, else fp32 (default: $ENCODERSCOPE_PRECISION or auto). Vectors of "
                        "either precision share a store.")
    if pooling:
        p.add_argument("--pooling", choices=POOLINGS, default=None,
                       help=f"how token vectors become one sentence vector ({pooling_default})")


def backend_from_args(args):
    from core.encoder.backends import get_backend
    return get_backend(args.model, args.backend, device=args.device, precision=args.precision)


BACKEND_FLAG = {"scratch": "--backend scratch", "hf": "--backend hf"}


def store_backend(args, store) -> tuple[str, str | None]:
    """The encoder (backend name) to run on ``store``'s vectors, and a note in words when it is not
    the one that embedded them, or when the store does not say. ``args.backend`` None (not given):
    the store's own encoder, the from-scratch one where the store does not record it."""
    from index.store.base import describe_encoders
    recorded = store.encoder_backend
    chosen = args.backend or recorded or "scratch"
    made_by = describe_encoders(store.encoders)
    if store.encoders is None:
        return chosen, (f"the store's encoder is {made_by}: this ran the {chosen} encoder; "
                        f"if the store was ingested with --backend hf, give {BACKEND_FLAG['hf']} here too")
    if recorded is None:
        return chosen, (f"the store's vectors were embedded by {made_by}: this ran the {chosen} encoder, "
                        "so scores may differ from the stored vectors' in the 4th decimal")
    if recorded != chosen:
        return chosen, (f"the store was embedded by {made_by}, this ran the {chosen} encoder: "
                        "scores may differ from the stored vectors' in the 4th decimal; "
                        f"leave out --backend (or give {BACKEND_FLAG[recorded]}) to run the store's")
    return chosen, None


def json_line(obj) -> str:
    """``obj`` as one line of strict JSON: a number that is not finite (NaN, inf: a quantity that
    could not be computed) is written as null, never as the bare NaN that JSON parsers refuse."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite_or_null(obj), ensure_ascii=False, allow_nan=False)


def _finite_or_null(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


def emit_json(obj):
    """The result as one JSON line on stdout, written and flushed here; a full disk or a failing
    output file is one error naming that file (app/cli/output.py)."""
    from app.cli.output import result_follows
    result_follows("the JSON output")
    sys.stdout.write(json_line(obj) + "\n")
    sys.stdout.flush()


def read_texts(args) -> list[str]:
    texts = list(args.text or [])
    if args.file:
        texts += read_file_lines(args.file, args.encoding)
    if not texts:
        raise EncoderscopeError("no text given: pass TEXT arguments or --file FILE")
    return texts


def read_file_lines(path, encoding=None) -> list[str]:
    """`embed --file`: every line with a letter or digit (core.readers' rules), whatever the
    suffix; a line that cannot be read stops with its file, line and a way out."""
    from app.cli.remedies import encoding_hint
    from core.readers import collect, read_txt
    got = collect(read_txt(path, encoding))
    if got.bad:
        first = got.bad[0]
        hint = f"; {encoding_hint()}" if first.undecodable and encoding is None else ""
        raise EncoderscopeError(f"{path}, line {first.row}: {first.reason}{hint}")
    if not got.sentences:
        skipped = f" ({got.no_letters} line(s) without any letter or digit)" if got.no_letters else ""
        raise EncoderscopeError(f"{path} has no text lines{skipped}")
    if got.no_letters:
        print(f"note: skipped {got.no_letters} line(s) of {path} without any letter or digit", file=sys.stderr)
    return [s.text for s in got.sentences]


def add_index_option(p: argparse.ArgumentParser, what: str = "a new store") -> None:
    """--index: the index kind of a store being created (ingest, migrate), with one help text."""
    p.add_argument("--index", choices=("auto", "flat", "hnsw", "sq8", "ivf"), default="auto",
                   help=f"index kind of {what}: exact (flat), approximate (hnsw, ivf), 8-bit "
                        "quantised (sq8) or auto (FAISS: exact, ivf from 200k sentences; Milvus Lite "
                        "FLAT; Milvus server HNSW; default)")


def add_store_option(p):
    p.add_argument("--store", metavar="STORE", default=None,
                   help="a store folder (FAISS), milvus-lite:FOLDER (embedded Milvus Lite) or "
                        "http(s)://HOST:PORT[/DB][?collection=NAME] (a Milvus server; token from "
                        "$ENCODERSCOPE_MILVUS_TOKEN). Default: $ENCODERSCOPE_STORE, else the "
                        "user data folder, e.g. ~/.local/share/encoderscope/stores/default")


def store_location(args):
    """The --store location (index.opening; None: the default store)."""
    from index.store.location import parse_location
    return parse_location(args.store)


def backend_for(args, model):
    """`model` on the command's --backend (the from-scratch encoder when not given), --device
    and --precision."""
    from core.encoder.backends import get_backend
    return get_backend(model, getattr(args, "backend", "scratch") or "scratch",
                       device=getattr(args, "device", None),
                       precision=getattr(args, "precision", None))
