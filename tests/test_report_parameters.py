"""The report's parameter table lists what the run read: the options of its data's modality, its sampler, its dataset
and its linear protocol, derived from the declarations (``Option.modality``, the registry's users, ``Option.read_when``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from hcl_cli.config import STAGE_CONFIGS, LinearConfig, PretrainConfig
from hcl_cli.report.escaping import code
from hcl_cli.report.inputs import Recorded
from hcl_cli.report.parameters import NOTE, parameter_section


def listed(params_file: Path, recorded: dict[str, Recorded], modality: str | None) -> dict[str, set[str]]:
    """The parameters the table lists, by group."""
    rows = re.findall(r"^\| (\w+) \| (\w+) \|", parameter_section(params_file, recorded, modality), flags=re.MULTILINE)
    groups: dict[str, set[str]] = {}
    for group, name in rows[1:]:  # the first is the header
        groups.setdefault(group, set()).add(name)
    return groups


@pytest.fixture
def defaults(tmp_path: Path) -> Path:
    """The default params.yaml, and a group of another tool's."""
    path = tmp_path / "params.yaml"
    groups = {config_cls.group: config_cls().params() for config_cls in STAGE_CONFIGS}
    path.write_text(yaml.safe_dump({**groups, "mytool": {"gin_layers": 1}}, sort_keys=False))
    return path


def test_an_image_run_lists_no_graph_option_and_a_graph_run_no_image_option(defaults: Path) -> None:
    pretrain = {"pretrain": Recorded(PretrainConfig(sampler="hucl").params(), code("encoder.json"))}
    image, graph = listed(defaults, pretrain, "image")["pretrain"], listed(defaults, pretrain, "graph")["pretrain"]
    assert not image & {"gin_layers", "gin_hidden", "graph_weights"} and {"projection_dim", "blur", "beta"} <= image
    assert not graph & {"projection_dim", "blur"} and {"gin_layers", "gin_hidden", "graph_weights", "beta"} <= graph
    assert {"gin_layers", "projection_dim"} <= listed(defaults, pretrain, None)["pretrain"], "no modality known: every one"
    assert NOTE in parameter_section(defaults, pretrain, "image")


def test_the_sampler_options_listed_are_those_the_sampler_reads(defaults: Path) -> None:
    ucl = listed(defaults, {"pretrain": Recorded(PretrainConfig(sampler="ucl").params(), "sidecar")}, "image")["pretrain"]
    assert ucl == set(PretrainConfig(sampler="ucl").used_params("image"))
    assert "temperature" in ucl and not ucl & {"beta", "tau_plus", "ot_epsilon"}


@pytest.mark.parametrize(
    ("protocol", "read", "unread"),
    [
        ("fixed", {"optimizer", "lr", "epochs", "weight_decay", "seed", "feature"}, {"svm_folds", "svm_c_grid", "batch_size"}),
        ("paper", {"optimizer", "lr", "epochs", "weight_decay", "batch_size"}, {"svm_folds", "svm_repeats"}),
        ("svm", {"svm_folds", "svm_repeats", "svm_c_grid", "svm_inner_folds", "seed"}, {"optimizer", "lr", "epochs", "batch_size"}),
    ],
)
def test_a_linear_readout_lists_the_options_of_its_protocol(defaults: Path, protocol: str, read: set[str], unread: set[str]) -> None:
    values = LinearConfig(protocol=protocol, optimizer="adam" if protocol == "paper" else "lbfgs").params()
    linear = listed(defaults, {"linear": Recorded(values, "linear.json")}, None)["linear"]
    assert read <= linear and not unread & linear


def test_the_prepare_options_listed_are_those_its_dataset_reads(defaults: Path) -> None:
    digits = listed(defaults, {}, "image")["prepare"]
    assert {"test_fraction", "seed", "image_size"} <= digits and not digits & {"path", "name"}
    tu = listed(defaults, {"prepare": Recorded({"dataset": "tu", "name": "PTC_MR"}, "card.json")}, "graph")["prepare"]
    assert {"name", "path", "test_fraction", "seed"} <= tu and "image_size" not in tu
    cifar = listed(defaults, {"prepare": Recorded({"dataset": "cifar10"}, "card.json")}, "image")["prepare"]
    assert "path" in cifar and not cifar & {"test_fraction", "seed", "name"}, "cifar10 ships its own split"


def test_a_group_no_stage_declares_is_listed_whole_and_no_note_without_a_left_out_parameter(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"mytool": {"gin_layers": 1, "anything": "x"}}))
    assert listed(path, {}, "image") == {"mytool": {"gin_layers", "anything"}}
    assert NOTE not in parameter_section(path, {}, "image")


@pytest.mark.parametrize("config_cls", STAGE_CONFIGS, ids=lambda cls: cls.command)
def test_every_read_when_names_a_parameter_of_its_stage_and_values_it_takes(config_cls: type) -> None:
    options = {option.name: option for option in config_cls.declared_options() if not option.runtime}
    for option in options.values():
        if option.read_when is not None:
            name, values = option.read_when
            assert name in options, f"{option.name}: read_when names {name!r}, no parameter of hcl {config_cls.command}"
            assert set(values) <= set(options[name].choices or ()), f"{option.name}: {values} are not all values of {name}"
