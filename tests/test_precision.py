"""``--precision auto|fp32|bf16``: the rule auto follows, and what bf16 changes in the image training step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hcl_cli.cli import main
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.image.card import load_card
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import build_training
from hcl_cli.runtime import uses_bf16
from hcl_cli.stages import prepare

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("precision", "device", "bf16"),
    [
        ("auto", "cuda", True),
        ("auto", "cpu", False),
        ("bf16", "cpu", True),
        ("bf16", "cuda", True),
        ("fp32", "cuda", False),
        ("fp32", "cpu", False),
    ],
)
def test_auto_is_bf16_on_cuda_only_and_an_explicit_choice_wins(precision: str, device: str, bf16: bool) -> None:
    assert uses_bf16(precision, torch.device(device)) is bf16


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("precision") / "prepared"
    prepare.run(PrepareConfig(out=str(out), test_fraction=0.9))
    return out


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_bf16_runs_the_encoder_in_bfloat16_on_channels_last_and_the_loss_in_float32(digits: Path, precision: str) -> None:
    config = PretrainConfig(data=str(digits), arch="small_cnn", batch_size=16, precision=precision, device="cpu")
    context = DistributedContext(rank=0, world_size=1, local_rank=0, device=CPU)
    context.seed_everything(0)
    model, step = build_training(config, load_card(digits), context)
    conv = next(module for module in model.modules() if isinstance(module, torch.nn.Conv2d) and module.in_channels > 1)
    seen: list[torch.dtype] = []
    conv.register_forward_hook(lambda _module, _inputs, output: seen.append(output.dtype))
    images, labels = load_split(digits, "train", CPU)
    result = step(images[:16], labels[:16], config.loss_options(0))
    assert result.finite
    bf16 = precision == "bf16"
    assert step.bf16 is bf16
    assert seen == [torch.bfloat16 if bf16 else torch.float32]
    assert conv.weight.dtype == torch.float32  # autocast: the parameters and Adam's state stay float32
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) is bf16
    assert conv.weight.is_contiguous() is not bf16


def test_the_default_is_auto_and_another_value_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert PretrainConfig().precision == "auto"
    with pytest.raises(SystemExit) as exit_info:
        main(["pretrain", "--precision", "fp16"])
    assert exit_info.value.code == 2
    assert "fp16" in capsys.readouterr().err
