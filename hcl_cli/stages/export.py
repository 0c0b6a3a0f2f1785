"""``hcl export``: a trained image encoder's backbone, written for use outside hcl, with what it reads.

The backbone f of an encoder artifact (the features that embed, kNN and the linear readout read; the
projection head g stays behind) in one of :data:`~hcl_cli.config.export.EXPORT_FORMATS`
(:func:`~hcl_cli.image.transfer.exported_bytes`), and ``OUT.json`` beside it: the per-channel normalisation,
image size, channels and ResNet stem the backbone expects (:func:`~hcl_cli.image.transfer.input_record`), the
encoder it came from (its sha256, pretrain config and epochs) and the sha256 of ``OUT``. Both are written whole
(a temporary sibling renamed over the path) and over nothing but hcl's own earlier export (:mod:`hcl_cli.artifacts.outputs`).

A graph encoder is refused: its GIN is hcl's own module, with no model of another library to load its state dict
into, and its encoder artifact is already a plain safetensors state dict (``hcl_cli.graph.encoder.load_graph_encoder``
rebuilds it).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from hcl_cli.artifacts import (
    check_outputs_apart,
    check_replaceable,
    header_kind,
    library_versions,
    recorded_output,
    sidecar_path,
    write_output,
)
from hcl_cli.config.export import ExportConfig
from hcl_cli.errors import InputError, UsageError, shown
from hcl_cli.image.encoder import ENCODER_KIND, load_encoder
from hcl_cli.image.transfer import check_onnx_packages, export_sidecar, exported_bytes, input_record
from hcl_cli.interrupts import uninterrupted
from hcl_cli.logs import LOG

EXPORT = recorded_output("encoder export")
EXPORT_SIDECAR = recorded_output("encoder export record")


def run(config: ExportConfig) -> None:
    """Write ``config.model``'s backbone as ``config.out`` in ``config.format``, and ``OUT.json``."""
    out, record = Path(config.out), export_sidecar(config.out)
    read = {os.path.realpath(path) for path in (config.model, sidecar_path(config.model))}
    if read & {os.path.realpath(out), os.path.realpath(record)}:
        raise UsageError(f"--out {shown(config.out)} would write over the input --model {shown(config.model)}: choose another --out")
    check_outputs_apart({"--model": config.model}, {"--out": record})  # and not inside a folder hcl writes whole
    check_replaceable("--out", out, EXPORT)
    check_replaceable("--out", record, EXPORT_SIDECAR)
    if config.format == "onnx":
        check_onnx_packages()
    kind = header_kind(Path(config.model)) if Path(config.model).is_file() else None  # load_encoder says why it is not
    if kind not in (ENCODER_KIND, None, ""):
        raise InputError(
            f"--model {shown(config.model)} is an hcl {kind!r} artifact; hcl export writes image encoders "
            "(a graph encoder's artifact is already a safetensors state dict: see docs/api.md)"
        )
    model, sidecar = load_encoder(config.model)
    content = exported_bytes(model, config.format)
    source = {"path": shown(config.model), "sha256": sidecar.sha256, "epoch": sidecar.epoch, "config": sidecar.config}
    digest = hashlib.sha256(content).hexdigest()
    values = {**input_record(sidecar, config.format), "sha256": digest, "encoder": source, "versions": library_versions()}
    with uninterrupted():
        write_output(out, content, EXPORT)
        write_output(record, json.dumps(values, indent=2) + "\n", EXPORT_SIDECAR)
    LOG.info(
        f"hcl export: wrote {shown(out)} ({sidecar.arch} backbone, {config.format}, {sidecar.feature_dim} features) and {shown(record)}"
    )
