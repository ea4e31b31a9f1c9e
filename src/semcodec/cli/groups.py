"""Click groups: lazily imported subcommands, and the root group's one-line errors."""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from semcodec.cli.common import EXIT_FAILURE, EXIT_INTERRUPTED, debug_enabled, describe_error, error
from semcodec.errors import SemcodecError, UsageProblem


class LazyGroup(click.Group):
    """A group whose subcommands live in heavy modules imported only when used."""

    def __init__(
        self,
        *args: Any,
        lazy: dict[str, tuple[str, str]] | None = None,
        optional: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})
        self.optional = set(optional)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Eager and lazy commands together, without importing the lazy ones."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a lazy command on first use; a broken optional one becomes a stub."""
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in self.lazy:
            return cmd
        module, attr = self.lazy[cmd_name]
        try:
            cmd = getattr(importlib.import_module(module), attr)
        except Exception as exc:  # noqa: BLE001 - an optional command must not break the CLI
            if cmd_name not in self.optional:
                raise
            cmd = _unavailable(cmd_name, describe_error(exc))
        self.add_command(cmd, cmd_name)
        return cmd


def _unavailable(name: str, reason: str) -> click.Command:
    """A stand-in for an optional command whose module cannot be imported."""

    def run() -> None:
        """Report why the command cannot run."""
        raise SemcodecError(f"the {name} command is unavailable: {reason}")

    return click.Command(
        name,
        callback=run,
        help=f"(unavailable: {reason})",
        context_settings={"ignore_unknown_options": True},
    )


class OneLineUsageError(click.exceptions.ClickException):
    """A usage error shown as the one ``semcodec: error: ...`` line, exit 2 (not click's block)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        """Print the single error line."""
        error(self.format_message())


def _one_line(exc: click.UsageError) -> OneLineUsageError:
    """The message of click's usage error, with where to find the usage."""
    ctx = exc.ctx
    message = exc.format_message().rstrip(".")
    where = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
    return OneLineUsageError(message + where)


class RootGroup(LazyGroup):
    """Root group: turns any exception into a one-line error and the right exit code."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        """Parse the root's own arguments; a usage error there is one line too."""
        try:
            return super().make_context(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a bare ``semcodec`` shows the help
        except click.UsageError as exc:
            raise _one_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; map exceptions to one line + exit code (click keeps its own)."""
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from exc
        except UsageProblem as exc:  # a command that did not say it in click's words: still exit 2
            raise _one_line(click.UsageError(str(exc))) from exc
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            raise  # click's main silences stdout and exits 1
        except KeyboardInterrupt:
            click.echo(file=sys.stderr)
            error("interrupted")
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - every processing error becomes exit 1
            if debug_enabled(ctx):
                traceback.print_exc(file=sys.stderr)
            error(describe_error(exc))
            ctx.exit(EXIT_FAILURE)
