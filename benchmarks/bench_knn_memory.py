"""Peak working memory and wall time of the chunked weighted kNN, against the bound it promises.

A synthetic bank of 200,000 x 512 float32 embeddings (100 classes) and 10,000 queries, k = 200 (``--bank`` and
``--queries`` shrink them for a smoke run).
Each chunking runs in a fresh subprocess, after a small warm-up call that pages in the kernels and
starts the thread pool. The measured peak is what the call adds beyond its inputs: on the CPU, the
process's peak resident set (``ru_maxrss``) after the call minus its resident set just before, with
glibc's mmap threshold pinned at 1 MiB so that freed tensors leave the resident set at once; on
CUDA, ``torch.cuda.max_memory_allocated`` minus the memory allocated before (the bank stays on the
CPU and streams to the GPU chunk by chunk). The promise is
:func:`hcl_cli.knn.knn_working_memory_bytes`, which does not grow with the bank. Run from the
repository root::

    python -m benchmarks.bench_knn_memory --device cpu
    python -m benchmarks.bench_knn_memory --device cpu --bank 5000 --queries 100   # a smoke run

It writes ``benchmarks/results/knn_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result
from hcl_cli.knn import knn_predict, knn_working_memory_bytes
from hcl_cli.runtime import resolve_device

BANK, QUERIES, DIM, K, NUM_CLASSES, TEMPERATURE = 200_000, 10_000, 512, 200, 100, 0.5
CHUNKINGS = ((1024, 32768), (1024, 8192), (256, None))
"""(query chunk, bank chunk) pairs; None: the whole bank in one chunk."""
MIB = 2**20


def measure(device: torch.device, bank_size: int, query_count: int, chunk_size: int, bank_chunk_size: int) -> dict[str, Any]:
    """Run one kNN on fresh synthetic data in this process; return its wall time and added peak memory."""
    generator = torch.Generator().manual_seed(0)
    bank = torch.randn(bank_size, DIM, generator=generator)
    bank_labels = torch.randint(0, NUM_CLASSES, (bank_size,), generator=generator)
    queries = torch.randn(query_count, DIM, generator=generator).to(device)
    options = {"k": K, "temperature": TEMPERATURE, "num_classes": NUM_CLASSES, "chunk_size": chunk_size, "bank_chunk_size": bank_chunk_size}
    knn_predict(bank[:4096], bank_labels[:4096], queries[:64], **options)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    else:
        before = _resident_bytes()
    start = time.perf_counter()
    knn_predict(bank, bank_labels, queries, **options)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return {"seconds": time.perf_counter() - start, "peak_added_mib": (peak - before) / MIB}


def _resident_bytes() -> int:
    """This process's resident set now (Linux /proc/self/statm)."""
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def measure_in_subprocess(device: torch.device, bank_size: int, query_count: int, chunk_size: int, bank_chunk_size: int) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter, so earlier runs do not hide this one's peak."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.bench_knn_memory",
        "--device",
        str(device),
        "--bank",
        str(bank_size),
        "--queries",
        str(query_count),
        "--measure",
        str(chunk_size),
        str(bank_chunk_size),
    ]
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MIB)}
    result = subprocess.run(
        command, capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent, env=environment
    )
    return json.loads(result.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--bank", type=int, default=BANK, help="bank embeddings")
    parser.add_argument("--queries", type=int, default=QUERIES, help="query embeddings")
    parser.add_argument(
        "--measure",
        nargs=2,
        type=int,
        metavar=("CHUNK_SIZE", "BANK_CHUNK_SIZE"),
        help="internal: measure one chunking in this process and print JSON",
    )
    args = parser.parse_args()
    device = resolve_device(args.device)
    if args.measure:
        print(json.dumps(measure(device, args.bank, args.queries, *args.measure)))
        return
    runs = []
    for chunk_size, whole_or_chunk in CHUNKINGS:
        bank_chunk_size = whole_or_chunk or args.bank
        promise = (
            knn_working_memory_bytes(
                args.queries, DIM, k=K, num_classes=NUM_CLASSES, chunk_size=chunk_size, bank_chunk_size=bank_chunk_size
            )
            / MIB
        )
        measured = measure_in_subprocess(device, args.bank, args.queries, chunk_size, bank_chunk_size)
        runs.append(
            {
                "chunk_size": chunk_size,
                "bank_chunk_size": bank_chunk_size,
                "promise_mib": round(promise, 1),
                **measured,
                "within_promise": measured["peak_added_mib"] <= promise,
            }
        )
        print(
            f"chunks {chunk_size} x {bank_chunk_size}: peak +{measured['peak_added_mib']:.0f} MiB (promise {promise:.0f} MiB), {measured['seconds']:.1f} s"
        )
    imagenet_promise = knn_working_memory_bytes(50_000, 2048, k=K, num_classes=1000, chunk_size=1024, bank_chunk_size=32768)
    write_result(
        "knn_memory",
        {
            "setup": {
                "bank": [args.bank, DIM],
                "queries": [args.queries, DIM],
                "k": K,
                "num_classes": NUM_CLASSES,
                "bank_mib": args.bank * DIM * 4 / MIB,
                "load_average": os.getloadavg(),
            },
            "runs": runs,
            "promise_1.3M_x_2048_bank_50k_queries_gib": round(imagenet_promise / 2**30, 2),
        },
        device,
    )


if __name__ == "__main__":
    main()
