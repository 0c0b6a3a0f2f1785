"""``hcl prepare``: decode a dataset once into uint8 tensors, labels and a dataset card.

The output folder holds ``train.safetensors``, ``test.safetensors`` (and ``unlabeled.safetensors``
for STL-10), each of kind ``dataset-split`` with its sidecar, ``card.json``, and the manifest
:data:`~hcl_cli.artifacts.OWNED_FILES` listing those files. The whole folder is built in a hidden
sibling and renamed into place at the end, so a failure or a kill never leaves a partial folder
where ``pretrain`` would read it. Only a folder hcl prepare wrote (its manifest lists every file
in it) or an empty one is replaced, and of the folder it replaces only the listed files are
deleted. The hidden siblings a killed run left behind are removed by the next run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch

from hcl_cli.artifacts import (
    check_outputs_apart,
    check_replaceable,
    folder_output,
    foreign_entries,
    library_versions,
    remove_owned_folder,
    save_artifact,
    stale_siblings,
    temp_sibling,
    write_owned_folder_manifest,
)
from hcl_cli.config.prepare import PrepareConfig
from hcl_cli.download import sha256_of
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.graph.data import build_dataset
from hcl_cli.graph.fetch import tu_source
from hcl_cli.graph.prepared import FOLDER_FILES, write_prepared_graphs
from hcl_cli.graph.tu import read_tu_files
from hcl_cli.image.card import CARD_FILE, SPLITS, DatasetCard, save_card
from hcl_cli.image.data import SourceDataset, load_source
from hcl_cli.image.prepared import SPLIT_KIND
from hcl_cli.interrupts import uninterrupted
from hcl_cli.logs import LOG
from hcl_cli.text.corpus import read_corpus
from hcl_cli.text.prepared import FOLDER_FILES as TEXT_FILES
from hcl_cli.text.prepared import load_text_card, write_prepared_corpus
from hcl_cli.text.senteval import read_task, task_files
from hcl_cli.text.senteval_fetch import senteval_source
from hcl_cli.text.tasks import TASK_FILES, write_prepared_task

STATISTICS_VALUES = 2**24
"""Pixel values converted to float64 at a time for the channel statistics: 128 MiB a block, whatever the image size
(within :data:`~hcl_cli.image.data.PREPARE_HEADROOM`)."""


def run(config: PrepareConfig) -> None:
    """Decode ``config.dataset`` and write the prepared folder ``config.out``."""
    for warning in config.unread_changes():
        LOG.warning(f"hcl prepare: warning: {warning}")
    out = Path(config.out)
    check_outputs_apart({"--path": config.path} if config.dataset != "digits" else {}, {"--out": out})
    _check_replaceable(out)
    if config.dataset in PREPARERS:
        PREPARERS[config.dataset](config, out)
        return
    phase(f"reading {config.dataset}" + (f" from {shown(config.path)}" if config.dataset != "digits" else ""))
    dataset = load_source(config)
    phase(f"writing {shown(out)}")
    card = dataset_card(config, dataset)
    versions = library_versions()
    with _staging_folder(out, folder_files(dataset.splits)) as staging:
        for split, (images, labels) in dataset.splits.items():
            meta = {"dataset": card.name, "split": split, "versions": versions}
            save_artifact(staging / f"{split}.safetensors", {"images": images, "labels": labels}, kind=SPLIT_KIND, meta=meta)
        save_card(staging, card)
    counts = ", ".join(f"{split} {count}" for split, count in card.counts.items())
    shape = "x".join(str(size) for size in card.image_shape)
    LOG.info(f"hcl prepare: wrote {shown(out)}: {card.name}, {counts} images of {shape}, {card.num_classes} classes")


def prepare_graphs(config: PrepareConfig, out: Path) -> None:
    """Read the TU dataset ``config.name`` from ``config.path`` (fetched into it first where it is a folder without it:
    :func:`~hcl_cli.graph.fetch.tu_source`) and write the prepared graph folder
    (:func:`hcl_cli.graph.prepared.write_prepared_graphs`: the graphs, a stratified split, the card), under the same rules."""
    source = tu_source(Path(config.path), config.name)
    phase(f"reading {shown(config.name)} from {shown(source)}")
    graphs = read_tu_files(source, config.name)
    for note in graphs.notes:
        LOG.warning(f"hcl prepare: warning: {note}")
    phase(f"writing {shown(out)}")
    dataset, card = build_dataset(graphs)
    with _staging_folder(out, list(FOLDER_FILES)) as staging:
        card = write_prepared_graphs(staging, dataset, card, config.test_fraction, config.seed)
    counts = ", ".join(f"{split} {count}" for split, count in (card.counts or {}).items())
    LOG.info(
        f"hcl prepare: wrote {shown(out)}: {shown(card.name)}, {counts} graphs of {card.avg_nodes:.1f} nodes on average, "
        f"{card.feature_dim} node features ({card.features}), {card.num_classes} classes"
    )


def prepare_text(config: PrepareConfig, out: Path) -> None:
    """Read the text corpus in ``config.path`` (:func:`~hcl_cli.text.corpus.read_corpus`) and write the prepared text folder
    (:func:`~hcl_cli.text.prepared.write_prepared_corpus`: token ids, documents, the vocabulary, the card), under the same rules."""
    phase(f"reading the text corpus in {shown(config.path)}")
    files = read_corpus(Path(config.path))
    for file in files:
        if file.encoding != "utf-8":
            LOG.info(f"hcl prepare: note: {shown(file.name)} is not UTF-8: read as {file.encoding}")
    phase(f"writing {shown(out)}")
    with _staging_folder(out, list(TEXT_FILES)) as staging:
        card = write_prepared_corpus(staging, files, str(config.path), config.vocab_size, config.min_count, config.max_tokens)
    LOG.info(
        f"hcl prepare: wrote {shown(out)}: {card.counts['train']} sentences in {card.documents} documents, {card.tokens} tokens, "
        f"a vocabulary of {card.vocab_size} ({card.unknown_share:.1%} of tokens unknown), {card.truncated} sentences cut at {card.max_tokens} tokens"
    )


def prepare_senteval(config: PrepareConfig, out: Path) -> None:
    """Read SentEval's ``config.task`` from ``config.path`` (fetched into it first where it holds none of the task's files:
    :func:`~hcl_cli.text.senteval_fetch.senteval_source`) and write it under ``config.corpus``'s vocabulary
    (:func:`~hcl_cli.text.tasks.write_prepared_task`), under the same rules."""
    check_outputs_apart({"--corpus": config.corpus}, {"--out": out})
    load_text_card(config.corpus)  # a one-line error before reading the task where --corpus is no prepared corpus
    source = senteval_source(Path(config.path), config.task)
    phase(f"reading SentEval's {config.task} from {shown(source)}")
    task = read_task(source, config.task)
    files = {name: sha256_of(source / name) for name in task_files(config.task)}
    phase(f"writing {shown(out)}")
    with _staging_folder(out, list(TASK_FILES)) as staging:
        card = write_prepared_task(staging, task, files, str(source), Path(config.corpus))
    LOG.info(
        f"hcl prepare: wrote {shown(out)}: SentEval's {card.task}, train {card.counts['train']} and test {card.counts['test']} sentences, "
        f"{len(card.classes)} classes, under {shown(config.corpus)}'s vocabulary ({card.unknown_share:.1%} of tokens unknown)"
    )


PREPARERS: dict[str, Callable[[PrepareConfig, Path], None]] = {"tu": prepare_graphs, "text": prepare_text, "senteval": prepare_senteval}
"""The datasets whose prepare writes another modality's folder than images', by ``--dataset``."""


def phase(text: str) -> None:
    """A status line (:mod:`hcl_cli.logs`) as prepare starts a step that may take seconds (reading an archive, writing the
    splits), as pretrain's start-up line. The loops within a step show their own progress (:func:`hcl_cli.progress.progress`)."""
    LOG.info(f"hcl prepare: {text}")


def dataset_card(config: PrepareConfig, dataset: SourceDataset) -> DatasetCard:
    """The card that describes the prepared folder; mean and std are those of the train split."""
    train_images = dataset.splits["train"][0]
    mean, std = channel_mean_std(train_images)
    return DatasetCard(
        name=config.dataset,
        classes=dataset.classes,
        num_classes=len(dataset.classes),
        counts={split: len(images) for split, (images, _) in dataset.splits.items()},
        image_shape=list(train_images.shape[1:]),
        mean=mean,
        std=std,
        source=dataset.source,
        seed=config.seed,
        skipped=dataset.skipped,
    )


def channel_mean_std(images: torch.Tensor) -> tuple[list[float], list[float]]:
    """Per-channel mean and (population) standard deviation of uint8 (N, C, H, W) images, in 0..1."""
    total = torch.zeros(images.shape[1], dtype=torch.float64)
    total_squares = torch.zeros_like(total)
    chunk = max(1, STATISTICS_VALUES // images[0].numel()) if len(images) else 1
    for start in range(0, len(images), chunk):
        block = images[start : start + chunk].to(torch.float64).div_(255.0)
        total += block.sum(dim=(0, 2, 3))
        total_squares += block.square().sum(dim=(0, 2, 3))
    count = images.shape[0] * images.shape[2] * images.shape[3]
    mean = total / count
    std = (total_squares / count - mean.square()).clamp_min(0.0).sqrt()
    return mean.tolist(), std.tolist()


def folder_files(splits: Iterable[str]) -> list[str]:
    """The files of a prepared folder holding ``splits``: each split's tensors and sidecar, and the card."""
    return [CARD_FILE, *(name for split in splits for name in (f"{split}.safetensors", f"{split}.json"))]


def _check_replaceable(out: Path) -> None:
    """Refuse, before any work, to replace anything but an empty folder or one hcl prepare wrote whole: the one ownership
    rule (:func:`~hcl_cli.artifacts.check_replaceable`), a folder being hcl's when its manifest lists every entry."""
    if out.name in ("", ".."):
        raise UsageError(f"--out {out} must name the prepared dataset folder itself, not . or ..")
    check_replaceable("--out", out, PREPARED_OUTPUT)


def _unlisted_entries(folder: Path) -> list[str]:
    """The entries of ``folder`` that its manifest does not list (all of them when it has none)."""
    foreign = foreign_entries(folder)
    return sorted(os.listdir(folder)) if foreign is None else foreign


PREPARED_OUTPUT = folder_output("prepared dataset", _unlisted_entries)


@contextlib.contextmanager
def _staging_folder(out: Path, files: list[str]) -> Iterator[Path]:
    """Yield a hidden sibling of ``out`` to fill with ``files``; on success it replaces ``out``, on failure it is removed.

    The siblings that killed runs left (a half-filled staging folder, the previous dataset moved
    aside) are removed first, each only of the files hcl wrote in it.
    """
    _remove_leftovers(out)
    staging = temp_sibling(out, "staging")
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
        except OSError as exc:
            raise HclError(f"cannot write {out}: {exc.strerror or exc}") from exc
        write_owned_folder_manifest(staging, files)
        yield staging
        _check_replaceable(out)
        with uninterrupted():  # a Ctrl-C waits: the old dataset is never left moved aside
            _replace_folder(staging, out)
    finally:
        if staging.exists():
            remove_owned_folder(staging)


def _remove_leftovers(out: Path) -> None:
    """Remove the staging folders and retired datasets that killed runs left beside ``out``."""
    for leftover in stale_siblings(out, "staging") + stale_siblings(out, "old"):
        if leftover.is_dir() and not leftover.is_symlink() and not remove_owned_folder(leftover, fallback=folder_files(SPLITS)):
            LOG.warning(f"hcl prepare: warning: kept {leftover}, left by an interrupted run: it holds files hcl did not write")


def _replace_folder(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``; an existing ``out`` is moved aside first (and put back if that fails), then its
    files are deleted.

    Only the files ``out``'s manifest lists are replaced: an entry it does not list (a file the user
    put there while prepare ran, after the check at the start) is moved into ``staging`` first, so it
    stays in ``out`` under its own name; one whose name the new dataset uses stops the run instead,
    with ``out`` as it was.
    """
    retired = temp_sibling(out, "old")
    carried: list[str] = []
    try:
        if out.exists():
            os.rename(out, retired)
            try:
                _carry_foreign_entries(retired, staging, out, carried)
                os.rename(staging, out)
            except BaseException:
                for name in carried:
                    os.rename(staging / name, retired / name)
                os.rename(retired, out)
                raise
        else:
            os.rename(staging, out)
    except OSError as exc:
        raise HclError(f"cannot replace {out}: {exc.strerror or exc}") from exc
    if carried:
        listed = ", ".join(shown(name) for name in carried)
        LOG.info(f"hcl prepare: note: kept {listed} in {shown(out)} (not written by hcl: move it away before the next prepare)")
    if retired.exists() and not remove_owned_folder(retired):
        LOG.warning(f"hcl prepare: warning: kept {shown(retired)}, the previous {shown(out)}: it holds files hcl did not write")


def _carry_foreign_entries(retired: Path, staging: Path, out: Path, carried: list[str]) -> None:
    """Move the entries of ``retired`` (the previous ``out``) that its manifest does not list into ``staging``, adding
    each one's name to ``carried`` as it goes (so that a failure can move them back)."""
    foreign = foreign_entries(retired)
    if foreign is None:  # an empty folder without a manifest when prepare checked it
        foreign = sorted(os.listdir(retired))
    clash = [name for name in foreign if os.path.lexists(staging / name)]
    if clash:
        raise HclError(
            f"--out {shown(out)} holds files that hcl prepare did not write ({', '.join(map(shown, clash))}): move them away or give another folder"
        )
    for name in foreign:
        os.rename(retired / name, staging / name)
        carried.append(name)
