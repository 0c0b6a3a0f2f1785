"""Artifact I/O, one module per concern; the names below are importable from ``hcl_cli.artifacts``.

- :mod:`~hcl_cli.artifacts.files`: atomic writes (temporary sibling, fsync, rename), stale
  temporary files of killed writers, JSON written and read back;
- :mod:`~hcl_cli.artifacts.tensors`: safetensors plus a JSON sidecar bound by the tensor file's
  sha256, validated on every read, and the library versions every sidecar records;
- :mod:`~hcl_cli.artifacts.owned`: folders hcl writes whole, with a manifest of their files;
- :mod:`~hcl_cli.artifacts.apart`: outputs refused where they would overwrite or land in an input;
- :mod:`~hcl_cli.artifacts.outputs`: the one rule for an output that exists: hcl writes only over its own
  earlier result of that output (:func:`check_replaceable`, an :class:`Output` per kind of file);
- :mod:`~hcl_cli.artifacts.record`: the record of the files hcl wrote in a folder, with their sha256,
  which alone makes such a file hcl's (:func:`write_recorded`);
- :mod:`~hcl_cli.artifacts.binding`: every artifact records the sha256 of the artifacts it was made
  from (``inputs``), and readers refuse inputs that do not belong together;
- :mod:`~hcl_cli.artifacts.checks`: checks of values read from an artifact.
"""

from hcl_cli.artifacts.apart import check_outputs_apart
from hcl_cli.artifacts.binding import (
    INPUTS,
    LOG_CURVES,
    LOG_SUMMARY,
    check_made_from,
    log_sha256,
    prepared_sha256,
    read_inputs,
    recorded_sha256,
)
from hcl_cli.artifacts.checks import first_line, is_finite_number, is_integer
from hcl_cli.artifacts.files import atomic_path, read_json, stale_siblings, temp_sibling, write_json, write_text
from hcl_cli.artifacts.outputs import (
    Output,
    check_replaceable,
    folder_output,
    header_kind,
    recorded_output,
    tensor_output,
    write_output,
)
from hcl_cli.artifacts.owned import OWNED_FILES, foreign_entries, owned_files, remove_owned_folder, write_owned_folder_manifest
from hcl_cli.artifacts.record import RECORD_FILE, read_record, record_document, record_key, sha256_of, unrecorded_entries, write_recorded
from hcl_cli.artifacts.tensors import SCHEMA_VERSION, TensorSpec, check_sha256, library_versions, load_artifact, save_artifact, sidecar_path

__all__ = [
    "INPUTS",
    "LOG_CURVES",
    "LOG_SUMMARY",
    "OWNED_FILES",
    "RECORD_FILE",
    "Output",
    "SCHEMA_VERSION",
    "TensorSpec",
    "atomic_path",
    "check_made_from",
    "check_outputs_apart",
    "check_replaceable",
    "check_sha256",
    "first_line",
    "folder_output",
    "foreign_entries",
    "header_kind",
    "is_finite_number",
    "is_integer",
    "library_versions",
    "load_artifact",
    "log_sha256",
    "owned_files",
    "prepared_sha256",
    "read_inputs",
    "read_json",
    "read_record",
    "record_document",
    "record_key",
    "recorded_output",
    "recorded_sha256",
    "remove_owned_folder",
    "save_artifact",
    "sha256_of",
    "sidecar_path",
    "stale_siblings",
    "temp_sibling",
    "unrecorded_entries",
    "tensor_output",
    "write_json",
    "write_owned_folder_manifest",
    "write_output",
    "write_recorded",
    "write_text",
]
