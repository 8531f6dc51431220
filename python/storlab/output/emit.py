"""The emit step: what every command that makes a result document does with it, in one place.

An `Emitter` is made before the run from the command's output settings and checks every
destination at once (as hyperfine's ExportManager creates each export file when it is added), so
a typo in a path costs no measurement. The run goes inside `running`; while it goes on,
`checkpoint` keeps the partial document (the store and the --json file). At the end `finish`
does the rest once: store the document, write the files (--json, the view's exports and the
files the document names), print the table (on stderr when a file took standard output) and the
MPI summary, the warnings, what failed, and return the command's exit code: 128 + n when a
signal stopped the run, 1 when it failed, was incomplete, or something could not be stored or
written, else 0.

What a document looks like (its table, files, notices and checks) is its view, from the registry
in output/views.py.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from ..errors import OutputError
from ..signals import STOP, exit_code_for
from .files import check_destination, write_output
from .progress import ProgressLine
from .views import JSON, VIEWS, View

if TYPE_CHECKING:
    from .live import LiveFigures

__all__ = ["Emitter", "OK", "FAILURE", "stop_exit_code", "CHECKPOINT_STORE_WAIT_S"]

# The exit codes the emit step gives: cli/main.py's ExitCode.OK and ExitCode.FAILURE (the same
# numbers: tests/test_emit.py holds them equal), and 128 + n for a signal (signals.exit_code_for).
OK, FAILURE = 0, 1

CHECKPOINT_STORE_WAIT_S = 1.0   # a checkpoint waits this long for a locked store; the final save longer


class Emitter:
    """The emit step of one command (see the module's doc).

    `settings` are the command's output options (json, quiet, store, no_store, tag, note, and the
    view's export flags such as fio_json or csv); `view` the registry's name or a View; `table_to`
    a file the table goes to instead of standard output (`storlab fio --output`); `must_store`
    False where a result the store cannot take still exits 0 (`storlab fio`: fio's exit code
    speaks of the run)."""

    def __init__(self, command: str, settings: Mapping[str, Any], view: str | View = "run",
                 table_to: str | None = None, must_store: bool = True) -> None:
        self.command = command
        self.settings = settings
        self.view = VIEWS[view] if isinstance(view, str) else view
        self.table_to = table_to
        self.must_store = must_store
        wanted = {"json": JSON, **self.view.exports}
        # (option as the user writes it, destination, export) of every file a flag asks for
        self.exports = [(key.replace("_", "-"), settings[key], export) for key, export in wanted.items()
                        if settings.get(key)]
        for option, path, export in self.exports:
            check_destination(path, option, allow_stdout=export.allow_stdout)
        check_destination(table_to, "output")

    # -- while the run goes on ------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self, progress: ProgressLine | LiveFigures | None = None) -> Iterator[None]:
        """Around the run: once it ends, however it ends, a signal no longer aborts anything (the
        result is being saved: signals.STOP.saving) and the progress line is cleared (the live
        figures' line too, and their endpoint closed)."""
        try:
            yield
        finally:
            STOP.saving()
            if progress:
                progress.finish()

    def checkpoint(self, partial: dict[str, Any]) -> None:
        """Store the document so far and rewrite the --json file (not standard output, nor a
        device or FIFO, which get exactly one document), so a killed run leaves what it measured."""
        self.store(partial, checkpoint=True)
        target = self.settings.get("json")
        real = os.path.realpath(target) if target and target != "-" else None
        if real and (not os.path.exists(real) or os.path.isfile(real)):
            try:
                write_output(JSON.text(partial, target), target, "json")
            except OutputError as e:  # the run goes on; the final write reports it again if it persists
                self._say(f"warning: checkpoint not written: {e}")

    def store(self, doc: dict[str, Any], tags: Sequence[str] | None = None, checkpoint: bool = False) -> bool:
        """Save a document in the store unless --no-store (with the user's tags, or `tags`). A store
        that cannot take it (broken, read-only, locked) costs the measurement nothing: one line
        says so and where the result went instead. A checkpoint that cannot be stored says
        nothing: the final save, which always follows (also after Ctrl-C), reports it once.
        Returns False when the document was not stored."""
        if not self.storing:
            return True
        from .. import store

        if tags is None:
            tags = self.settings.get("tag") or ()
        try:
            store.save(doc, path=self.settings.get("store"), tags=tags, note=self.settings.get("note") or None,
                       wait=min(CHECKPOINT_STORE_WAIT_S, store.wait_seconds()) if checkpoint else None)
        except Exception as e:  # the measurement is worth more than the store: report, keep going
            if not checkpoint:
                self._say(f"error: result not stored: {e}; {self._where_result_goes()}")
            return False
        return True

    @property
    def storing(self) -> bool:
        return not self.settings.get("no_store") and importlib.util.find_spec("storlab.store") is not None

    # -- at the end ------------------------------------------------------------------------------
    def finish(self, doc: dict[str, Any], *, store: Sequence[dict[str, Any]] | None = None,
               tags: Sequence[str] = (), kept: str | None = None, note: str | None = None) -> int:
        """Emit the finished (or stopped) document and give the exit code. `store`: the documents
        to store instead of `doc` (`storlab diagnose` stores its probes' runs), with `tags` beside
        the user's; `kept`: what an interrupted run keeps, in words (default: the view's); `note`:
        a line saying what was stored, printed when storing and not quiet."""
        quiet = bool(self.settings.get("quiet"))
        user_tags = tuple(self.settings.get("tag") or ())
        stored = [self.store(d, tags=(*user_tags, *tags)) for d in (store if store is not None else [doc])]
        written = self._write_files(doc)
        if self.table_to or not quiet:
            written = self._show(doc) and written
        for line in self.view.notices(doc):
            print(line, file=sys.stderr)
        if note and self.storing and not quiet:
            print(note, file=sys.stderr)
        problems = self.view.checks(doc, self.command)
        for line in problems:
            print(line, file=sys.stderr)
        stopped = stop_exit_code(self.command, doc, kept or self.view.kept)
        if stopped is not None:
            return stopped
        if problems or not written or (self.must_store and not all(stored)):
            return FAILURE
        return OK

    def _write_files(self, doc: dict[str, Any]) -> bool:
        """The files the document names (the view's), then every file a flag asked for; each one
        that cannot be written is one line. Returns False when any could not be."""
        ok = True
        try:
            files = [(self.view.files_option, path, text) for path, text in self.view.files(doc)]
        except OSError as e:   # what the files are made from could not be read
            self._say(f"error: {self.view.files_option} not written: {e.strerror or e}")
            files, ok = [], False
        files += [(option, path, export.text(doc, path)) for option, path, export in self.exports]
        for option, path, text in files:
            try:
                write_output(text, path, option)
            except OutputError as e:
                self._say(f"error: {e}")
                ok = False
        return ok

    def _show(self, doc: dict[str, Any]) -> bool:
        """The table (and an MPI run's summary): into the --output file where one is given, else on
        standard output, or on standard error when a file took standard output."""
        text = self.view.table(doc) + "\n"
        if "mpi" in doc:
            from .mpi_summary import render_summary

            text += render_summary(doc) + "\n"
        if self.table_to:
            try:
                write_output(text, self.table_to, "output")
            except OutputError as e:
                self._say(f"error: {e}")
                return False
            return True
        to_stdout = any(path == "-" for _, path, _ in self.exports)
        (sys.stderr if to_stdout else sys.stdout).write(text)
        return True

    def _where_result_goes(self) -> str:
        target = self.settings.get("json")
        if target == "-":
            return "the JSON document goes to standard output"
        if target:
            return f"the JSON document goes to {target}"
        return "nothing else keeps the document: give --json FILE (or fix the store) and run again"

    def _say(self, text: str) -> None:
        print(f"storlab {self.command}: {text}", file=sys.stderr)


def stop_exit_code(command: str, doc: dict[str, Any], kept: str = "partial results kept") -> int | None:
    """Report a stopped, failed or incomplete run in one line and give its exit code; None if it
    ended well."""
    if doc["stop_reason"] == "interrupted":
        name = doc.get("signal") or STOP.signal_name   # under MPI: the signal another rank got
        by = f", {name}" if name else ""
        print(f"storlab {command}: interrupted; {kept} (complete: false{by})", file=sys.stderr)
        return exit_code_for(signal.Signals[name] if name else signal.SIGINT)
    if doc["stop_reason"] == "error":
        print(f"storlab {command}: error: {doc['error']}", file=sys.stderr)
        return FAILURE
    if doc.get("complete") is False:
        print(f"storlab {command}: error: incomplete ({doc['stop_reason']}); {kept}", file=sys.stderr)
        return FAILURE
    return None
