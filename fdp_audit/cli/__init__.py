"""The ``fdp-audit`` command line (docs/files.md).

Each subcommand lives in its own module of this package, registered below with :func:`register_command`, and
exposes ``register(subparsers)``, which adds its parser and sets ``handler`` to a function ``(args) -> int``.
Exit codes: 0 success or pass, 1 privacy violation (``audit``, ``gate``), 2 bad input (including a path that
cannot be read or written), 3 internal error. Either is one line on stderr naming the field or file; a failure
inside the user's own code (:class:`fdp_audit.errors.UserCodeError`) prints the user's traceback above it, and
``FDP_AUDIT_DEBUG=1`` prints fdp-audit's traceback above an internal error's line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from fdp_audit import __version__
from fdp_audit.errors import BadInputError, UserCodeError
from fdp_audit.registry import Registry, Rule, load_plugins

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
# One meaning for every command that takes --seed (train, audit): it replaces the config's seed.
SEED_HELP = ("replace the config's seed, from which the data (split or synthetic table), every model's random "
             "streams and the audit's trials all derive")


@contextlib.contextmanager
def flags_for(keywords: Mapping[str, str]) -> Iterator[None]:
    """Name the command's flags in the library's one-line errors: a :class:`BadInputError` whose field is (or
    starts with, before a file name) one of the library call's ``keywords`` names the flag that gave it.

    Args:
        keywords: the library's keyword → the command's flag (``baseline`` → ``--baseline``).

    Yields:
        Nothing; the block runs once.

    Raises:
        BadInputError: the block's, its field renamed; other errors pass unchanged.
    """
    try:
        yield
    except UserCodeError:
        raise
    except BadInputError as err:
        keyword, _, rest = (err.field or "").partition(" ")
        field = " ".join(filter(None, (keywords.get(keyword, keyword), rest))) or None
        raise BadInputError(err.detail, field) from None


@dataclass(frozen=True)
class Command:
    """A subcommand of ``fdp-audit``: ``module`` exposes ``register(subparsers)``, imported when the parser is
    built (its own heavy imports wait for its handler, so that ``--help`` starts fast)."""

    name: str
    module: str


COMMANDS: Registry[Command] = Registry("command", "COMMAND", (
    Rule(lambda entry, _: entry.module.replace(".", "").replace("_", "").isalnum(), "module must be a dotted name"),
))


def register_command(entry: Command) -> Command:
    """Add a subcommand to ``fdp-audit``, listed in ``--help`` in registration order.

    Args:
        entry: the command's name and the module that registers its parser.

    Returns:
        ``entry`` itself.

    Raises:
        ValueError: the name is taken or the module is not a dotted name.
    """
    return COMMANDS.register(entry)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus an error; a CI log wants one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Refuse the command line in one line instead of argparse's usage and exit.

        Args:
            message: argparse's description of what is wrong.

        Raises:
            BadInputError: always, ``"<prog>: <message>"`` (exit code 2 through :func:`main`).
        """
        raise BadInputError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The ``fdp-audit`` parser: ``--version`` and one subparser per registered command, in registration order.

    Returns:
        The parser (each command module imported, its handler's heavy imports not yet).
    """
    parser = OneLineParser(
        prog="fdp-audit",
        description="Train with feature differential privacy, attack the models, compare the attacks "
        "with the Theorem 4 bound, report, and gate CI.",
    )
    parser.add_argument("--version", action="version", version=f"fdp-audit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for command in COMMANDS.values():
        importlib.import_module(command.module).register(subparsers)
    return parser


def quiet_libraries() -> None:
    """Keep the libraries' notes on their own internals out of the command's output: dp_accounting's RDP
    accountant logs (through absl) every order it drops, statsmodels warns on the 0/0 of a zero-trial interval
    that the suite never reports, torch on pickling details. Errors still show; ``FDP_AUDIT_DEBUG=1`` shows
    everything."""
    if os.environ.get("FDP_AUDIT_DEBUG"):
        return
    logging.getLogger("absl").setLevel(logging.ERROR)
    for library in ("absl", "dp_accounting", "statsmodels", "torch", "sklearn"):
        warnings.filterwarnings("ignore", module=rf"{library}(\.|$)")
    warnings.filterwarnings("ignore", message=r".*(weights_only|TypedStorage|pickle).*")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fdp-audit``: load the plugins, parse, call the command's handler, and turn every failure into one line on
    stderr and its exit code (module docstring).

    Args:
        argv: the command-line arguments (``sys.argv[1:]`` when None).

    Returns:
        The exit code: the handler's (0 success or pass, 1 violation), 2 for bad input or no command, 3 for an
        internal error, 130 when interrupted.
    """
    quiet_libraries()
    try:
        load_plugins()
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "handler", None):
            parser.print_help()
            return EXIT_BAD_INPUT
        return int(args.handler(args))
    except BadInputError as err:
        return _bad_input(err)
    except OSError as err:
        if err.filename is None:  # not about a path: an internal error
            return _internal_error(err)
        # an output folder that is a file, a read-only location, a full disk: the user's paths, not a bug
        return _bad_input(BadInputError(f"cannot use {err.filename}: {err.strerror or err}"))
    except KeyboardInterrupt:
        print("fdp-audit: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - last line of defence: one line, never a traceback
        return _internal_error(err)


def _bad_input(err: BadInputError) -> int:
    if isinstance(err, UserCodeError) and err.user_traceback:  # the user's own frames, above the one line
        print(err.user_traceback, file=sys.stderr)
    print(f"fdp-audit: error: {err}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _internal_error(err: Exception) -> int:
    if os.environ.get("FDP_AUDIT_DEBUG"):
        traceback.print_exception(err, file=sys.stderr)
    print(
        f"fdp-audit: internal error: {type(err).__name__}: {' '.join(str(err).split())[:500]} "
        "(set FDP_AUDIT_DEBUG=1 for a traceback)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


for _name in ("demo", "train", "account", "calibrate", "audit", "gate", "profile", "report", "corrdp", "reproduce"):
    register_command(Command(_name, f"fdp_audit.cli.{_name}"))
