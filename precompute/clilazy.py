"""A click group whose sub-commands from other packages are imported only when used.

Packages add their own sub-commands through the ``nostall.commands`` entry-point group of their
distribution (``name = "module:attribute"``), so the entry point names none of them. A missing
module or an import error affects only that sub-command: ``precompute --help`` and the other
commands keep working, and the broken one explains what failed.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

import click

__all__ = ["LazyGroup", "plugin_commands"]


def _unavailable(name: str, module: str, exc: BaseException) -> click.Command:
    reason = f"{type(exc).__name__}: {exc}"

    def run() -> None:
        raise click.ClickException(f"'{name}' is unavailable: cannot import {module} ({reason})")

    return click.Command(
        name,
        callback=run,
        help=f"(unavailable: {reason})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


def plugin_commands(group: str) -> dict[str, tuple[str, str, str | None]]:
    """Return ``{name: (module, attribute, None)}`` for the installed entry points of ``group``."""
    found: dict[str, tuple[str, str, str | None]] = {}
    for ep in entry_points(group=group):
        module, _, attr = ep.value.partition(":")
        found[ep.name] = (module.strip(), attr.strip(), None)
    return found


class LazyGroup(click.Group):
    """``click.Group`` plus lazily imported sub-commands.

    Sub-commands come from ``lazy_commands={name: (module, attribute, short help)}`` and from
    the entry points of ``entry_point_group``; a short help of ``None`` is read from the
    command itself when ``--help`` lists it.
    """

    def __init__(
        self,
        *args: Any,
        lazy_commands: dict[str, tuple[str, str, str | None]] | None = None,
        entry_point_group: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        found = plugin_commands(entry_point_group) if entry_point_group else {}
        self.lazy_commands = {**found, **(lazy_commands or {})}

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Eager and lazy command names, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Return an eager command, or import a lazy one (or a stub saying why it can't)."""
        if cmd_name not in self.lazy_commands:
            return super().get_command(ctx, cmd_name)
        module, attr, _ = self.lazy_commands[cmd_name]
        try:
            command = getattr(importlib.import_module(module), attr)
        except Exception as exc:  # any import failure only disables this sub-command
            return _unavailable(cmd_name, module, exc)
        if not isinstance(command, click.Command):
            return _unavailable(cmd_name, module, TypeError(f"{module}.{attr} is not a command"))
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List commands; a lazy one without a static help is imported for its own."""
        rows = []
        for name in self.list_commands(ctx):
            static = self.lazy_commands.get(name, (None, None, None))[2]
            if static is not None:
                rows.append((name, static))
                continue
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(formatter.width - 20)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
