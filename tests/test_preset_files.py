"""`hcl preset NAME --params FILE` on unusual params files: each is rewritten whole or refused with one line,
and a refused file is left exactly as it was."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from hcl_cli.cli import main
from hcl_cli.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
PRESET = "hcl-stl10-hard-beta1"


def hcl_preset(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``hcl preset PRESET --params path`` in-process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exited:
        main(["preset", PRESET, "--no-estimate", "--params", str(path)])
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def expected_params(text: str) -> dict[str, object]:
    """The values of ``text`` with the preset's groups written over them."""
    before = yaml.safe_load(text)
    return before | {group: (before.get(group) or {}) | values for group, values in PRESETS[PRESET].groups().items()}


def assert_refused(path: Path, capsys: pytest.CaptureFixture[str], code: int, message: str, *, planned: bool = False) -> None:
    """The preset is refused with exit ``code`` and one line containing ``message``; nothing else appears beside the file.
    ``planned``: the refusal comes at the write, after the planned changes were printed."""
    siblings = sorted(os.listdir(path.parent))
    before = path.read_bytes() if path.is_file() else None
    exit_code, out, err = hcl_preset(path, capsys)
    assert exit_code == code and (out.startswith(f"hcl preset: {PRESET} ") if planned else out == "")
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "internal error" not in err and "Traceback" not in err
    assert sorted(os.listdir(path.parent)) == siblings, "no temporary file is left behind"
    if before is not None:
        assert path.read_bytes() == before


def test_a_file_that_is_not_utf8_is_refused_with_the_offending_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_bytes(b"pretrain:\n  sampler: caf\xe9\n")
    assert_refused(path, capsys, 2, "not UTF-8 text (byte 0xe9 at offset 24)")


def test_a_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.mkdir()
    assert_refused(path, capsys, 2, "is a directory, not a params file")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    os.mkfifo(path)
    assert_refused(path, capsys, 2, "is not a regular file")


@pytest.mark.parametrize(
    "text",
    [
        "defaults: &base\n  epochs: 3\npretrain:\n  <<: *base\n  sampler: ucl\n",
        "pretrain:\n  sampler: ucl\n  epochs: &n 3\nlinear:\n  epochs: *n\n",
    ],
    ids=["merge-key", "alias"],
)
def test_anchors_and_aliases_are_refused_and_kept(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    assert_refused(path, capsys, 1, "uses YAML anchors or aliases")


def test_a_read_only_file_is_refused_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", path)
    path.chmod(0o444)
    assert_refused(path, capsys, 1, "is read-only; nothing written")
    assert stat.S_IMODE(path.stat().st_mode) == 0o444


def test_a_four_space_file_keeps_its_indentation_for_new_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    text = "# mine\npretrain:\n    sampler: ucl    # baseline\n    epochs: 3\nlinear:\n    epochs: 3\n"
    path.write_text(text)
    code, out, _ = hcl_preset(path, capsys)
    written = path.read_text()
    assert code == 0 and out.startswith(f"hcl preset: {PRESET} ") and f"hcl preset: wrote {PRESET} into" in out
    assert yaml.safe_load(written) == expected_params(text)
    body = [line for line in written.splitlines() if line.startswith(" ")]
    assert body and all(line.startswith("    ") and not line.startswith("     ") for line in body), written
    assert "    sampler: hucl   # baseline" in written.splitlines(), "the comment keeps its column"


def test_crlf_line_endings_are_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    text = "pretrain:\r\n  sampler: ucl\r\n  epochs: 3\r\n"
    path.write_bytes(text.encode())
    assert hcl_preset(path, capsys)[0] == 0
    data = path.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n") and yaml.safe_load(data) == expected_params(text)


def test_a_byte_order_mark_is_read_past_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A params file that starts with a UTF-8 byte-order mark, which the stages and DVC read, is edited like any other."""
    path = tmp_path / "params.yaml"
    text = "pretrain:\n  sampler: ucl\n  epochs: 3\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert hcl_preset(path, capsys)[0] == 0
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and not data[3:].startswith(b"\xef\xbb\xbf")
    assert yaml.safe_load(data[3:]) == expected_params(text)


def test_a_symlinked_params_file_writes_its_target_and_keeps_the_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "shared" / "params.yaml"
    target.parent.mkdir()
    shutil.copy(ROOT / "params.yaml", target)
    target.chmod(0o640)
    link = tmp_path / "params.yaml"
    link.symlink_to(Path("shared") / "params.yaml")
    text = target.read_text()
    code, out, _ = hcl_preset(link, capsys)
    assert code == 0 and f"in {link} (-> {target})" in out.splitlines()[0] and f"wrote {PRESET} into {link} (-> {target})" in out
    assert link.is_symlink() and os.readlink(link) == str(Path("shared") / "params.yaml")
    assert yaml.safe_load(target.read_text()) == expected_params(text)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and sorted(os.listdir(target.parent)) == ["params.yaml"]


def test_a_dangling_symlink_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "params.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    assert_refused(link, capsys, 2, "which does not exist")
    assert link.is_symlink() and not (tmp_path / "gone.yaml").exists()


@pytest.mark.parametrize(
    "text",
    [
        "pretrain:\n  sampler: >\n    ucl\n  epochs: 3\n",  # a folded block scalar: its value spans two lines
        "pretrain:\n  sampler: ucl\n  epochs: [3,\n    4]\n",  # a flow sequence across lines
    ],
    ids=["block-scalar", "multi-line-flow"],
)
def test_a_file_it_cannot_rewrite_line_by_line_is_left_untouched(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    assert_refused(path, capsys, 1, "could not edit it in place")


def test_a_failed_write_leaves_the_file_and_no_temporary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", path)

    def disk_full(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    assert_refused(path, capsys, 1, "No space left on device; nothing written", planned=True)
