"""One source of truth: the CLI, params.yaml, dvc.yaml and validation all derive from the declared options."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from docs_pages import page

from hcl_cli.cli import main
from hcl_cli.config import STAGE_CONFIGS, PretrainConfig
from hcl_cli.errors import UsageError
from hcl_cli.objectives.registry import SAMPLERS, entry_point, sampler_options, users_of
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.option import Option
from hcl_cli.params import default_params_yaml, sampler_options_markdown, stage_params

ROOT = Path(__file__).resolve().parents[1]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())
REGISTRY_SOURCE = (ROOT / "hcl_cli" / "objectives" / "registry.py").read_text()
CLOSURE = """
import ast, importlib, json, os, sys, traceback
from pathlib import Path

import torch  # imported once, before the forks below: each closure is of the package's files alone, whatever else is loaded

def imports_in(path):
    # every hcl_cli module an import statement of the file names, in a function too (it runs when the stage
    # runs), but not under `if TYPE_CHECKING:` (a type only)
    tree = ast.parse(Path(path).read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
                   for statement in node.body for n in ast.walk(statement)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)

def closure(stage, package):
    importlib.import_module(f"hcl_cli.stages.{stage}")
    while True:
        loaded = set(sys.modules)
        if "hcl_cli.objectives.loss" in sys.modules:  # a stage that computes the loss may load any sampler
            from hcl_cli.objectives.registry import SAMPLERS
            for spec in SAMPLERS.values():
                spec.load()
        if "hcl_cli.modality" in sys.modules:  # a stage that reads prepared data may load any modality
            from hcl_cli.modality import MODALITIES, modality_named
            for name in MODALITIES:
                modality_named(name)
        for module in [m for name, m in list(sys.modules.items()) if name.startswith("hcl_cli.")]:
            for name in imports_in(module.__file__):
                if name.startswith("hcl_cli."):
                    try:
                        importlib.import_module(name)
                    except ModuleNotFoundError:  # `from hcl_cli.module import function`: not a module
                        pass
        if set(sys.modules) == loaded:
            break
    files = {Path(m.__file__).resolve() for m in list(sys.modules.values()) if getattr(m, "__file__", None)}
    return sorted(str(f.relative_to(package.parent)) for f in files if f.is_relative_to(package))


package, closures = Path(sys.argv[1]).resolve(), {}
for stage in sys.argv[2:]:  # each in a fork of this process, which holds no module of the package
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            with os.fdopen(write, "w") as out:
                json.dump(closure(stage, package), out)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    if os.waitpid(child, 0)[1] != 0:
        sys.exit(f"the import closure of {stage} failed")
    closures[stage] = json.loads(text)
print(json.dumps(closures))
"""


STAGE_MODULES = tuple(config_cls.command.replace("-", "_") for config_cls in STAGE_CONFIGS)
"""The module of each stage under hcl_cli/stages/."""


def run_hcl(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m hcl_cli ARGS`` in a fresh process."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run([sys.executable, "-m", "hcl_cli", *args], cwd=cwd, env=environment, capture_output=True, text=True, check=False)


def imported_files(module: str, package: Path = ROOT / "hcl_cli", cwd: Path = ROOT) -> set[str]:
    """The files of ``package`` that a stage computes with: the import closure of ``hcl_cli/stages/<module>.py``, the
    samplers and modalities it may load, and ``params.py``, which reads the values the stage runs with from params.yaml
    (a change there can change a result). Not the rest of the command line's front end (``cli.py``, the other stages'
    declarations that ``params.py`` imports to write the whole file): a stage receives its checked configuration, so
    editing a help text there reruns nothing."""
    return set(stage_closures(STAGE_MODULES, package, cwd)[module]) | {f"{package.name}/params.py"}


@functools.cache
def stage_closures(modules: tuple[str, ...], package: Path, cwd: Path) -> dict[str, list[str]]:
    """The import closure of each stage module (:data:`CLOSURE`), computed once: one interpreter, each stage in a fork of it."""
    result = subprocess.run([sys.executable, "-c", CLOSURE, str(package), *modules], cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def declared_code_deps(stage: str) -> set[str]:
    """The stage's dvc.yaml deps inside hcl_cli/, folders expanded to their Python files."""
    files = set()
    for dep in DVC["stages"][stage]["deps"]:
        path = ROOT / dep
        if dep.startswith("hcl_cli"):
            files |= {p.relative_to(ROOT).as_posix() for p in path.rglob("*.py")} if path.is_dir() else {dep}
    return files


def test_params_yaml_is_what_hcl_params_writes() -> None:
    assert (ROOT / "params.yaml").read_text() == default_params_yaml()


def test_the_docs_option_table_is_what_hcl_params_table_writes() -> None:
    assert sampler_options_markdown() in page("samplers")


def test_the_docs_preset_table_is_what_hcl_preset_table_writes() -> None:
    assert run_hcl(["preset", "--table"], ROOT).stdout in page("presets")


@pytest.mark.parametrize("config_cls", STAGE_CONFIGS, ids=lambda cls: cls.command)
def test_each_dvc_stage_reads_its_own_group_and_pastes_no_parameter_into_its_command(config_cls: type) -> None:
    stage = DVC["stages"][config_cls.command]
    assert "${" not in stage["cmd"]
    assert stage["cmd"].startswith(f"hcl {config_cls.command} --params params.yaml ")
    assert stage["params"] == [config_cls.group], "a stage lists only its own parameters"


@pytest.mark.parametrize("config_cls", STAGE_CONFIGS, ids=lambda cls: cls.command)
def test_dvc_deps_are_exactly_the_files_the_stage_imports(config_cls: type) -> None:
    module = config_cls.command.replace("-", "_")
    imported = imported_files(module)
    assert declared_code_deps(config_cls.command) == imported, "dvc.yaml's deps of this stage should be:\n" + "\n".join(
        f"      - {name}" for name in sorted(imported)
    )


@pytest.mark.parametrize("config_cls", STAGE_CONFIGS, ids=lambda cls: cls.command)
def test_help_lists_every_declared_option(config_cls: type, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([config_cls.command, "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option in config_cls.declared_options():
        assert option.flag in text


def test_pretrain_help_names_the_samplers_that_read_each_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["pretrain", "--help"])
    text = re.sub(r"[\s│]+", " ", capsys.readouterr().out)
    assert "(used by debiased, hucl, ot)" in text  # tau_plus
    assert users_of("tau_plus") == ("debiased", "hucl", "ot")
    assert "(used by all samplers)" in text  # temperature


def test_help_does_not_import_torch() -> None:
    code = "import sys\nfrom hcl_cli.cli import main\ntry:\n    main(['pretrain', '--help'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules, file=sys.stderr)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pretrain", "--sampler", "nope"], "--sampler must be one of"),
        (["pretrain", "--beta", "-1"], "--beta must be >= 0.0"),
        (["pretrain", "--tau-plus", "1"], "--tau-plus must be < 1.0"),
        (["pretrain", "--clip", "maybe"], "--clip must be true or false"),
        (["pretrain", "--undimix-weights", "1,x,1"], "--undimix-weights must be three"),
        (["pretrain", "--seed", str(2**32)], "--seed must be <= 4294967295"),
        (["pretrain", "--weight-decay", "1e308"], "--weight-decay must be <= 1.0"),
        (["prepare", "--dataset", "mnist"], "--dataset must be one of"),
        (["knn-eval", "--k", "abc"], "--k"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"pretrain:\n  betta: 2\n", "pretrain.betta is not a parameter of hcl pretrain (did you mean 'beta'?)"),
        (b"pretrain:\n  sampler: 'hucl; echo hi > x; true'\n", "pretrain.sampler must be one of"),
        (b"pretrain:\n  epochs: two\n", "pretrain.epochs must be a whole number"),
        (b"pretrain:\n  clip: 'yes please'\n", "pretrain.clip must be true or false"),
        (b"pretrain: [1, 2]\n", "pretrain must be a mapping"),
        (b"\xff\xfe pretrain:\n", "cannot read"),
        (b"pretrain: {beta: [\n", "cannot read"),
    ],
)
def test_bad_params_files_are_one_line_usage_errors(tmp_path: Path, content: bytes, message: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_bytes(content)
    with pytest.raises(UsageError, match=re.escape(message)) as error:
        stage_params(params, PretrainConfig)
    assert "\n" not in str(error.value)


def test_options_on_the_command_line_win_over_the_params_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "params.yaml").write_text("pretrain:\n  sampler: hscl\n  beta: 2.5\n  epochs: 3\nother_tool: {x: 1}\n")
    seen: list[PretrainConfig] = []
    monkeypatch.setitem(__import__("hcl_cli.cli").cli.STAGE_RUNNERS, PretrainConfig, seen.append)
    with pytest.raises(SystemExit) as exit_info:
        main(["pretrain", "--params", str(tmp_path / "params.yaml"), "--beta", "0.5"])
    assert exit_info.value.code == 0
    (config,) = seen
    assert (config.sampler, config.sampler_options["beta"], config.epochs, config.lr) == ("hscl", 0.5, 3, PretrainConfig().lr)


def test_a_title_with_shell_syntax_and_quotes_reaches_the_stage_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    title = """x $(touch PWNED) "quoted" `y` ; z"""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"report": {"title": title}}))
    seen: list[object] = []
    from hcl_cli import cli
    from hcl_cli.config import ReportConfig

    monkeypatch.setitem(cli.STAGE_RUNNERS, ReportConfig, seen.append)
    with pytest.raises(SystemExit):
        main(["report", "--params", str(tmp_path / "params.yaml")])
    assert seen[0].title == title  # type: ignore[attr-defined]


def test_loss_options_follow_the_samplers_schedule() -> None:
    config = PretrainConfig(sampler="hscl-threshold", threshold_start=-0.5, threshold_end=0.5, epochs=3)
    assert [config.loss_options(epoch)["threshold"] for epoch in range(3)] == [-0.5, 0.0, 0.5]
    assert "beta" not in config.loss_options(0), "a sampler gets only the options it reads"
    assert set(PretrainConfig(sampler="ucl").used_params()) >= {"temperature", "epochs"}
    assert "beta" not in PretrainConfig(sampler="ucl").used_params()


def readme_block(first_line: str) -> str:
    """The Python code block of the docs' samplers page whose first line is ``first_line``."""
    blocks = re.findall(r"```python\n(.*?)```", page("samplers"), flags=re.DOTALL)
    (block,) = [block for block in blocks if block.startswith(first_line)]
    return block


@pytest.fixture(scope="module")
def toy_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with the README's worked example added: one new module, lines appended to the registry."""
    root = tmp_path_factory.mktemp("toy")
    shutil.copytree(ROOT / "hcl_cli", root / "hcl_cli", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "hcl_cli" / "objectives" / "topk.py").write_text(readme_block("# hcl_cli/objectives/topk.py"))
    with open(root / "hcl_cli" / "objectives" / "registry.py", "a", encoding="utf-8") as registry:
        registry.write("\n" + readme_block("# added to hcl_cli/objectives/registry.py"))
    return root


@pytest.mark.slow
def test_a_new_sampler_from_the_readme_appears_everywhere_with_no_other_edit(
    toy_package: Path, prepared_digits: Callable[[float], Path], tmp_path: Path
) -> None:
    example = readme_block("# hcl_cli/objectives/topk.py")
    assert len(example.splitlines()) + len(readme_block("# added to hcl_cli/objectives/registry.py").splitlines()) < 30
    env = {"PYTHONPATH": str(toy_package)}

    help_text = " ".join(run_hcl(["pretrain", "--help"], tmp_path, **env).stdout.split())
    assert "--topk-count" in help_text and "topk" in help_text
    assert "topk_count: 16" in run_hcl(["params"], tmp_path, **env).stdout

    (tmp_path / "params.yaml").write_text("pretrain:\n  sampler: topk\n  topk_count: 0\n")
    rejected = run_hcl(["pretrain", "--params", "params.yaml"], tmp_path, **env)
    assert rejected.returncode == 2 and "pretrain.topk_count must be >= 1" in rejected.stderr

    digits = prepared_digits(0.95)
    (tmp_path / "params.yaml").write_text("pretrain:\n  sampler: topk\n  topk_count: 8\n  epochs: 1\n  batch_size: 16\n")
    trained = run_hcl(
        ["pretrain", "--params", "params.yaml", "--data", str(digits), "--out", "models", "--live-dir", "live", "--device", "cpu"],
        tmp_path,
        **env,
    )
    assert trained.returncode == 0, trained.stderr
    assert (tmp_path / "models" / "encoder.safetensors").is_file()
    assert "hcl_cli/objectives/topk.py" in imported_files("pretrain", toy_package / "hcl_cli", toy_package)
    assert "hcl_cli/objectives" in DVC["stages"]["pretrain"]["deps"], "dvc.yaml's pretrain deps cover the new module as they are"


# Check once: the configuration is checked at the stage's entry, and nothing below it checks again.


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every call of the validators (``Option.check``, ``SamplerOptions.resolve``) from now on."""
    calls: list[str] = []
    check, resolve = Option.check, SamplerOptions.resolve.__func__  # type: ignore[attr-defined]

    def counting_check(self: Option, value: Any, *, where: str | None = None) -> Any:
        calls.append(f"check {self.name}")
        return check(self, value, where=where)

    def counting_resolve(cls: type[SamplerOptions], sampler: Any, given: Any) -> SamplerOptions:
        calls.append("resolve")
        return resolve(cls, sampler, given)

    monkeypatch.setattr(Option, "check", counting_check)
    monkeypatch.setattr(SamplerOptions, "resolve", classmethod(counting_resolve))
    return calls


@pytest.mark.parametrize("sampler", ["hucl", "hscl-threshold", "ot", "undimix"])
def test_training_steps_check_no_option(
    sampler: str, prepared_digits: Callable[[float], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    """The step takes the epoch's options resolved once (``loss_options``) and the loss checks nothing:
    no validator runs in three steps and the epochs' options (the public loss would resolve per call)."""
    import torch

    from hcl_cli.distributed import DistributedContext
    from hcl_cli.image.card import load_card
    from hcl_cli.image.prepared import load_split
    from hcl_cli.image.step import build_training

    data = prepared_digits(0.9)
    extra = {"undimix_learned": True} if sampler == "undimix" else {}
    config = PretrainConfig(sampler=sampler, epochs=3, batch_size=16, anneal="paper", data=str(data), out=str(tmp_path), **extra)
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    context.seed_everything(0)
    _, step = build_training(config, load_card(data), context)
    images, labels = load_split(data, "train")
    calls = counted(monkeypatch)
    for epoch in range(3):
        options = config.loss_options(epoch)
        assert step(images[16 * epoch : 16 * epoch + 16], labels[16 * epoch : 16 * epoch + 16], options).finite
    assert calls == []


def test_the_public_loss_checks_its_options_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from hcl_cli.objectives import contrastive_loss

    calls = counted(monkeypatch)
    z1, z2 = torch.randn(8, 4), torch.randn(8, 4)
    contrastive_loss(z1, z2, sampler="hucl", beta=2.0)
    assert calls.count("resolve") == 1 and calls.count("check beta") == 1
    with pytest.raises(UsageError, match="--beta must be <= 1000.0"):
        contrastive_loss(z1, z2, sampler="hucl", beta=1e4)


def test_a_params_file_value_is_checked_once_and_named_by_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "params.yaml").write_text("pretrain:\n  beta: 2.5\n  epochs: 3\n")
    seen: list[PretrainConfig] = []
    monkeypatch.setitem(__import__("hcl_cli.cli").cli.STAGE_RUNNERS, PretrainConfig, seen.append)
    calls = counted(monkeypatch)
    with pytest.raises(SystemExit):
        main(["pretrain", "--params", str(tmp_path / "params.yaml")])
    assert seen and calls.count("check beta") == 1 and calls.count("check epochs") == 1
    (tmp_path / "params.yaml").write_text("pretrain:\n  beta: -1\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["pretrain", "--params", str(tmp_path / "params.yaml")])
    assert exit_info.value.code == 2
    assert f"{tmp_path / 'params.yaml'}: pretrain.beta must be >= 0.0 (got -1.0)" in capsys.readouterr().err


def test_a_stage_configuration_is_frozen() -> None:
    config = PretrainConfig(sampler="hucl")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        config.loss_options(0).beta = 3.0  # type: ignore[misc]


# Follow a sampler by reading imports: every entry point resolves to what it claims.


def read_options(module: Any) -> set[str]:
    """The names a module reads from its ``options`` argument: ``options.x``, ``options["x"]``, ``options.get("x")``."""
    names = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "options" and node.attr != "get":
            names.add(node.attr)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "options":
            names.add(ast.literal_eval(node.slice))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "options.get":
            names.add(ast.literal_eval(node.args[0]))
    return names


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_every_sampler_entry_point_is_a_function_of_a_batch_and_its_options(name: str) -> None:
    from hcl_cli.objectives.core import NegativeWeights, PairBatch
    from hcl_cli.objectives.registry import RUNTIME_INPUTS
    from hcl_cli.objectives.sampler_options import scheduled_names

    spec = SAMPLERS[name]
    function = spec.load()
    module = sys.modules[function.__module__]
    (line,) = [line for line in REGISTRY_SOURCE.splitlines() if f'"{spec.weights}"' in line]
    assert line.endswith(f"# {Path(module.__file__).relative_to(ROOT).as_posix()}"), "each entry names its function's file"
    hints = typing.get_type_hints(function)
    batch, options = inspect.signature(function).parameters
    assert issubclass(PairBatch, hints[batch]) and hints[options] is SamplerOptions and hints["return"] is NegativeWeights
    declared = {option.name for option in sampler_options()} | scheduled_names() | RUNTIME_INPUTS.keys()
    assert read_options(module) <= declared, f"{module.__name__} reads undeclared options {sorted(read_options(module) - declared)}"
    for entry in (spec.key_features, spec.learned):
        if entry is not None:
            assert callable(entry_point(entry))


# Every number has a range; a value outside it is refused, by the command line and by params.yaml.

NUMBERS = [
    (config_cls, option)
    for config_cls in STAGE_CONFIGS
    for option in config_cls.declared_options()
    if option.type in (int, float) and not option.runtime
]


@pytest.mark.parametrize(("config_cls", "option"), NUMBERS, ids=[f"{c.command}-{o.name}" for c, o in NUMBERS])
def test_every_number_declares_a_finite_range_holding_its_default(config_cls: type, option: Option) -> None:
    assert math.isfinite(option.minimum) and math.isfinite(option.maximum) and option.minimum < option.maximum
    assert option.check(option.default) == option.default
    with pytest.raises(ValueError, match="finite declared minimum and maximum"):
        dataclasses.replace(option, maximum=None)


def outside(option: Option) -> list[str]:
    """Values outside ``option``'s range as a user would type them: huge, 300 digits, and below it (subnormal for a positive minimum)."""
    if option.type is int:
        return [str(10**300), str(option.minimum - 1), str(option.maximum + 1)]
    below = "5e-324" if option.minimum > 0 else repr(option.minimum - (option.maximum - option.minimum))
    return ["1e308", below, str(10**300), str(10**400)]


@pytest.mark.parametrize(("config_cls", "option"), NUMBERS, ids=[f"{c.command}-{o.name}" for c, o in NUMBERS])
def test_a_number_outside_its_range_is_a_one_line_usage_error_naming_the_option_and_its_range(
    config_cls: type, option: Option, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[object] = []
    monkeypatch.setitem(__import__("hcl_cli.cli").cli.STAGE_RUNNERS, config_cls, ran.append)
    params = tmp_path / "params.yaml"
    for value in outside(option):
        params.write_text(f"{config_cls.group}:\n  {option.name}: {value}\n")
        for args, label in (([option.flag, value], option.flag), (["--params", str(params)], f"{config_cls.group}.{option.name}")):
            with pytest.raises(SystemExit) as exit_info:
                main([config_cls.command, *args])
            err = capsys.readouterr().err.strip()
            assert exit_info.value.code == 2 and len(err.splitlines()) == 1, (value, err)
            assert label in err and f"its range is {option.range}" in err and len(err) < 300, err
    assert ran == []


LOSS_BOUNDS = [
    (name, option)
    for option in sampler_options()
    if option.type is float
    for name in SAMPLERS
    if option.name in {o.name for o in SAMPLERS[name].options} or option.name == "temperature"
]


@pytest.mark.parametrize(("sampler", "option"), LOSS_BOUNDS, ids=[f"{s}-{o.name}" for s, o in LOSS_BOUNDS])
def test_every_float_sampler_option_at_its_bounds_gives_a_finite_loss_and_gradient(sampler: str, option: Option) -> None:
    """The declared ranges keep the loss meaningful: at either end it and its gradient are finite."""
    import torch

    from hcl_cli.objectives import contrastive_loss

    generator = torch.Generator().manual_seed(0)
    z1, z2 = (torch.randn(8, 16, generator=generator, requires_grad=True) for _ in range(2))
    labels, heads = torch.arange(8) % 3, (torch.randn(8, 32, generator=generator), torch.randn(8, 32, generator=generator))
    extra = {"ot_cost": "exp"} if option.name == "ot_kappa" else {}
    for bound in (option.minimum, option.maximum):
        value = math.nextafter(bound, 0.0) if (option.max_exclusive and bound == option.maximum) else bound
        loss = contrastive_loss(z1, z2, labels, sampler=sampler, head_inputs=heads, **{option.name: value}, **extra)
        (grad1, grad2) = torch.autograd.grad(loss, (z1, z2))
        assert torch.isfinite(loss) and torch.isfinite(grad1).all() and torch.isfinite(grad2).all(), (option.name, value)


def test_the_knn_probe_runs_knn_evals_defaults() -> None:
    from hcl_cli.config.knn import KnnConfig
    from hcl_cli.training.probes import KNN_PROBE_SETTINGS

    for modality, settings in KNN_PROBE_SETTINGS.items():
        assert settings == {name: getattr(KnnConfig().for_modality(modality), name) for name in settings}, modality
    assert KNN_PROBE_SETTINGS["graph"]["k"] < KNN_PROBE_SETTINGS["image"]["k"], "graphs have their own default"


# Help and standard output.


def test_help_keeps_brackets_and_lists_debug(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit):
        main(["pretrain", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # the help wraps at 80 columns whatever the terminal
    assert "E_q[z_i.z_j] - z_i.z_p" in text and "Range [0.001, 1000.0]" in text
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--debug" in capsys.readouterr().out


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["params"], ["params", "--table"], ["--help"], ["knn-eval", "--help"]])
def test_a_write_error_on_standard_output_exits_1_with_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "hcl_cli", *args], stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"hcl{' ' + args[0] if args[0] != '--help' else ''}: error: cannot write to standard output: No space left on device"
    ]
