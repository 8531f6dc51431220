"""The communicator storlab's MPI runs talk through: tree-shaped collectives rooted at rank 0 that
never wait without watching for failures, and a liveness thread that notices a rank that raised,
was killed or lost its node, so every rank ends within `rank_timeout` instead of hanging.

Why not MPI's own collectives: a blocking MPI_Barrier or MPI_Gather waits forever for a dead
rank, and the non-blocking ones cannot be cancelled. Here each collective is point-to-point
messages along a binomial tree (rank r's parent is r with its lowest set bit cleared; its children
are r + 1, r + 2, r + 4 ... below that bit), polled together with the liveness state: a gather
climbs the tree, each rank passing on its subtree's values in one message, and a broadcast
descends it. No rank handles more than log2(size) messages per collective, and a collective
takes 2 log2(size) message latencies at most (a barrier is a gather then a broadcast), so 10,000
ranks cost about 14 hops per direction instead of 9,999 messages at rank 0.

Liveness: rank 0 and every other rank exchange heartbeats on a private duplicate of the world
communicator, from a thread of their own, so they go on while the main thread builds a plan
(laying out large files can take minutes) or runs a phase. Rank 0 watches every rank, the
others watch rank 0. A rank whose own run failed sends ABORT to rank 0, which forwards it to all.
Shutdown is an orderly BYE exchange, so no message is left unmatched when MPI is finalised.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from mpi4py import MPI

from ...errors import StorlabError

__all__ = ["RankFailure", "Liveness", "Comm"]

# Tags on the private control communicator (liveness thread) ...
TAG_HEARTBEAT, TAG_ABORT, TAG_BYE = 1, 2, 3
# ... and on the data communicator (main thread).
TAG_GATHER, TAG_BCAST, TAG_CLOCK, TAG_FINAL, TAG_CLEANUP = 10, 11, 12, 13, 14

# Polling: a few busy polls first (a barrier released while a rank sleeps starts that rank late by
# the sleep), then polls that yield the CPU to any other runnable thread (ranks oversubscribing the
# cores, the engine's threads), then sleeps growing from 20 us to 200 us. Long spinning is worse:
# ranks sharing cores take the CPU from the very work they wait for.
_SPINS = 50
_YIELDS = 200
_MIN_SLEEP_S = 20e-6
_MAX_SLEEP_S = 200e-6


def _precise_sleeps() -> None:
    """Ask the kernel to wake this process's sleeps on time: its default timer slack of 50 us
    (prctl PR_SET_TIMERSLACK) would add that much to every polling sleep, that is to every hop
    of a collective."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)   # PR_SET_TIMERSLACK, 1 ns
    except (OSError, AttributeError):
        pass   # not Linux: the default slack stays


class _Backoff:
    """One wait's polling pauses; `busy` False (more ranks on this node than cores) skips the
    spinning and yielding: each would take a core another rank needs."""

    def __init__(self, busy: bool = True) -> None:
        self.polls = 0 if busy else _SPINS + _YIELDS
        self.sleep_s = _MIN_SLEEP_S

    def __call__(self) -> None:
        self.polls += 1
        if self.polls <= _SPINS:
            return
        if self.polls <= _SPINS + _YIELDS:
            os.sched_yield()
            return
        time.sleep(self.sleep_s)
        self.sleep_s = min(_MAX_SLEEP_S, self.sleep_s * 2)


class RankFailure(StorlabError):
    """A rank failed or vanished; the message names it (`rank 2 (node n17) failed: ...`)."""

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(message)
        self.rank = rank


@dataclass
class _Peer:
    last_seen: float          # time.monotonic() of the last message from it
    bye: bool = False         # it has said goodbye: nothing more will come from it
    dead: bool = False


class Liveness:
    """Heartbeats and failure notices between rank 0 and the other ranks (see the module doc)."""

    def __init__(self, world, timeout_s: float) -> None:
        self.ctl = world.Dup()
        # Errors (a peer that died) come back as exceptions instead of aborting the whole job.
        self.ctl.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank = self.ctl.Get_rank()
        self.size = self.ctl.Get_size()
        self.timeout_s = float(timeout_s)
        # Five heartbeats per timeout: a rank is declared gone only after several missed ones.
        self.interval_s = min(1.0, self.timeout_s / 5)
        self.nodes: list[str] = ["?" for _ in range(self.size)]
        self.failure: RankFailure | None = None
        self.dead: set[int] = set()
        self._lock = threading.Lock()
        now = time.monotonic()
        watched = range(1, self.size) if self.rank == 0 else ([0] if self.size > 1 else [])
        self._peers = {r: _Peer(now) for r in watched}
        self._sends: list[Any] = []
        self._forwarded: set[int] = set()
        self._closing = False
        self._said_bye = False
        self._stop = threading.Event()
        # MPICH's mpiexec -disable-auto-cleanup tells the surviving processes with SIGUSR1 that a
        # process of the job ended abnormally (without, it SIGKILLs them all): from then on a peer
        # silent for a few heartbeats is dead, not only after the whole timeout
        self._notice_at: float | None = None
        if threading.current_thread() is threading.main_thread():
            try:
                signal.signal(signal.SIGUSR1, self._failure_notice)
            except (ValueError, OSError):
                pass
        self._thread = threading.Thread(target=self._loop, name="storlab-mpi-liveness", daemon=True)
        self._thread.start()

    def _failure_notice(self, signo, frame) -> None:   # noqa: ARG002 - a signal handler's signature
        """The launcher's notice that a process of the job died: only a time is set (signal-safe)."""
        self._notice_at = time.monotonic()

    # -- called from the main thread ------------------------------------------------------------
    def who(self, rank: int) -> str:
        return f"rank {rank} (node {self.nodes[rank]})"

    def report(self, message: str) -> RankFailure:
        """This rank failed: tell everyone (through rank 0) and return the failure."""
        failure = RankFailure(self.rank, f"{self.who(self.rank)} failed: {message}")
        with self._lock:
            if self.failure is None:
                self.failure = failure
            dests = [0] if self.rank != 0 else [r for r in range(1, self.size) if r not in self.dead]
            for d in dests:
                self._send((self.rank, failure.args[0]), d, TAG_ABORT)
        return failure

    def close(self) -> bool:
        """Say goodbye to the peers and stop the thread; True when every peer answered (MPI can
        then be finalised), False when some were dead or silent (do not finalise: it may hang)."""
        with self._lock:
            self._closing = True
        deadline = time.monotonic() + self.timeout_s + 1.0
        self._thread.join(max(0.0, deadline - time.monotonic()))
        clean = not self._thread.is_alive() and not self.dead
        self._stop.set()
        self._thread.join(1.0)
        if clean:
            for req in self._sends:
                req.wait()
            self._sends.clear()
            self.ctl.Free()
        return clean

    # -- the thread -----------------------------------------------------------------------------
    def _send(self, obj: Any, dest: int, tag: int) -> None:
        self._sends.append(self.ctl.isend(obj, dest, tag))

    def _loop(self) -> None:
        try:
            self._beat()
        except Exception as e:  # noqa: BLE001 - a dead thread would look like a dead rank to the others
            if self.failure is None:
                self.failure = RankFailure(self.rank, f"{self.who(self.rank)} lost contact with the "
                                                      f"other ranks: MPI error: {e}")

    def _beat(self) -> None:
        next_beat = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                self._drain(now)
                if self._closing and self._bye_step():
                    return
                if now >= next_beat and not self._said_bye:
                    for r, p in self._peers.items():
                        if not p.dead:
                            self._send(None, r, TAG_HEARTBEAT)
                    next_beat = now + self.interval_s
                self._check(now)
                self._sends = [r for r in self._sends if not r.test()[0]]
            self._stop.wait(0.02)

    def _drain(self, now: float) -> None:
        status = MPI.Status()
        while True:
            msg = self.ctl.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
            if msg is None:
                return
            payload = msg.recv()
            src, tag = status.Get_source(), status.Get_tag()
            peer = self._peers.get(src)
            if peer is not None:
                peer.last_seen = now
                if tag == TAG_BYE:
                    peer.bye = True
            if tag == TAG_ABORT:
                origin, message = payload
                if self.failure is None:
                    self.failure = RankFailure(origin, message)
                if self.rank == 0:
                    self._forward(origin, message)

    def _check(self, now: float) -> None:
        # after the launcher's failure notice: silent for 3 heartbeats since the notice is dead
        noticed = self._notice_at is not None and now - self._notice_at > 3 * self.interval_s
        limit = min(self.timeout_s, 3 * self.interval_s) if noticed else self.timeout_s
        for r, p in self._peers.items():
            if p.dead or p.bye or now - p.last_seen <= limit:
                continue
            p.dead = True
            self.dead.add(r)
            why = (f"died: mpiexec reported a process of the job ended, and it has been silent for "
                   f"{now - p.last_seen:.0f} s" if noticed and limit < self.timeout_s else
                   f"stopped responding: no sign of life for {self.timeout_s:g} s (killed, or its node is down)")
            failure = RankFailure(r, f"{self.who(r)} {why}")
            if self.failure is None:
                self.failure = failure
            if self.rank == 0:
                self._forward(r, failure.args[0])

    def _forward(self, origin: int, message: str) -> None:
        """Rank 0 passes a failure notice on to every rank but the one it is about."""
        if origin in self._forwarded:
            return
        self._forwarded.add(origin)
        for r, p in self._peers.items():
            if r != origin and not p.dead and not p.bye:
                self._send((origin, message), r, TAG_ABORT)

    def _bye_step(self) -> bool:
        """One step of the shutdown handshake; True when this rank is done."""
        if self.rank != 0:
            if not self._said_bye:
                self._send(None, 0, TAG_BYE)
                self._said_bye = True
            root = self._peers.get(0)
            return root is None or root.bye or root.dead
        if all(p.bye or p.dead for p in self._peers.values()):
            if not self._said_bye:
                for r, p in self._peers.items():
                    if not p.dead:
                        self._send(None, r, TAG_BYE)
                self._said_bye = True
            return True
        return False


class Comm:
    """A communicator (world or a sub-communicator of it) with failure-aware collectives.

    Every collective is entered by all ranks of the communicator in the same order; each call
    carries a sequence number so a message left over from a collective that was abandoned (after
    a failure) is recognised and dropped rather than taken for a newer one.
    """

    def __init__(self, comm, liveness: Liveness) -> None:
        self.data = comm.Dup()
        self.data.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank = self.data.Get_rank()
        self.size = self.data.Get_size()
        self.liveness = liveness
        self._seq = 0
        _precise_sleeps()
        # Ranks of this communicator on this node: more than its cores and polls only sleep.
        node = self.data.Split_type(MPI.COMM_TYPE_SHARED)
        self._busy_wait = node.Get_size() <= (os.cpu_count() or 1)
        node.Free()

    @property
    def failure(self) -> RankFailure | None:
        return self.liveness.failure

    def free(self) -> None:
        self.data.Free()

    # -- waiting --------------------------------------------------------------------------------
    def _check(self) -> None:
        f = self.liveness.failure
        if f is not None:
            raise RankFailure(f.rank, f.args[0])

    def _wait_request(self, req, deadline: float | None = None) -> bool:
        pause = _Backoff(self._busy_wait)
        while not req.test()[0]:
            self._check()
            if deadline is not None and time.monotonic() > deadline:
                return False
            pause()
        return True

    def _recv(self, sources: set[int], tag: int, seq: int | None, deadline: float | None = None,
              check: bool = True) -> tuple[int, Any] | None:
        """(source, payload) of the next message with this tag and sequence number from any of
        `sources`. Each source is probed on its own: messages from one rank arrive in order, but a
        fast rank's message for the next collective may arrive before a slow rank's for this one."""
        pause = _Backoff(self._busy_wait)
        while True:
            for source in sources:
                msg = self.data.improbe(source, tag)
                if msg is None:
                    continue
                got_seq, payload = msg.recv()
                if seq is None or got_seq == seq:
                    return source, payload
                if got_seq > seq:
                    raise RuntimeError(f"MPI protocol: message {got_seq} from rank {source} arrived "
                                       f"while waiting for {seq}")
                # else: left over from a collective abandoned after a failure; dropped
            if check:
                self._check()
            if deadline is not None and time.monotonic() > deadline:
                return None
            pause()

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # -- collectives (root is rank 0 of this communicator, along a binomial tree) ----------------
    def parent(self) -> int | None:
        """This rank's parent in the tree: the rank with its lowest set bit cleared (None: root)."""
        return None if self.rank == 0 else self.rank & (self.rank - 1)

    def children(self) -> list[int]:
        """This rank's children in the tree: rank + 2^k for every 2^k below its lowest set bit
        (every 2^k for the root) that is a rank of the communicator."""
        low = self.rank & -self.rank if self.rank else self.size
        out, step = [], 1
        while step < low and self.rank + step < self.size:
            out.append(self.rank + step)
            step <<= 1
        return out

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj`, in rank order, on rank 0; None on the others. Each rank sends its
        parent one message: its subtree's values, {rank: obj}."""
        seq = self._next()
        subtree = {self.rank: obj}
        pending = set(self.children())
        while pending:
            src, payload = self._recv(pending, TAG_GATHER, seq)
            subtree.update(payload)
            pending.discard(src)
        parent = self.parent()
        if parent is not None:
            self._wait_request(self.data.isend((seq, subtree), parent, TAG_GATHER))
            return None
        return [subtree[r] for r in range(self.size)]

    def bcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank: each rank takes it from its parent and passes it on."""
        seq = self._next()
        parent = self.parent()
        if parent is not None:
            obj = self._recv({parent}, TAG_BCAST, seq)[1]
        reqs = [self.data.isend((seq, obj), r, TAG_BCAST) for r in self.children()]
        for req in reqs:
            self._wait_request(req)
        return obj

    def barrier(self) -> None:
        self.gather(None)
        self.bcast(None)

    def allgather(self, obj: Any) -> list[Any]:
        return self.bcast(self.gather(obj))

    # -- point to point, for the clock exchange ----------------------------------------------------
    def send(self, obj: Any, dest: int, tag: int = TAG_CLOCK) -> None:
        self._wait_request(self.data.isend((0, obj), dest, tag))

    def recv(self, source: int, tag: int = TAG_CLOCK) -> Any:
        return self._recv({source}, tag, 0)[1]

    # -- the last exchange of a run: survives failures ----------------------------------------------
    def gather_surviving(self, obj: Any, timeout_s: float, tag: int = TAG_FINAL) -> dict[int, Any]:
        """The last exchange of a run, failed or not: rank 0 takes what arrives from the ranks
        still alive within `timeout_s` (rank -> obj); other ranks return {} after sending. Distinct
        tags keep two such exchanges of one run apart (a metadata run sends TAG_CLEANUP when a
        rank's clean-up is done, then TAG_FINAL with its results)."""
        deadline = time.monotonic() + timeout_s
        if self.rank != 0:
            req = self.data.isend((0, obj), 0, tag)
            while not req.test()[0] and time.monotonic() < deadline and 0 not in self.liveness.dead:
                time.sleep(_MAX_SLEEP_S)
            return {}
        out = {0: obj}
        waiting = set(range(1, self.size))
        while waiting - self.liveness.dead and time.monotonic() < deadline:
            got = self._recv(waiting - self.liveness.dead, tag, 0,
                             deadline=min(deadline, time.monotonic() + 0.1), check=False)
            if got is not None:
                out[got[0]] = got[1]
                waiting.discard(got[0])
        return out
