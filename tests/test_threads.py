"""``--threads``: torch's CPU threads of the stages that compute, capped by default on CUDA so that several runs share a GPU
machine (issue 28: four ``hcl pretrain`` on one GPU, each holding every core, slowed one another down many times over)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from hcl_cli.cli import main
from hcl_cli.config import EmbedConfig, KnnConfig, LinearConfig, PretrainConfig
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.runtime import set_cpu_threads
from hcl_cli.stages import embed, knn_eval, linear_eval, pretrain

COMPUTING_STAGES = (PretrainConfig, EmbedConfig, KnnConfig, LinearConfig)


@pytest.fixture
def restored_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_auto_caps_the_threads_on_cuda_and_keeps_the_cpu_default(restored_threads: None) -> None:
    torch.set_num_threads(CUDA_THREADS + 1)
    assert set_cpu_threads(None, torch.device("cpu"), CUDA_THREADS) == CUDA_THREADS + 1 == torch.get_num_threads()
    assert set_cpu_threads(None, torch.device("cuda"), CUDA_THREADS) == CUDA_THREADS == torch.get_num_threads()
    torch.set_num_threads(1)
    assert set_cpu_threads(None, torch.device("cuda"), CUDA_THREADS) == 1, "auto never raises the count"
    assert set_cpu_threads(3, torch.device("cuda"), CUDA_THREADS) == 3 == torch.get_num_threads()


@pytest.mark.parametrize("config_cls", COMPUTING_STAGES)
def test_every_computing_stage_takes_threads_as_a_runtime_option(config_cls: type) -> None:
    option = next(option for option in config_cls.declared_options() if option.name == "threads")
    assert option.runtime and option.default == "auto", "a machine's setting, not a parameter of the experiment"
    assert "threads" not in config_cls.param_names()
    assert parse_threads(config_cls(threads="3").threads) == 3


@pytest.mark.parametrize("value", ["0", "-1", "x", "2.5", "1025", ""])
def test_a_bad_thread_count_is_a_one_line_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["knn-eval", "--threads", value])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--threads must be auto or a whole number from 1 to 1024" in error


def test_each_stage_runs_with_the_threads_it_is_given(
    prepared_digits: Callable[[float], Path], tmp_path: Path, restored_threads: None
) -> None:
    data = str(prepared_digits(0.5))
    model, embeddings = tmp_path / "models", tmp_path / "embeddings.safetensors"
    runs = [
        lambda threads: pretrain.run(
            PretrainConfig(
                data=data, out=str(model), live_dir=str(tmp_path / "live"), arch="small_cnn", max_steps=1, device="cpu", threads=threads
            )
        ),
        lambda threads: embed.run(
            EmbedConfig(data=data, model=str(model / "encoder.safetensors"), out=str(embeddings), device="cpu", threads=threads)
        ),
        lambda threads: knn_eval.run(
            KnnConfig(embeddings=str(embeddings), out=str(tmp_path / "knn.json"), k=5, device="cpu", threads=threads)
        ),
        lambda threads: linear_eval.run(
            LinearConfig(embeddings=str(embeddings), out=str(tmp_path / "linear.json"), epochs=2, device="cpu", threads=threads)
        ),
    ]
    for run in runs:
        torch.set_num_threads(2)
        run("1")
        assert torch.get_num_threads() == 1
