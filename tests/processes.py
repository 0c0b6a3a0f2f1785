"""The tests' way to run a command that starts processes of its own (``dvc repro`` runs ``hcl`` stages): in a process group
of its own, which is killed whole when the test is interrupted (Ctrl-C, a timeout), so that no ``dvc repro`` or stage of it
outlives ``pytest``.

``subprocess.run`` kills only the process it started, and only that one; its children went on (issue 54).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any


def run_grouped(command: Sequence[str], *, timeout: float | None = None, **options: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(command, capture_output=True, text=True, **options)`` in a new session; on any exception while it
    runs (KeyboardInterrupt, its ``timeout``) every process of that session is killed before the exception goes on."""
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **options
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except BaseException:
            kill_group(process.pid)
            process.wait()
            raise
        finally:
            kill_group(process.pid)  # what the command left running in the background when it ended
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def kill_group(leader: int) -> None:
    """SIGKILL every process of the group ``leader`` leads (none left: nothing to do)."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except ProcessLookupError:
        pass
