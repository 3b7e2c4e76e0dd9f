"""`encoderscope map`: the corpus map on the command line.

    encoderscope map --store S [--method umap|pca] [--clusters K] [--seed N] --out map.csv [--json] [--quiet]

Writes the CSV `id, x, y, cluster, text` (the same file the app's Map tab exports) and prints
how well the map keeps neighbours and the clusters with their labels, or with --json {"count",
"method", "explained_variance", "neighbours": {"knn_recall", "k", "sample", "chance"},
"clusters": [{"id", "size", "label"}]}. A progress line (stages, UMAP's epochs) goes to stderr;
Ctrl-C ends it with one line and writes nothing. No Qt here.
"""
from __future__ import annotations

import sys


def register(sub) -> None:
    from app.cli.options import add_store_option
    from index.map.corpus_map import DEFAULT_CLUSTERS, DEFAULT_SEED
    from index.map.projection import METHODS

    p = sub.add_parser("map", help="a 2-D map of every sentence in a store, clustered and labelled")
    add_store_option(p)
    p.add_argument("--method", choices=METHODS, default=None,
                   help="umap (the default where umap-learn is installed: keeps each sentence's "
                        "neighbours around it) or pca (exact and fast; the fallback)")
    p.add_argument("--clusters", type=int, default=DEFAULT_CLUSTERS, metavar="K",
                   help=f"number of k-means clusters (default {DEFAULT_CLUSTERS})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"seed of k-means and UMAP (default {DEFAULT_SEED})")
    p.add_argument("--out", metavar="FILE", help="write the map as CSV: id, x, y, cluster, text")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.set_defaults(func=cmd_map)


def cmd_map(args) -> int:
    from app.cli.options import emit_json
    from app.cli.progress_line import ProgressLine
    from core.errors import InputError
    from index.map.corpus_map import build_map, write_map_csv
    from index.opening import open_store
    from index.store.location import parse_location
    line = ProgressLine(sys.stderr, quiet=args.quiet)
    try:
        with open_store(parse_location(args.store), writable=False) as store:
            m = build_map(store, method=args.method, clusters=args.clusters, seed=args.seed,
                          progress=line.update)
    except KeyboardInterrupt:
        line.end()
        print("interrupted: no map was made" + (f" and {args.out} was not written" if args.out else ""),
              file=sys.stderr)
        return 130
    finally:
        line.end()
    for note in m.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out:
        try:
            write_map_csv(args.out, m)
        except OSError as e:
            raise InputError(f"cannot write {args.out}: {e.strerror or e}") from None
    if args.json:
        emit_json(m.summary())
        return 0
    print(f"{len(m):,} sentences mapped with {m.method.upper()}: {m.describe_quality()}")
    for c in m.clusters:
        print(f"  cluster {c.id:>2}  {c.size:>7,}  {c.label}")
    if args.out:
        print(f"wrote {args.out}")
    return 0
