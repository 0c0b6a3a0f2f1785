"""Concurrency, locks, kills and signals: one run per folder, a clean stop with one line, nothing left behind."""

from __future__ import annotations

import signal

from .checks import all_of, checkpoints_whole, exists, nothing_left, report_whole, says
from .harness import CPU, EMBED, KNN, LINEAR, PREPARED, PRETRAIN, REPORT, Case
from .runs import interrupted, killed_then_resumed, signalled, then_again, two_at_once, while_locked

LONG_PRETRAIN = (*PRETRAIN[:-6], "--epochs", "30", "--out", "m", "--live-dir", "live")
"""A pretrain long enough to be stopped in the middle."""
STAGES = {
    "prepare": ("prepare", "--out", "p", "--image-size", "32"),
    "pretrain": LONG_PRETRAIN,
    "embed": EMBED,
    "knn-eval": KNN,
    "linear-eval": LINEAR,
    "report": REPORT,
}
"""A run of every stage, each writing beside the pipeline's files."""
STAGING = ".hcl.p.*.staging"
"""The hidden folder prepare fills before it renames it into place as ``p``."""


def stop_signals() -> list[Case]:
    """SIGTERM and SIGHUP, like Ctrl-C, stop every stage with one line and exit 128 + N, leaving nothing behind."""
    cases = []
    for signum in (signal.SIGTERM, signal.SIGHUP):
        name, code = signum.name, 128 + signum
        cases += [
            Case(f"{name} as {stage} starts", args, (code,), run=signalled(signum), check=nothing_left) for stage, args in STAGES.items()
        ]
        cases += [
            Case(
                f"{name} while prepare writes",
                STAGES["prepare"],
                (0, code),
                run=signalled(signum, when=STAGING),
                check=all_of(nothing_left, lambda w, r: None if r.returncode or (w / "p/card.json").exists() else "no card.json"),
            ),
            Case(f"{name} during embed, then embed again", EMBED, (0,), run=then_again(signalled(signum, extra=1.0)), check=nothing_left),
            Case(
                f"{name} during pretrain: a checkpoint and nothing else left",
                LONG_PRETRAIN,
                (code,),
                run=interrupted([signum], extra=1.0),
                check=all_of(says(f"stopped by {name}"), checkpoints_whole, nothing_left),
            ),
            Case(f"{name} during report", REPORT, (0, code), run=signalled(signum, extra=1.0), check=all_of(report_whole, nothing_left)),
            Case(f"{name} during knn-eval", KNN, (0, code), run=signalled(signum, extra=0.5), check=nothing_left),
        ]
    return cases


CASES_OF_ISSUE_32 = [
    *stop_signals(),
    Case(
        "SIGTERM twice at once during pretrain",
        LONG_PRETRAIN,
        (143,),
        run=interrupted([signal.SIGTERM, signal.SIGTERM], extra=1.0, gap=0.0),
        check=all_of(checkpoints_whole, nothing_left),
    ),
    Case("SIGHUP under nohup is ignored", KNN, (0,), run=signalled(signal.SIGHUP, nohup=True), check=exists("k.json")),
    Case(
        "SIGHUP under nohup during pretrain",
        PRETRAIN,
        (0,),
        run=signalled(signal.SIGHUP, nohup=True),
        check=exists("m/encoder.safetensors"),
    ),
]

CASES: list[Case] = [
    Case("pretrain while the folder is locked", PRETRAIN, (1,), run=while_locked, check=says("in use by another run")),
    Case("two pretrains into one folder", PRETRAIN, (1,), run=two_at_once, check=says("in use by another run")),
    Case(
        "kill -9 then --resume",
        ("pretrain", "--data", PREPARED, "--arch", "small_cnn", "--batch-size", "32", "--out", "m", "--live-dir", "live", *CPU),
        (0,),
        run=killed_then_resumed,
    ),
    Case("Ctrl-C during pretrain", LONG_PRETRAIN, (130,), run=interrupted([signal.SIGINT], extra=1.0), check=says("stopped by SIGINT")),
    Case("SIGTERM during pretrain", LONG_PRETRAIN, (143,), run=interrupted([signal.SIGTERM], extra=1.0)),
    Case(
        "Ctrl-C twice during pretrain",
        LONG_PRETRAIN,
        (130,),
        run=interrupted([signal.SIGINT, signal.SIGINT], extra=1.0),
        check=checkpoints_whole,
    ),
    Case("Ctrl-C during knn-eval startup", KNN, (0, 130), run=interrupted([signal.SIGINT], after_line="", extra=0.0)),
    Case(
        "Ctrl-C twice at once during pretrain",
        LONG_PRETRAIN,
        (130,),
        run=interrupted([signal.SIGINT, signal.SIGINT], extra=1.0, gap=0.0),
        check=checkpoints_whole,
    ),
    Case(
        "Ctrl-C three times during pretrain",
        LONG_PRETRAIN,
        (130,),
        run=interrupted([signal.SIGINT] * 3, extra=1.0, gap=0.05),
        check=checkpoints_whole,
    ),
    Case(
        "Ctrl-C twice during pretrain's first step",
        LONG_PRETRAIN,
        (130,),
        run=interrupted([signal.SIGINT, signal.SIGINT], after_line="hcl pretrain: ", extra=0.0, gap=0.05),
        check=checkpoints_whole,
    ),
    Case(
        "Ctrl-C twice during report",
        REPORT,
        (0, 130),
        run=interrupted([signal.SIGINT, signal.SIGINT], after_line="", extra=0.0, gap=0.05),
        check=report_whole,
    ),
    *CASES_OF_ISSUE_32,
]
