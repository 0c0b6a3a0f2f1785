"""docs/api.md's code blocks run, in order, in an empty folder: the Python API page (load an encoder, embed a batch, the
loss modules of hcl_cli.losses in a loop of one's own, export, a ten-line fine-tune of the exported encoder, ``--init`` from torchvision's
ResNet-18, ``hcl embed --init`` and the readouts) cannot fall behind the code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docs_pages import nav_pages, page

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def api_blocks() -> list[tuple[str, str]]:
    """The page's bash and Python blocks, in order."""
    return BLOCK.findall(page("api"))


def test_the_page_is_in_the_nav_and_shows_each_part_of_the_api() -> None:
    assert ROOT / "docs" / "api.md" in nav_pages()
    code = "\n".join(block for _, block in api_blocks())
    losses = ("HardNegativeLoss(", "SupervisedHardNegativeLoss(", "OTNegativeLoss(", "UnDiMixLoss(")
    for needed in ("load_encoder(", "encode(", *losses, "negative_weights(", "hcl export", "embed --init", "torch.load("):
        assert needed in code, needed


@pytest.mark.slow
def test_the_blocks_run_in_order_in_an_empty_folder(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore::FutureWarning"}
    outputs = []
    for language, code in api_blocks():
        command = ["bash", "-eo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, (
            f"docs/api.md block failed (exit {result.returncode}):\n{code}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
        outputs.append(result.stdout)
    printed = "".join(outputs)
    assert "resnet18 (256, 512) (256, 128)" in printed
    assert "HardNegativeLoss(sampler='hucl', temperature=0.5, objective='nce'" in printed
    assert re.search(r"hcl \d+\.\d+\nh-scl \d+\.\d+\nhcl-ot \d+\.\d+\nundimix \d+\.\d+, learning \['attention'\]", printed)
    assert re.search(r"fine-tuned: train loss \d+\.\d+", printed)
    assert '"stem": "cifar' in printed  # the export's record, as cat shows it
    assert (tmp_path / "runs" / "from-torchvision" / "encoder.safetensors").is_file()
    assert json.loads((tmp_path / "runs" / "metrics" / "knn-torchvision.json").read_text())["test_size"] > 0
