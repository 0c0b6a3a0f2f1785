"""SentEval's files fetched where the raw data folder holds none: from a server on 127.0.0.1 (HCL_SENTEVAL_MIRROR,
serving tiny files whose sha256s the test pins in place of the real ones), once, resumed after a cut, refused and
removed when the sha256 differs, and offline one line that names the address and where to put the file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from http_server import Served, serve

from hcl_cli.errors import HclError, InputError, UsageError
from hcl_cli.text import senteval_fetch
from hcl_cli.text.senteval import read_task
from hcl_cli.text.senteval_fetch import SOURCES, Source, senteval_source

POSITIVE = b"a gorgeous , witty film .\n" * 400
NEGATIVE = b"a dull mess .\n" * 300


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """MR's two files as the test server serves them, their sha256s pinned in place of the real files'."""
    files = {"MR/rt-polarity.pos": POSITIVE, "MR/rt-polarity.neg": NEGATIVE}
    for name, data in files.items():
        monkeypatch.setitem(SOURCES, name.split("/")[1], Source("https://unused.invalid", hashlib.sha256(data).hexdigest()))
    return files


def test_the_real_sources_are_commit_pinned_with_a_sha256_each() -> None:
    assert len(SOURCES) == 12
    for source in SOURCES.values():
        assert source.url.startswith("https://raw.githubusercontent.com/") and len(source.sha256) == 64
        assert senteval_fetch.SENT_CONV in source.url or senteval_fetch.NLP_TUTORIALS in source.url


def test_a_task_is_fetched_once_into_senteval_task(tmp_path: Path, pinned: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    served = Served(pinned)
    with serve(served) as mirror:
        monkeypatch.setenv("HCL_SENTEVAL_MIRROR", mirror)
        folder = senteval_source(tmp_path, "MR")
        assert folder == tmp_path / "senteval" / "MR" and served.requests == 2
        assert (folder / "rt-polarity.pos").read_bytes() == POSITIVE and not list(folder.glob("*.part"))
        assert len(read_task(folder, "MR").sentences) == 700
        assert senteval_source(tmp_path, "MR") == folder and served.requests == 2  # the server is not asked again


def test_local_files_are_read_without_a_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "MR").mkdir()
    for name in ("rt-polarity.pos", "rt-polarity.neg"):
        (tmp_path / "MR" / name).write_bytes(b"fine .\n")
    monkeypatch.setenv("HCL_SENTEVAL_MIRROR", "http://127.0.0.1:9")  # would refuse: nothing may be downloaded
    assert senteval_source(tmp_path, "MR") == tmp_path / "MR"


def test_a_cut_download_is_resumed_with_a_range_request(tmp_path: Path, pinned: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    served = Served(pinned, cut_after=len(POSITIVE) // 3)
    with serve(served) as mirror:
        monkeypatch.setenv("HCL_SENTEVAL_MIRROR", mirror)
        with pytest.raises(HclError, match="rerun to resume it"):
            senteval_source(tmp_path, "MR")
        partial = tmp_path / "senteval" / "MR" / "rt-polarity.pos.part"
        assert partial.stat().st_size == len(POSITIVE) // 3
        folder = senteval_source(tmp_path, "MR")
    assert served.ranges == [f"bytes={len(POSITIVE) // 3}-"]
    assert (folder / "rt-polarity.pos").read_bytes() == POSITIVE and (folder / "rt-polarity.neg").read_bytes() == NEGATIVE


def test_a_file_whose_sha256_differs_is_refused_and_removed(
    tmp_path: Path, pinned: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(Served({**pinned, "MR/rt-polarity.neg": NEGATIVE + b"tampered .\n"})) as mirror:
        monkeypatch.setenv("HCL_SENTEVAL_MIRROR", mirror)
        with pytest.raises(HclError, match=r"rt-polarity.neg: the download is unusable: its sha256 is [0-9a-f]{64}, not the pinned"):
            senteval_source(tmp_path, "MR")
    fetched = tmp_path / "senteval" / "MR"
    assert sorted(path.name for path in fetched.iterdir()) == ["rt-polarity.pos"]  # the checked file stays; the other is gone


def test_offline_one_line_names_the_address_and_where_to_put_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(Served({})) as mirror:
        pass  # the server is shut down: its port now refuses connections
    monkeypatch.setenv("HCL_SENTEVAL_MIRROR", mirror)
    with pytest.raises(UsageError) as raised:
        senteval_source(tmp_path, "TREC")
    message = str(raised.value)
    assert "\n" not in message and f"cannot download {mirror}/TREC/train_5500.label" in message
    assert f"put train_5500.label (from that address) at {tmp_path / 'senteval' / 'TREC' / 'train_5500.label'}" in message


def test_no_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no folder: SentEval's CR is read from a folder holding custrev.pos and custrev.neg"):
        senteval_source(tmp_path / "absent", "CR")
