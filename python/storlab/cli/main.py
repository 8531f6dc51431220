"""Entry point of the `storlab` command: builds the subcommand parsers and maps errors to exit codes.

Each subcommand lives in its own module `storlab.cli.<name>` exposing
`register(subparsers) -> None`, which adds its parser and sets `func=run` on it, where
`run(args) -> int` returns the exit code. A new subcommand joins by adding its name to
`SUBCOMMANDS`. Only the module of the command being run is imported (`commands_to_load`), so one
command's dependencies (matplotlib for `report`, jsonschema, mpi4py ...) never load for another;
`storlab --help`, no command or an unknown one load them all, to list them.

Errors (storlab/errors.py): a `UserError` (bad option, job file, stack file, target or output;
`UsageError` here) is one line, exit 2; a `StorlabError` that is not (the engine could not be set
up, an I/O request failed, a rank died) is one line, exit 1; an `OSError` naming a file the
command reads or writes is one line, exit 1. Anything else is a bug in storlab: the last frames of
its traceback and an invitation to report it, exit 70 (EX_SOFTWARE, sysexits.h).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from enum import IntEnum

from .. import __version__
from ..errors import StorlabError, UserError
from ..signals import STOP, exit_code_for
from .options_cli import CommandParser

# Order shown in `storlab --help`.
SUBCOMMANDS = ("run", "fio", "sweep", "meta", "scale", "replay", "io500", "workload", "net", "kvcache", "diagnose", "plan", "doctor",
               "results", "report")


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1          # the run itself failed (I/O error, verification mismatch ...)
    USAGE = 2            # bad option, bad job file, bad output destination, refused target
    BUG = 70             # an error storlab did not expect: a bug, to be reported (EX_SOFTWARE)
    INTERRUPTED = 130    # Ctrl-C (SIGINT); partial results were written
    HANGUP = 129         # SIGHUP: as Ctrl-C (128 + the signal's number)
    TERMINATED = 143     # SIGTERM (Slurm's time limit, timeout, systemd): as Ctrl-C


class UsageError(UserError):
    """A mistake in how a command was called, found by the command itself; one line, exit code 2."""

# How many frames of a bug's traceback are shown (the innermost: where it went wrong).
BUG_FRAMES = 4


def _one_line(e: BaseException) -> str:
    """The message of an error as one line (a TOML decoder or the engine may add line breaks)."""
    return " ".join(str(e).split()) or type(e).__name__


def commands_to_load(argv: list[str]) -> tuple[str, ...]:
    """The subcommands whose modules `argv` needs: the one it names; none for `storlab --version`;
    every one for `storlab --help`, no command or an unknown one (argparse lists them)."""
    for word in argv:
        if word in ("-h", "--help"):
            return SUBCOMMANDS
        if word == "--version":
            return ()
        if not word.startswith("-"):
            return (word,) if word in SUBCOMMANDS else SUBCOMMANDS
    return SUBCOMMANDS


def build_parser(commands: tuple[str, ...] = SUBCOMMANDS) -> argparse.ArgumentParser:
    """The `storlab` parser with the given subcommands registered (by default every one), each
    imported from `storlab.cli.<name>` only now."""
    parser = CommandParser(
        prog="storlab",
        description="Measure, model, plan and check storage for HPC and data-heavy clusters.",
    )
    parser.add_argument("--version", action="version", version=f"storlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (n for n in SUBCOMMANDS if n in commands):   # in the order of `storlab --help`
        module_name = f"{__package__}.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue  # subcommand not built yet
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands_to_load(words))
    args = parser.parse_args(words)
    if not getattr(args, "func", None):
        parser.print_help()
        return ExitCode.USAGE
    STOP.install()  # SIGINT, SIGTERM and SIGHUP stop a run the same way (storlab/signals.py)
    try:
        code = int(args.func(args))
        # Stopped by a signal (or one came while the result was saved): 128 + its number.
        if STOP.exit_code is not None and code != ExitCode.USAGE:
            return STOP.exit_code
        return code
    except UserError as e:
        print(f"storlab {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return ExitCode.USAGE
    except StorlabError as e:   # the engine could not be set up, the run failed, a rank died
        print(f"storlab {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return ExitCode.FAILURE
    except BrokenPipeError:
        return ExitCode.FAILURE
    except OSError as e:        # a file the command reads or writes: name it and the reason
        where = f"{e.filename}: " if e.filename else ""
        print(f"storlab {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return ExitCode.FAILURE
    except KeyboardInterrupt as e:
        print(f"storlab {args.command}: interrupted", file=sys.stderr)
        return exit_code_for(getattr(e, "signo", 2)) if STOP.exit_code is None else STOP.exit_code
    except Exception as e:      # not a mistake of the user's: a bug in storlab
        report_bug(args.command, e)
        return ExitCode.BUG
    finally:
        if argv is not None:
            STOP.uninstall()  # called in-process (tests): give the caller its handlers back
        else:
            STOP.saving()     # the process ends now: a late signal must not kill it mid-exit


def report_bug(command: str, e: BaseException) -> None:
    """A short traceback (the last frames, where it went wrong) and how to report it."""
    import traceback  # only when storlab has a bug to report

    frames = traceback.extract_tb(e.__traceback__)[-BUG_FRAMES:]
    print(f"storlab {command}: internal error (a bug in storlab {__version__}): {type(e).__name__}: "
          f"{_one_line(e)}", file=sys.stderr)
    for line in traceback.format_list(frames):
        sys.stderr.write(line)
    print("please report this bug to the storlab maintainers with the command line and the lines "
          "above (exit code 70)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
