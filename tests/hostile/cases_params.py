"""Bad ``--params`` files: missing, unreadable, not YAML, not a mapping, unknown keys, wrong types, special files."""

from __future__ import annotations

from .checks import says
from .harness import HUGE, KNN, PRETRAIN, Case, usage
from .setups import fifo, write

CASES: list[Case] = [
    usage("params missing", *KNN, "--params", "nowhere.yaml"),
    usage("params not UTF-8", *KNN, "--params", "p.yaml", setup=write("p.yaml", b"knn:\n  k: \xff\n")),
    usage("params not YAML", *KNN, "--params", "p.yaml", setup=write("p.yaml", "knn: [k: 1\n")),
    usage("params a list", *KNN, "--params", "p.yaml", setup=write("p.yaml", "- 1\n")),
    usage("params unknown key", *KNN, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  kk: 5\n"), check=says("kk")),
    usage("params string for int", *KNN, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  temperature: five\n")),
    usage("params bool for int", *KNN, "--params", "p.yaml", setup=write("p.yaml", "knn:\n  chunk_size: true\n")),
    usage("params huge int", *KNN, "--params", "p.yaml", setup=write("p.yaml", f"knn:\n  chunk_size: {HUGE}\n")),
    usage("params a folder", *KNN, "--params", "data"),
    usage("params a FIFO", *KNN, "--params", "fifo.yaml", setup=fifo("fifo.yaml")),
    usage("params injection", *PRETRAIN, "--params", "p.yaml", setup=write("p.yaml", 'pretrain:\n  sampler: "hucl; rm -rf ~"\n')),
]
