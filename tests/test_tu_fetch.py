"""TU data in every clone: MUTAG and PTC_MR ship in data/raw/tu/, any other dataset is fetched from the collection's
site (here a server the test starts on 127.0.0.1, serving a zip made from the shipped MUTAG), resumed after a cut, and
offline the error names the address and where to put the file."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from http_server import Served, serve

from hcl_cli.graph.tu import read_tu_files

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "data" / "raw" / "tu"


def renamed_zip(source: Path, old: str, new: str) -> bytes:
    """The TU zip ``source`` with every member ``OLD/OLD_x.txt`` renamed ``NEW/NEW_x.txt``."""
    out = io.BytesIO()
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as renamed:
        for info in archive.infolist():
            renamed.writestr(info.filename.replace(old, new), archive.read(info))
    return out.getvalue()


@pytest.fixture
def enzymes_zip() -> bytes:
    return renamed_zip(SHIPPED / "MUTAG.zip", "MUTAG", "ENZYMES")


def hcl_prepare(name: str, raw: Path, out: Path, mirror: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HCL_TU_MIRROR": mirror, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "hcl_cli", "prepare", "--dataset", "tu", "--name", name, "--path", str(raw), "--out", str(out)]
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=out.parent, timeout=300)


def test_mutag_and_ptc_mr_ship_with_the_repository_and_equal_the_collections_files() -> None:
    mutag, ptc = read_tu_files(ROOT / "data" / "raw", "MUTAG"), read_tu_files(ROOT / "data" / "raw", "PTC_MR")
    assert (mutag.num_graphs, ptc.num_graphs) == (188, 344)
    assert (SHIPPED / "CITATION.md").read_text().count("TUDataset: A collection of benchmark datasets for learning with graphs") >= 1


def test_prepare_fetches_enzymes_from_the_collections_site_into_data_raw(tmp_path: Path, enzymes_zip: bytes) -> None:
    raw, out = tmp_path / "raw", tmp_path / "prepared"
    raw.mkdir()
    served = Served({"ENZYMES.zip": enzymes_zip})
    with serve(served) as mirror:
        result = hcl_prepare("ENZYMES", raw, out, mirror)
        assert result.returncode == 0, result.stderr
        assert f"downloading {mirror}/ENZYMES.zip" in result.stderr
        assert (raw / "tu" / "ENZYMES.zip").read_bytes() == enzymes_zip
        assert not (raw / "tu" / "ENZYMES.zip.part").exists()
        assert "ENZYMES, train 141, test 47 graphs" in result.stderr
        again = hcl_prepare("ENZYMES", raw, out, mirror)  # cached: read from data/raw, the server not asked again
        assert again.returncode == 0, again.stderr
        assert served.requests == 1


def test_a_cut_download_is_resumed_with_a_range_request(tmp_path: Path, enzymes_zip: bytes) -> None:
    raw, out = tmp_path / "raw", tmp_path / "prepared"
    raw.mkdir()
    served = Served({"ENZYMES.zip": enzymes_zip}, cut_after=len(enzymes_zip) // 3)
    with serve(served) as mirror:
        cut = hcl_prepare("ENZYMES", raw, out, mirror)
        errors = [line for line in cut.stderr.splitlines() if ": error: " in line]
        assert cut.returncode == 1 and errors == cut.stderr.strip().splitlines()[-1:] and "rerun to resume" in errors[0], cut.stderr
        assert (raw / "tu" / "ENZYMES.zip.part").stat().st_size == len(enzymes_zip) // 3
        resumed = hcl_prepare("ENZYMES", raw, out, mirror)
        assert resumed.returncode == 0, resumed.stderr
        assert served.ranges == [f"bytes={len(enzymes_zip) // 3}-"]
        assert (raw / "tu" / "ENZYMES.zip").read_bytes() == enzymes_zip


def test_a_corrupt_download_is_refused_and_removed(tmp_path: Path, enzymes_zip: bytes) -> None:
    raw, out = tmp_path / "raw", tmp_path / "prepared"
    raw.mkdir()
    spoiled = bytearray(enzymes_zip)
    spoiled[200] ^= 0xFF  # inside the first member's compressed data: its CRC fails
    with serve(Served({"ENZYMES.zip": bytes(spoiled)})) as mirror:
        result = hcl_prepare("ENZYMES", raw, out, mirror)
    assert result.returncode == 1 and "the download is unusable" in result.stderr, result.stderr
    assert not (raw / "tu").exists() or not any((raw / "tu").iterdir())
    assert not out.exists()


def test_offline_one_line_names_the_address_and_where_to_put_the_file(tmp_path: Path) -> None:
    raw, out = tmp_path / "raw", tmp_path / "prepared"
    raw.mkdir()
    with serve(Served({})) as mirror:
        pass  # the server is shut down: its port now refuses connections
    result = hcl_prepare("ENZYMES", raw, out, mirror)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]  # after prepare's status lines
    assert [line] == [text for text in result.stderr.splitlines() if ": error: " in text], result.stderr
    assert f"cannot download {mirror}/ENZYMES.zip" in line
    assert f"put ENZYMES.zip (from that address) at {raw / 'tu' / 'ENZYMES.zip'}" in line
    assert "Traceback" not in result.stderr and not out.exists()


def test_a_name_the_collection_lacks_is_a_usage_error(tmp_path: Path) -> None:
    raw, out = tmp_path / "raw", tmp_path / "prepared"
    raw.mkdir()
    with serve(Served({})) as mirror:
        result = hcl_prepare("NO_SUCH", raw, out, mirror)
    assert result.returncode == 2 and "the TU collection has no dataset 'NO_SUCH'" in result.stderr, result.stderr
