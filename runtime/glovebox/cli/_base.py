"""What every ``glovebox`` command shares: the one error boundary and the global options.

Every error is one line on stderr, ``error [code]: message``, with the exit
code the CLI promises:

- 0: success.
- 1: the library refused: a ``GloveboxError`` (its code; its ``exit_code``),
  misuse the library reports as ``ValueError`` (``invalid_argument``), a file
  it cannot read or write or a home that is a file (``OSError``: ``io_error``),
  a missing optional extra (``missing_extra``, naming the extra to install),
  a failed call (the envelope on stdout), a policy with problems, a tampered
  audit log.
- 2: a usage error (``usage_error``: click's usage line and hint, then the
  error line: a bad option, ``--input`` that is not JSON or breaks the rules
  of ``glovebox.core._jsonlimits``).

Anything else that escapes a command is ``error [internal_error]: ...``, exit 1;
``-v`` logs its traceback.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from ..core._errors import GloveboxError, ManifestWarning
from ..core._jsonlimits import escape_surrogates
from ..core._settings import check_home, home_dir, log_format
from ..runtime._runtime import Runtime
from ..telemetry._calllog import JsonFormatter

__all__ = [
    "CliError",
    "GloveboxGroup",
    "accept_global_options",
    "again",
    "dump",
    "home_of",
    "log_config",
    "open_runtime",
    "progress_of",
]

logger = logging.getLogger("glovebox")
#: Where the root group leaves the command's log format (``text`` or ``json``) in ``ctx.meta``.
LOG_FORMAT_KEY = "glovebox.log_format"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class CliError(click.ClickException):
    """A refusal the CLI itself makes (not the library's): printed ``error [code]: message``, exit 1."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _speak(error: click.ClickException) -> click.ClickException:
    """Make ``error`` print in the CLI's one voice when click shows it (usage and hint kept)."""
    code = getattr(error, "code", "usage_error" if isinstance(error, click.UsageError) else "failed")

    def show(file: Any = None) -> None:
        ctx = getattr(error, "ctx", None)
        if isinstance(error, click.UsageError) and ctx is not None:
            names = ctx.command.get_help_option_names(ctx)
            hint = f"Try '{ctx.command_path} {max(names, key=len)}' for help.\n" if names else ""
            click.echo(f"{ctx.get_usage()}\n{hint}", err=True)
        click.echo(f"error [{code}]: {error.format_message()}", err=True)

    error.show = show  # type: ignore[method-assign]
    return error


class GloveboxGroup(click.Group):
    """The root command group: converts library errors to exit codes, once, for every command.

    It also owns logging: without ``-v`` the host's log records go nowhere (the
    command prints its result or one error line, nothing else); with ``-v``
    they go to stderr, tracebacks included. With ``--log-format json`` (or
    ``GLOVEBOX_LOG_FORMAT=json``) the host's records, one per call among them
    (the ``glovebox.calls`` logger, see ``glovebox.telemetry._calllog``), go to stderr as
    JSON lines, with or without ``-v``.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as error:
            raise _speak(error) from error.__cause__

    def invoke(self, ctx: click.Context) -> Any:
        fmt = ctx.params.get("log_format")
        if fmt is None:
            try:
                fmt = log_format()
            except ValueError as error:
                raise click.UsageError(str(error), ctx) from error
        ctx.meta[LOG_FORMAT_KEY] = fmt
        with _logging(bool(ctx.params.get("verbose")), fmt), _warnings():
            try:
                return super().invoke(ctx)
            except GloveboxError as error:
                _exit(ctx, f"error [{error.code}]: {error.message}", error.exit_code)
            except ValueError as error:
                _exit(ctx, f"error [invalid_argument]: {error}", 1)
            except OSError as error:
                _exit(ctx, f"error [io_error]: {error}", 1)
            except click.ClickException as error:
                raise _speak(error) from error.__cause__
            except (click.exceptions.Exit, click.Abort):
                raise
            except Exception as error:
                logger.exception("unexpected error")
                hint = "" if ctx.params.get("verbose") else "; run with -v for details"
                _exit(ctx, f"error [internal_error]: unexpected {type(error).__name__}{hint}", 1)


@contextmanager
def _warnings() -> Iterator[None]:
    """Print each ManifestWarning the command raises as ``warning: message`` on stderr, when it is raised."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, ManifestWarning):
            click.echo(f"warning: {message}", err=True)
        else:
            shown(message, category, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("always", ManifestWarning)
        warnings.showwarning = show
        yield


@contextmanager
def _logging(verbose: bool, fmt: str = "text") -> Iterator[None]:
    """Route the command's log records: to stderr with ``verbose`` or as JSON lines, else nowhere.

    The handler sits on the root logger, so a library's records (sqlglot's "falling back to
    parsing as a Command", httpx's) follow the same rule as the host's: without ``-v`` (or
    ``--log-format json``) nothing reaches stderr, not even through Python's last-resort
    handler; with it, the ``glovebox`` logger speaks from INFO up, the others from WARNING.
    """
    handler: logging.Handler
    loud = verbose or fmt == "json"
    if loud:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    else:
        handler = logging.NullHandler()
    root = logging.getLogger()
    level = logger.level
    root.addHandler(handler)
    if loud:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        logger.setLevel(level)


#: The root options a person may also write after the subcommand (``glovebox serve --policy p.yaml``).
GLOBAL_OPTIONS = ("home", "policy")


def accept_global_options(root: click.Group) -> None:
    """Let every command under ``root`` take ``--home`` and ``--policy`` after its name too.

    Each gets a hidden copy of the root option that sets the root's value, so the
    command reads it where it reads the root's (``open_runtime``, ``home_of``). A
    command with an option of the same name of its own (``policy explain --policy``)
    keeps it.
    """
    originals = {param.name: param for param in root.params if param.name in GLOBAL_OPTIONS}
    for command in _descendants(root):
        taken = {name for param in command.params for name in getattr(param, "opts", ())}
        for name, original in originals.items():
            if f"--{name}" not in taken:
                command.params.append(_copy_of(name, original))


def _descendants(group: click.Group) -> Iterator[click.Command]:
    for command in group.commands.values():
        yield command
        if isinstance(command, click.Group):
            yield from _descendants(command)


def _copy_of(name: str, original: click.Parameter) -> click.Option:
    def to_root(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.find_root().params[name] = value

    return click.Option([f"--{name}"], type=original.type, expose_value=False, hidden=True, callback=to_root)


def _exit(ctx: click.Context, line: str, code: int) -> NoReturn:
    click.echo(line, err=True)
    ctx.exit(code)


def _root_param(ctx: click.Context, key: str) -> Any:
    return ctx.find_root().params.get(key)


def home_of(ctx: click.Context) -> Path:
    """The home the command works on: ``--home``, else the settings' default (refused when it is a file)."""
    return check_home(home_dir(_root_param(ctx, "home")))


def again(ctx: click.Context, *words: str) -> str:
    """A ``glovebox`` command line a person can run as printed: ``words`` after the ``--home``
    and ``--policy`` this command was given (the environment's are theirs already)."""
    given = [(f"--{name}", _root_param(ctx, name)) for name in GLOBAL_OPTIONS]
    options = [part for option, value in given if value is not None for part in (option, str(value))]
    return shlex.join(["glovebox", *options, *words])


def open_runtime(ctx: click.Context, policy: str | None = None, **options: Any) -> Runtime:
    """A Runtime on ``--home`` with ``policy`` (default: ``--policy``, else ``GLOVEBOX_POLICY``);
    ``options`` are further ``Runtime`` keyword arguments."""
    return Runtime(home=_root_param(ctx, "home"), policy=policy or _root_param(ctx, "policy"), **options)


def progress_of(ctx: click.Context) -> Callable[[str], None] | None:
    """Where long work reports its steps: stderr when it is a terminal and ``-q`` is not given, else nowhere."""
    if _root_param(ctx, "quiet") or not _is_terminal(sys.stderr):
        return None
    return lambda line: click.echo(click.style(f"... {line}", dim=True), err=True)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed: not a terminal
        return False


def dump(value: Any) -> str:
    """Indented JSON, as every command prints it (a lone surrogate stays a ``\\udXXX`` escape)."""
    return escape_surrogates(json.dumps(value, indent=2, ensure_ascii=False))


def log_config(ctx: click.Context) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for the command's log format: None (uvicorn's own) for text,
    else its ``uvicorn``, ``uvicorn.error`` and ``uvicorn.access`` loggers as JSON lines on stderr."""
    if ctx.meta.get(LOG_FORMAT_KEY) != "json":
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    quiet = {"handlers": ["json"], "level": "INFO", "propagate": False}
    loggers = {name: dict(quiet) for name in ("uvicorn", "uvicorn.access")}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "glovebox.telemetry._calllog.JsonFormatter"}},
        "handlers": {"json": handler},
        "loggers": {**loggers, "uvicorn.error": {"level": "INFO"}},
    }
