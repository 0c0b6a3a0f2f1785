"""``hcl report``'s options: reports/report.md with parameters, metrics and figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import PREPARED, RUNS, StageConfig, output_file, param, runtime


@dataclass(init=False, frozen=True)
class ReportConfig(StageConfig):
    """reports/report.md with parameters, metrics and figures."""

    group: ClassVar[str] = "report"
    command: ClassVar[str] = "report"
    title: str = param("hcl run", "Heading of the report.")
    anchors: int = param(4, "Test anchors in the hardest-negatives figure.", minimum=0, maximum=64)
    params_file: str = runtime(
        "", "A params.yaml whose planned values to tabulate beside the recorded ones (dvc.yaml passes params.yaml; by hand: none)."
    )
    metrics: str = runtime(f"{RUNS}/metrics", "Folder of metrics JSON files.")
    plots: str = runtime(f"{RUNS}/dvclive", "Folder of dvclive logs (curves).")
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings for the similarity histograms.")
    data: str = runtime(PREPARED, "Prepared dataset (images for the hard-negative grid).")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder, for the sampler's weights in the hard-negative grid.")
    out: str = output_file(f"{RUNS}/reports/report.md", "Report file; figures go beside it.")
