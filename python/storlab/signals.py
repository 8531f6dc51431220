"""How storlab stops on a signal: SIGINT (Ctrl-C), SIGTERM (Slurm's time limit, `timeout`,
systemd) and SIGHUP (a closed terminal) all mean "stop, keep what was measured, store it, clean
up", and the command exits with 128 + the number of the first signal (130, 143, 129).

- The first signal raises `Interrupted` (a KeyboardInterrupt, so every Ctrl-C path handles it)
  in the main thread: the running phase is interrupted, a layout in progress is cancelled.
- Once the run is over and its result is being saved (`STOP.saving()`), or inside a `held()`
  section (a checkpoint, a clean-up), a signal is only recorded: it never aborts the saving.
- A second signal is recorded and said to be waited out; a third exits at once (nothing more is
  saved, nothing more is cleaned up).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

__all__ = ["Interrupted", "StopSignals", "STOP", "HANDLED", "exit_code_for"]

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_code_for(signo: int) -> int:
    """The shell convention for a command ended by a signal: 128 + its number."""
    return 128 + int(signo)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived; `signo` says which."""

    def __init__(self, signo: int) -> None:
        super().__init__(signal.Signals(signo).name)
        self.signo = int(signo)


class StopSignals:
    """The signal handler of a storlab command and what it has received."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._holds = 0
        self._saving = False
        self._previous: dict[int, object] = {}

    # -- state ------------------------------------------------------------------------------------
    @property
    def requested(self) -> bool:
        """A stop was asked for (whether or not it raised)."""
        return bool(self.received)

    @property
    def signal_name(self) -> str | None:
        return signal.Signals(self.received[0]).name if self.received else None

    @property
    def exit_code(self) -> int | None:
        return exit_code_for(self.received[0]) if self.received else None

    # -- installing -------------------------------------------------------------------------------
    def install(self) -> None:
        """Handle SIGINT, SIGTERM and SIGHUP (main thread only; elsewhere Python cannot)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self.received.clear()
        self._holds, self._saving = 0, False
        for signo in HANDLED:
            self._previous[signo] = signal.signal(signo, self._handle)

    def uninstall(self) -> None:
        for signo, previous in self._previous.items():
            signal.signal(signo, previous)  # type: ignore[arg-type]
        self._previous.clear()

    # -- modes ------------------------------------------------------------------------------------
    def saving(self) -> None:
        """From now on signals are recorded, not raised: the result is being stored and written."""
        self._saving = True

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Record signals without raising for the duration (a checkpoint write, a clean-up); the
        caller looks at `requested` afterwards."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1

    # -- the handler --------------------------------------------------------------------------------
    def _handle(self, signo: int, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.received.append(int(signo))
        count = len(self.received)
        name = signal.Signals(signo).name
        if count >= 3:
            _say(f"storlab: {name} again: exiting now; the result may not be stored and files may be left")
            os._exit(exit_code_for(self.received[0]))
        if count == 2:
            _say(f"storlab: {name}: still stopping and saving the result; a third signal exits at once")
            return
        if self._saving or self._holds:
            _say(f"storlab: {name}: stopping once the result is saved")
            return
        raise Interrupted(signo)


def _say(text: str) -> None:
    try:
        sys.stderr.write(f"\n{text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr gone (terminal closed on SIGHUP): the exit code still tells


# The one handler of the process: installed by the CLI entry point for every command.
STOP = StopSignals()
