"""The cache serves (issue 50): a run once made is restored, never trained again, and equal outputs are equal bytes.

Every output of every stage is cached and none persists, so DVC's run cache restores a stage whose dependencies and
parameters it has seen; the resumable training state lies in ``models/checkpoints``, which no stage declares. Each
declared output is a function of the stage's inputs (times, host and commit go to ``models/encoder.run.json``, which DVC
does not track), so a forced rerun writes the same bytes and nothing downstream reruns. A second clone restores the
whole pipeline from a remote (a local folder, and DVC's S3 remote against moto's S3 server on 127.0.0.1) without
training. The digits data shipped in data/, at the tiny settings of tests/test_pipeline.py.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_pipeline import TINY, set_params
from test_readme_blocks import fresh_clone

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("prepare", "pretrain", "embed", "linear-eval", "knn-eval", "report")
TRAINED = STAGES[1:]
"""The stages downstream of the prepared data: what a change of sampler reruns."""

pytestmark = pytest.mark.slow


def dvc(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``dvc ARGS`` in ``repo`` (one thread), its stdout and stderr; a non-zero exit fails the test with them."""
    result = subprocess.run(
        ["dvc", *args], cwd=repo, capture_output=True, text=True, check=False, env=os.environ | {"OMP_NUM_THREADS": "1"} | (env or {})
    )
    assert result.returncode == 0, f"dvc {' '.join(args)}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True)


def tiny_clone(path: Path) -> Path:
    """A fresh clone of this working tree at the tiny settings, committed, so that a second clone has the same params."""
    repo = fresh_clone(path)
    set_params(repo, TINY)
    git(repo, "commit", "-q", "-am", "tiny settings")
    return repo


def restored(log: str) -> set[str]:
    return {stage for stage in STAGES if f"Stage '{stage}' is cached - skipping run, checking out outputs" in log}


def ran(log: str) -> set[str]:
    return {stage for stage in STAGES if f"Running stage '{stage}'" in log}


def declared_outputs(repo: Path) -> Iterator[Path]:
    """Every file under every output dvc.yaml declares (outs, metrics; folders walked)."""
    for stage in yaml.safe_load((repo / "dvc.yaml").read_text())["stages"].values():
        for entry in [*stage.get("outs", []), *stage.get("metrics", [])]:
            path = repo / (next(iter(entry)) if isinstance(entry, dict) else entry)
            yield from sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def digests(repo: Path) -> dict[str, str]:
    return {path.relative_to(repo).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest() for path in declared_outputs(repo)}


def test_forcing_pretrain_twice_leaves_every_declared_output_byte_identical(tmp_path: Path) -> None:
    repo = tiny_clone(tmp_path / "clone")
    dvc(repo, "repro")
    first = digests(repo)
    assert any(name.startswith("models/") for name in first) and any(name.startswith("reports/") for name in first)
    for _ in range(2):
        log = dvc(repo, "repro", "-f", "-s", "pretrain")
        assert ran(log) == {"pretrain"}, log
        assert digests(repo) == first, "a forced rerun of pretrain wrote other bytes"
        log = dvc(repo, "repro")
        assert not ran(log), f"nothing downstream of an equal encoder reruns:\n{log}"
    assert (repo / "models" / "encoder.run.json").is_file(), "the run's time, host and commit are kept, apart"
    assert "Data and pipelines are up to date." in dvc(repo, "status")


@pytest.mark.e2e
def test_switching_the_sampler_and_back_restores_every_stage_from_the_run_cache(tmp_path: Path) -> None:
    repo = tiny_clone(tmp_path / "clone")
    assert ran(dvc(repo, "repro")) == set(STAGES)
    first = digests(repo)
    set_params(repo, {"pretrain": {"sampler": "hscl"}})
    assert ran(dvc(repo, "repro")) == set(TRAINED)
    set_params(repo, {"pretrain": {"sampler": "hucl"}})
    log = dvc(repo, "repro")
    assert restored(log) == set(TRAINED) and not ran(log), log
    assert digests(repo) == first, "the restored outputs, the training log and metrics among them, are the first run's"
    assert "Data and pipelines are up to date." in dvc(repo, "status")


def pushed_and_cloned(tmp_path: Path, remote: str, **config: str) -> tuple[dict[str, str], Path]:
    """A tiny run (hucl) committed and pushed to ``remote``, a second one (hscl) left uncommitted and pushed with the run cache; and
    a second clone of the commit. Returns the committed run's output digests and the second clone."""
    first = tiny_clone(tmp_path / "first")
    dvc(first, "remote", "add", "-d", "store", remote)
    for key, value in config.items():
        dvc(first, "remote", "modify", "store", key, value)
    dvc(first, "repro")
    dvc(first, "push")  # the team workflow: push after training
    committed = digests(first)
    git(first, "add", "-A")
    git(first, "commit", "-q", "-m", "the tiny run")
    set_params(first, {"pretrain": {"sampler": "hscl"}})
    dvc(first, "repro")
    dvc(first, "push", "--run-cache")
    second = tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(first), str(second)], check=True, capture_output=True)
    return committed, second


def check_restored_without_training(second: Path, committed: dict[str, str], *, pull_first: bool) -> None:
    """The second clone's ``dvc repro`` trains nothing: after ``dvc pull`` (``pull_first``) or as ``dvc repro --pull`` for
    the committed run, then as ``dvc repro --pull`` for the pushed hscl run (from the run cache); a new readout reruns only
    itself."""
    if pull_first:
        dvc(second, "pull")
    log = dvc(second, "repro") if pull_first else dvc(second, "repro", "--pull")
    assert not ran(log), log
    assert digests(second) == committed
    set_params(second, {"pretrain": {"sampler": "hscl"}})
    log = dvc(second, "repro", "--pull")  # (dvc pull --run-cache fetches the run cache's entries, not their outputs)
    assert restored(log) == set(TRAINED) and not ran(log), f"the pushed run cache serves the uncommitted run:\n{log}"
    set_params(second, {"knn": {"k": 5}})
    assert ran(dvc(second, "repro")) == {"knn-eval", "report"}, "the restored embeddings serve a new readout"


@pytest.mark.e2e
def test_a_second_clone_restores_every_stage_from_a_local_remote_without_training(tmp_path: Path) -> None:
    committed, second = pushed_and_cloned(tmp_path, str(tmp_path / "remote"))
    check_restored_without_training(second, committed, pull_first=True)


@pytest.fixture
def s3_server() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port) with an empty bucket ``hcl``: its endpoint URL."""
    boto3 = pytest.importorskip("boto3")
    server_module = pytest.importorskip("moto.server")
    pytest.importorskip("dvc_s3")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    ).create_bucket(Bucket="hcl")
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.mark.e2e
def test_a_second_clone_restores_every_stage_from_an_s3_remote_on_loopback_without_training(
    tmp_path: Path, s3_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    committed, second = pushed_and_cloned(tmp_path, "s3://hcl/cache", endpointurl=s3_server)
    check_restored_without_training(second, committed, pull_first=False)


@pytest.mark.e2e
def test_a_run_killed_under_dvc_repro_resumes_to_the_uninterrupted_runs_bytes(tmp_path: Path) -> None:
    """SIGKILL to ``dvc repro`` and its ``hcl pretrain`` after the first epoch's checkpoint; the next ``dvc repro`` resumes
    from ``models/checkpoints`` (no declared output, so DVC neither deleted nor restored it) to the bytes of a run never
    killed, the training log included."""
    whole, killed = tiny_clone(tmp_path / "whole"), tiny_clone(tmp_path / "killed")
    for repo in (whole, killed):
        set_params(repo, {"pretrain": {"epochs": 3}})
    dvc(whole, "repro")
    pointer = killed / "models" / "checkpoints" / "latest.json"
    process = subprocess.Popen(
        ["dvc", "repro"], cwd=killed, env=os.environ | {"OMP_NUM_THREADS": "1"}, start_new_session=True, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 600
        while not (pointer.is_file() and "epoch-0001" in pointer.read_text()) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be killed"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert not (killed / "models" / "encoder.safetensors").exists()
    log = dvc(killed, "repro")
    assert "resuming from" in log, log
    assert digests(killed) == digests(whole)
