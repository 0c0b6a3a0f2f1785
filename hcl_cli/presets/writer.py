"""``hcl preset NAME``: write a preset's groups into a params file, keeping everything else.

Each group the preset sets is written *whole* (the values it names and the declared default of
every other key, the machine keys of :data:`~hcl_cli.presets.base.MACHINE_KEYS` excepted); every
other group, every comment and the file's indentation and line endings stay as they are. The file
is edited line by line, read back as DVC reads it (:func:`~hcl_cli.config.base.parse_params`: YAML 1.2,
a key given twice refused) and compared with what was meant, and replaced atomically through a
sibling temporary file: it is either rewritten whole or left untouched. A key may be quoted
(``'pretrain':``); it is the same key as the plain one. The edit is planned first (:func:`plan`: the new text
and the values it changes, nothing written) and written later (:func:`write`), so that ``hcl preset``
can show the changes and the run's cost before the file changes, and ``--dry-run`` can stop there.

Files it will not touch, each with a one-line message and nothing written: a directory or other
non-regular file, a file that is not UTF-8 or not YAML, a read-only file, a file with hard links (its
replacement would no longer be the file the other names show), and YAML with anchors or
aliases (``&a``, ``*a``, ``<<: *a``), whose shared values a line edit would silently change in
more than one place. A symbolic link is followed: its target is rewritten and the link kept.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hcl_cli.config.base import parse_params
from hcl_cli.errors import HclError, UsageError
from hcl_cli.params import default_params_yaml
from hcl_cli.presets.base import Preset

GROUP_LINE = re.compile(r"^(?P<key>'[^']*'|\"[^\"]*\"|[^\s#'\"][^:]*):(?P<rest>[^#]*)(#.*)?$")
KEY_LINE = re.compile(r"^(?P<indent>[ \t]+)(?P<key>(?P<quote>['\"]?)[A-Za-z_][\w-]*(?P=quote)):(?P<value>.*?)(?P<comment>[ \t]+#.*)?$")
"""A group's header line and a key's line; a key may be quoted (``'pretrain':``, ``"beta": 1``), see :func:`key_name`."""


@dataclass(frozen=True)
class Plan:
    """What writing a preset into a params file would do, before anything is written: the new text and the changed values."""

    preset: Preset
    path: Path
    target: Path
    """The file written: ``path``, or the target of the symbolic link ``path``."""
    text: str
    changes: tuple[str, ...]
    """One line per value that changes: ``  group.key: old -> new``."""

    @property
    def into(self) -> str:
        return f"{self.path} (-> {self.target})" if self.target != self.path else str(self.path)

    def describe(self) -> str:
        """The lines printed before anything is written: the preset, each value it changes, and its note."""
        preset = self.preset
        where = f"{preset.paper} {preset.where}, {preset.dataset}: {preset.reported_top1}"
        lines = [f"hcl preset: {preset.name} ({where}) changes {len(self.changes)} value(s) in {self.into}", *self.changes]
        return "\n".join([*lines, f"note: {preset.note}"]) + "\n"


def plan(preset: Preset, path: Path) -> Plan:
    """What writing ``preset`` into the params file ``path`` (the defaults when it is missing) would change; nothing is
    written, and a file the preset must not rewrite is refused here, before any estimate."""
    groups = preset.groups()
    target = path.resolve() if path.is_symlink() else path
    text = read_params_text(path, target)
    before = parse(path, text)
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # kept, as the stages and DVC read past it
    edited = bom + edit_groups(text.removeprefix(bom), groups, before)
    expected = {**before, **{group: {**(before.get(group) or {}), **values} for group, values in groups.items()}}
    try:
        after = parse_params(edited, path)
    except UsageError:  # a key the edit gave twice
        after = None
    if after != expected:
        raise HclError(f"{path}: could not edit it in place (a group is not a plain block of 'key: value' lines); nothing written")
    changes = []
    for group, values in groups.items():
        old = before.get(group) or {}
        changes += [
            f"  {group}.{key}: {value_text(key, old, '(unset)')} -> {value_text(key, values)}"
            for key in values
            if old.get(key, changes) != values[key]
        ]
    return Plan(preset, path, target, edited, tuple(changes))


def write(planned: Plan) -> str:
    """Write a planned preset (refused if the file changed since it was planned); return the lines to print."""
    if plan(planned.preset, planned.path).text != planned.text:
        raise HclError(f"{planned.path} changed while the preset was being estimated; nothing written (run hcl preset again)")
    write_atomically(planned.target, planned.text)
    return f"hcl preset: wrote {planned.preset.name} into {planned.into}\nthen: dvc repro (or dvc exp run)\n"


def apply(preset: Preset, path: Path) -> str:
    """Write ``preset`` into the params file ``path`` (the defaults when it is missing); return the report to print."""
    planned = plan(preset, path)
    return planned.describe() + write(planned)


def read_params_text(path: Path, target: Path) -> str:
    """The text of the params file (``hcl params``' defaults when it does not exist), or a one-line error
    for a file that preset must not rewrite."""
    if path.is_symlink() and not target.exists():
        raise UsageError(f"{path} is a symbolic link to {target}, which does not exist; nothing written")
    if not target.exists():
        return default_params_yaml()
    status = target.stat()
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path} is a directory, not a params file; give the file, e.g. {path / 'params.yaml'}")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path} is not a regular file; give a params.yaml file")
    if not mode & stat.S_IWUSR or not os.access(target, os.W_OK):
        raise HclError(f"{path} is read-only; nothing written (make it writable to apply a preset)")
    if status.st_nlink > 1:
        raise HclError(
            f"{path} has {status.st_nlink} hard links, which replacing it would break; nothing written "
            "(give a params file of its own, e.g. a copy, or edit it by hand)"
        )
    try:
        data = target.read_bytes()
    except OSError as exc:
        raise HclError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"cannot read {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); nothing written"
        ) from None


def parse(path: Path, text: str) -> dict[str, Any]:
    """The values of ``text`` as DVC reads them; a usage error for text that is not a YAML mapping of groups (or gives
    a key twice), an error for anchors and aliases."""
    from ruamel.yaml import YAML
    from ruamel.yaml.events import AliasEvent, NodeEvent

    values = parse_params(text, path)
    if any(isinstance(event, AliasEvent) or (isinstance(event, NodeEvent) and event.anchor) for event in YAML(typ="safe").parse(text)):
        raise HclError(
            f"{path} uses YAML anchors or aliases (&name, *name), which a line-by-line edit would change in more than one "
            "place; nothing written (write the values out, or edit the file by hand)"
        )
    return values


def key_name(key: str) -> str:
    """The key a header or key line names, its quotes taken off (``'pretrain'`` and ``"pretrain"`` are ``pretrain``)."""
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        return key[1:-1]
    return key


def entry_text(key: str, value: Any) -> str:
    """``key: value`` as ``hcl params`` spells it (``weight_decay: 1.0e-06``, ``undimix_weights: '1,1,1'``)."""
    return yaml.safe_dump({key: value}, default_flow_style=True, width=1000).strip()[1:-1]


def value_text(key: str, values: Mapping[str, Any], missing: str = "") -> str:
    """``values[key]`` as params.yaml spells it, or ``missing``."""
    return entry_text(key, values[key]).partition(": ")[2] if key in values else missing


def edit_groups(text: str, groups: Mapping[str, Mapping[str, Any]], before: Mapping[str, Any]) -> str:
    """``text`` (whose values are ``before``) with every key of ``groups`` set, line by line: comments, order,
    indentation, line endings, other lines and the lines of unchanged values kept. A group written inline
    (``linear: {epochs: 3}``) becomes a block of its values and the new ones."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    defaults = default_lines()
    file_indent = next((m["indent"] for line in lines if (m := KEY_LINE.match(line))), "  ")

    def new_lines(group: str, values: Mapping[str, Any], indent: str) -> list[str]:
        return [indent + set_value(defaults[group].get(key, f"  {key}: null"), value).lstrip(" ") for key, value in values.items()]

    for group, values in groups.items():
        old = before.get(group) or {}
        header = next((i for i, line in enumerate(lines) if (m := GROUP_LINE.match(line)) and key_name(m["key"]) == group), None)
        if header is None:
            lines += ["", f"{group}:", *new_lines(group, values, file_indent)]
        elif GROUP_LINE.match(lines[header])["rest"].strip():
            lines[header : header + 1] = [f"{group}:", *new_lines(group, {**old, **values}, file_indent)]
        else:
            end = next((i for i in range(header + 1, len(lines)) if GROUP_LINE.match(lines[i])), len(lines))
            found = [(i, m) for i in range(header + 1, end) if (m := KEY_LINE.match(lines[i]))]
            indent = found[0][1]["indent"] if found else file_indent
            where = {key_name(m["key"]): i for i, m in found if m["indent"] == indent}
            for key in where.keys() & values.keys():
                if old.get(key, where) != values[key]:
                    lines[where[key]] = set_value(lines[where[key]], values[key])
            last = max(where.values(), default=header)
            lines[last + 1 : last + 1] = new_lines(group, {key: value for key, value in values.items() if key not in where}, indent)
    return newline.join(lines) + newline


def set_value(line: str, value: Any) -> str:
    """The ``key: value`` line ``line`` with ``value``, its comment kept at its column (one space further at least)."""
    match = KEY_LINE.match(line)
    assert match is not None, line
    head = match["indent"] + entry_text(key_name(match["key"]), value)
    comment = match["comment"]
    return f"{head} ".ljust(len(line) - len(comment.lstrip())) + comment.lstrip() if comment else head


def default_lines() -> dict[str, dict[str, str]]:
    """The lines of ``hcl params``' file, by group and key (how a key missing from a file is written)."""
    found: dict[str, dict[str, str]] = {}
    group = ""
    for line in default_params_yaml().splitlines():
        if match := GROUP_LINE.match(line):
            group = key_name(match["key"])
            found[group] = {}
        elif match := KEY_LINE.match(line):
            found[group][key_name(match["key"])] = line
    return found


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` through a sibling temporary file, keeping its mode; on any failure the
    temporary file is removed and ``path`` is as it was."""
    temporary = path.with_name(f".{path.name}.preset-{os.getpid()}")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # none was created (a read-only file system), or it cannot be removed
            temporary.unlink(missing_ok=True)
        raise HclError(f"cannot write {path}: {exc.strerror or exc}; nothing written") from None
