"""Install size and time of hcl's environment, the default way and with torch's CPU-only build.

The default way is the README's `pip install -e .`: pip takes torch from PyPI, whose Linux wheel
is the CUDA build and pulls the CUDA libraries and triton. The CPU-only way installs torch's CPU
wheel first (`pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu`),
then hcl. This machine reaches PyPI only, and the one CPU wheel on its disk is torch alone (no
CPU torchvision), so the CPU-only way is measured for torch itself and the environment's size is
derived: the default environment less the CUDA build's own packages, plus the CPU torch.
Each way runs in a fresh venv; sizes are the venv's bytes on disk.

    python benchmarks/bench_install.py --cpu-wheel /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, write_result

CUDA_PACKAGES = ("torch", "triton", "nvidia", "cuda")
"""Top-level site-packages entries that the CUDA build of torch brings (by name prefix)."""


def folder_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file() and not entry.is_symlink())


def fresh_venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder / "bin" / "python"


def timed_pip(python: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args], check=True)
    return time.perf_counter() - start


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def cuda_bytes(venv: Path) -> int:
    """Bytes of the site-packages entries that belong to torch's CUDA build (torch, triton, nvidia-*, cuda-*)."""
    return sum(
        folder_bytes(p) if p.is_dir() else p.stat().st_size
        for p in site_packages(venv).iterdir()
        if p.name.lower().startswith(CUDA_PACKAGES) and not p.name.startswith("torchvision")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-wheel", required=True, help="torch's CPU-only wheel (a file or a requirement).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hcl-install-") as scratch:
        default = Path(scratch) / "default"
        python = fresh_venv(default)
        default_seconds = timed_pip(python, "-e", str(ROOT))
        default_bytes, default_cuda = folder_bytes(default), cuda_bytes(default)
        shutil.rmtree(default)
        cpu = Path(scratch) / "cpu"
        python = fresh_venv(cpu)
        cpu_torch_seconds = timed_pip(python, "--no-deps", args.cpu_wheel)
        cpu_torch_bytes = cuda_bytes(cpu)
    derived_cpu_bytes = default_bytes - default_cuda + cpu_torch_bytes
    write_result(
        "install_size",
        {
            "default": {
                "command": "pip install -e .",
                "seconds": round(default_seconds, 1),
                "venv_bytes": default_bytes,
                "torch_cuda_build_bytes": default_cuda,
            },
            "cpu_only": {
                "command": "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu && pip install -e .",
                "torch_cpu_wheel": args.cpu_wheel,
                "torch_install_seconds": round(cpu_torch_seconds, 1),
                "torch_bytes": cpu_torch_bytes,
                "venv_bytes_derived": derived_cpu_bytes,
                "note": "derived: the default venv less torch's CUDA build (torch, triton, nvidia-*, cuda-*), plus the CPU torch; torchvision as in the default venv",
            },
            "saving_bytes": default_bytes - derived_cpu_bytes,
        },
    )


if __name__ == "__main__":
    main()
