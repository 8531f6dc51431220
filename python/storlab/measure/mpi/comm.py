"""The communicator storlab's MPI runs talk through: tree-shaped collectives rooted at rank 0 that
never wait without watching for failures, and a liveness thread that notices a rank that raised,
was killed or lost its node, so every rank ends within `rank_timeout` instead of hanging.

Why not MPI's own collectives: a blocking MPI_Barrier or MPI_Gather waits forever for a dead
rank, and the non-blocking ones cannot be cancelled. Here each collective is point-to-point
messages along a binomial tree (rank r's parent is r with its lowest set bit cleared; its children
are r + 1, r + 2, r + 4 ... below that bit), polled together with the liveness state: a gather
climbs the tree, each rank passing on its subtree's values in one message, a reduce does the
same with values merged on the way (one message of constant size per rank), and a broadcast
descends it. No rank handles more than log2(size) messages per collective, and a collective
takes 2 log2(size) message latencies at most (a barrier is a gather then a broadcast), so 10,000
ranks cost about 14 hops per direction instead of 9,999 messages at rank 0.

Liveness: every rank exchanges heartbeats with its tree neighbours (parent and children, at most
about log2(size) + 1 of them) on a private duplicate of the world communicator, from a thread of
its own, so they go on while the main thread builds a plan (laying out large files can take
minutes) or runs a phase. A neighbour silent for `rank_timeout` is gone; a rank whose own run
failed, or that saw a neighbour go, sends a failure notice to its living neighbours, and each
passes it on to its own once: the notice floods the tree in log2(size) hops, and no rank sends
more than its neighbours' count of messages for it. The tree heals around a gone rank (tree.py),
so the final gather still reaches every living rank. Shutdown is an orderly BYE exchange up the
tree and back down, so no message is left unmatched when MPI is finalised.

Signals: a wait polls, so it also watches the stop flag (signals.STOP). A waiting main thread is
interrupted by the signal itself; a wait where the signal cannot raise (another thread, a
section that holds signals) gives up once the stop is older than `rank_timeout` and the others
have still not come, and tells them this rank failed, so SIGTERM ends a rank stuck waiting.

This is the one module that imports mpi4py (ranks.py, the rank interface's MPI side, loads it
through here): the orchestrator and the commands reach MPI's world, node name and library
through the functions at the end.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from mpi4py import MPI

from ...signals import STOP
from ..ranks import RankFailure
from . import tree

__all__ = ["RankFailure", "Liveness", "Comm", "GroupComm", "world", "world_size", "processor_name",
           "library_version", "split_first"]

# Tags on the private control communicator (liveness thread) ...
TAG_HEARTBEAT, TAG_ABORT, TAG_BYE = 1, 2, 3
# ... and on the data communicator (main thread).
TAG_GATHER, TAG_BCAST, TAG_CLOCK, TAG_FINAL, TAG_CLEANUP = 10, 11, 12, 13, 14
TAG_LIVE = 15   # live figures to rank 0 (live.py): one-way, outside any collective
# A group of ranks (Comm.split) sends the same tags shifted into a block of its own: split number
# n (agreed by its members, see Comm.split) adds 100 + 16 n, so a group's messages never match
# the whole's, nor those of another group that shares a rank with it. MPI guarantees tags up to
# 32767: about 2,000 splits in one run.
_GROUP_TAG_BASE = 100
_GROUP_TAG_STRIDE = 16
_TAG_MAX = 32767

# Polling: a few busy polls first (a barrier released while a rank sleeps starts that rank late by
# the sleep), then polls that yield the CPU to any other runnable thread (ranks oversubscribing the
# cores, the engine's threads), then sleeps growing from 20 us to 200 us. Long spinning is worse:
# ranks sharing cores take the CPU from the very work they wait for.
_SPINS = 50
_YIELDS = 200
_MIN_SLEEP_S = 20e-6
_MAX_SLEEP_S = 200e-6
# The liveness thread looks for messages this often (a failure notice crosses one tree level per
# look), and more often while the goodbyes go up and down the tree at the end. Each look wakes
# the process: with many ranks per core, looking more often takes CPU from the measured I/O. So
# where every neighbour shares this node and ranks outnumber its cores, the thread sleeps on a
# doorbell of its own instead: neighbours ring it when they send it a control message, and it
# wakes by itself only for its next heartbeat.
_LIVENESS_POLL_S = 0.05
_CLOSING_POLL_S = 0.005
# A rank waiting on its doorbell (ranks outnumber cores) wakes at least this often, for rings it
# may have missed (its liveness thread rings it when a failure is noticed, so a failure does not
# wait for this).
_BELL_TIMEOUT_S = 0.1
# MPI shows a message that has arrived one probe late: a probe looks at what MPI has already
# matched, then lets MPI make progress, which takes the new message in. So after a ring (and on
# entering a wait) a few probe rounds run back to back before any sleep. Measured at 64 ranks on 2
# cores: of 23,500 messages received after a ring, 2,031 showed at the first round after it,
# 21,324 at the second, 158 at the third or fourth. Without them each such message waited for
# the next ring or the bell's timeout.
_QUICK_ROUNDS = 3
_RUNG_POLLS = 5


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


class _Doorbell:
    """Waiting without polling where ranks outnumber the node's cores: each rank of a communicator
    on this node has a datagram socket (Linux abstract names, nothing on disk), and a rank that
    sends a message to a rank of the same node rings that rank's bell after the send. A waiting
    rank sleeps in the kernel until its bell rings (or a timeout, to watch for failures), so the
    ranks still working get the cores instead of ranks polling for messages that have not come.
    A ring is only a hint: the waiter probes MPI again, and a ring for a later message costs one
    extra probe. MPI's own blocking calls (MPICH's included) spin instead, which on a shared core
    takes the CPU from the very rank being waited for."""

    def __init__(self, node, rank: int) -> None:
        """Collective over `node` (the communicator's ranks on this node)."""
        import socket
        import uuid

        token = node.bcast(uuid.uuid4().hex if node.Get_rank() == 0 else None)
        self.local = set(node.allgather(rank))      # ranks of the communicator on this node
        self._name = lambda r: f"\0storlab-{token}-{r}".encode()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind(self._name(rank))
        self.rings = 0

    def ring(self, dest: int) -> None:
        if dest in self.local:
            try:
                self.sock.sendto(b"!", self._name(dest))
                self.rings += 1
            except OSError:
                pass   # its queue is full (it has rings to read already) or it is gone

    def wait(self, timeout_s: float) -> bool:
        """Sleep until a ring or the timeout; True when rung."""
        import select

        rung = False
        if select.select([self.sock], [], [], timeout_s)[0]:
            try:
                while self.sock.recv(64):
                    rung = True
            except OSError:
                pass
        return rung

    def close(self) -> None:
        self.sock.close()


@dataclass
class _Peer:
    last_seen: float          # time.monotonic() of the last message from it
    bye: bool = False         # it has said goodbye: nothing more will come from it
    sent_bye: bool = False    # this rank has said goodbye to it: nothing more goes to it
    dead: bool = False        # gone (stopped responding)


class Liveness:
    """Heartbeats and failure notices between each rank and its tree neighbours (see the module doc)."""

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
        self.gone: set[int] = set()         # ranks that stopped responding (seen here or told)
        self.messages_sent = 0              # control messages this rank sent (heartbeats, notices)
        self._lock = threading.Lock()
        self._peers: dict[int, _Peer] = {}
        self._rewire(time.monotonic())
        self._sends: list[Any] = []
        self._forwarded: set[tuple[int, bool]] = set()
        self._closing = False
        self._stop = threading.Event()
        # set by the world's Comm where ranks outnumber cores: the thread's own doorbell, and the
        # doorbells of the main thread's waits, rung when a failure is noticed
        self.bell: _Doorbell | None = None
        self.wakers: list[Callable[[], None]] = []
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
        """The launcher's notice that a process of the job died: a time is set and the thread woken."""
        self._notice_at = time.monotonic()
        self._wake()

    def _wake(self) -> None:
        """Wake the thread from its doorbell (when it sleeps on one)."""
        if self.bell is not None:
            self.bell.ring(self.rank)

    def _set_failure(self, failure: RankFailure) -> None:
        """The first failure this rank knows of; wakes the main thread's waits at once."""
        if self.failure is None:
            self.failure = failure
            for wake in self.wakers:
                wake()

    # -- called from the main thread ------------------------------------------------------------
    def who(self, rank: int) -> str:
        return f"rank {rank} (node {self.nodes[rank]})"

    def report(self, message: str) -> RankFailure:
        """This rank failed: tell everyone (along the tree) and return the failure."""
        failure = RankFailure(self.rank, f"{self.who(self.rank)} failed: {message}")
        with self._lock:
            if self.failure is None:
                self.failure = failure
            self._flood(self.rank, failure.args[0], False, None)
        self._wake()
        return failure

    def close(self) -> bool:
        """Say goodbye along the tree and stop the thread; True when the handshake ended and no rank
        is gone (MPI can then be finalised), False otherwise (do not finalise: it may hang)."""
        with self._lock:
            self._closing = True
        self._wake()
        deadline = time.monotonic() + self.timeout_s + 1.0
        self._thread.join(max(0.0, deadline - time.monotonic()))
        clean = not self._thread.is_alive() and not self.gone
        self._stop.set()
        self._wake()
        self._thread.join(1.0)
        if self.bell is not None and not self._thread.is_alive():
            self.bell.close()
            self.bell = None
        if clean:
            for req, _ in self._sends:
                req.wait()
            self._sends.clear()
            self.ctl.Free()
        else:   # deliver the goodbyes to the living (the process may exit at once), not to the gone
            flush_until = time.monotonic() + 1.0
            pending = [req for req, dest in self._sends if dest not in self.gone]
            while pending and time.monotonic() < flush_until:
                pending = [req for req in pending if not req.test()[0]]
                time.sleep(_MAX_SLEEP_S)
        return clean

    def watched(self) -> int:
        """How many ranks this rank exchanges heartbeats with (its living tree neighbours)."""
        with self._lock:
            return sum(1 for p in self._peers.values() if not p.dead)

    # -- the thread -----------------------------------------------------------------------------
    def _rewire(self, now: float) -> None:
        """Watch the living tree neighbours (the tree heals around gone ranks: tree.py)."""
        for r in tree.neighbours(self.rank, self.size, self.gone):
            if r not in self._peers:
                self._peers[r] = _Peer(now)

    def _live_peers(self) -> list[int]:
        """Neighbours that still take messages from this rank: not gone, not sent goodbye."""
        return [r for r, p in self._peers.items() if not p.dead and not p.sent_bye]

    def _send(self, obj: Any, dest: int, tag: int) -> None:
        self.messages_sent += 1
        self._sends.append((self.ctl.isend(obj, dest, tag), dest))
        if self.bell is not None:
            self.bell.ring(dest)

    def _sleep_on_bell(self) -> bool:
        """True when the thread may sleep on its doorbell until its next heartbeat: it has one,
        and every neighbour it hears from rings it (shares this node)."""
        return self.bell is not None and all(r in self.bell.local for r in self._peers)

    def _loop(self) -> None:
        try:
            self._beat()
        except Exception as e:  # noqa: BLE001 - a dead thread would look like a dead rank to the others
            self._set_failure(RankFailure(self.rank, f"{self.who(self.rank)} lost contact with the "
                                                     f"other ranks: MPI error: {e}"))

    def _beat(self) -> None:
        next_beat = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                self._drain(now)
                if self._closing and self._bye_step():
                    return
                if now >= next_beat:
                    for r in self._live_peers():
                        self._send(None, r, TAG_HEARTBEAT)
                    next_beat = now + self.interval_s
                self._check(now)
                self._sends = [(req, dest) for req, dest in self._sends if not req.test()[0]]
                on_bell = self._sleep_on_bell() and not self._sends
            if on_bell:
                # until a neighbour's message (rung), a wake from this process, or the next beat
                self.bell.wait(max(0.0, min(next_beat - time.monotonic(), self.interval_s)))
            else:
                self._stop.wait(_CLOSING_POLL_S if self._closing else _LIVENESS_POLL_S)

    def _drain(self, now: float) -> None:
        status = MPI.Status()
        second_look = True   # a message that has just arrived shows one probe late (see Comm._recv)
        while True:
            msg = self.ctl.improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
            if msg is None:
                if second_look:
                    second_look = False
                    continue
                return
            payload = msg.recv()
            src, tag = status.Get_source(), status.Get_tag()
            peer = self._peers.get(src)
            if peer is not None:
                peer.last_seen = now
                if tag == TAG_BYE:
                    peer.bye = True
            if tag == TAG_ABORT:
                origin, message, gone = payload
                self._set_failure(RankFailure(origin, message))
                self._flood(origin, message, gone, src)

    def _check(self, now: float) -> None:
        # after the launcher's failure notice: silent for 3 heartbeats since the notice is dead
        noticed = self._notice_at is not None and now - self._notice_at > 3 * self.interval_s
        limit = min(self.timeout_s, 3 * self.interval_s) if noticed else self.timeout_s
        for r, p in list(self._peers.items()):
            if p.dead or p.bye or now - p.last_seen <= limit:
                continue
            why = (f"died: mpiexec reported a process of the job ended, and it has been silent for "
                   f"{now - p.last_seen:.0f} s" if noticed and limit < self.timeout_s else
                   f"stopped responding: no sign of life for {self.timeout_s:g} s (killed, or its node is down)")
            message = f"{self.who(r)} {why}"
            self._set_failure(RankFailure(r, message))
            self._flood(r, message, True, None)

    def _flood(self, origin: int, message: str, gone: bool, src: int | None) -> None:
        """Pass a failure notice on to every living neighbour but the one it came from, once per
        rank and kind; a gone rank is left out of the tree from now on."""
        if (origin, gone) in self._forwarded:
            return
        self._forwarded.add((origin, gone))
        if gone and origin != self.rank:
            self.gone.add(origin)
            if origin in self._peers:
                self._peers[origin].dead = True
            self._rewire(time.monotonic())
        for r in self._live_peers():
            if r != src and r != origin:
                self._send((origin, message, gone), r, TAG_ABORT)

    def _bye_step(self) -> bool:
        """One step of the shutdown handshake, up the tree then down; True when this rank is done.
        A rank says goodbye to its parent once every child has said it, and to its children once
        its parent has (the root: once its children have)."""
        up = tree.living_parent(self.rank, self.gone)
        kids = [r for r in tree.living_children(self.rank, self.size, self.gone)]
        if not all(self._peers[r].bye or self._peers[r].dead for r in kids):
            return False
        if up is not None:
            p = self._peers[up]
            if not p.sent_bye and not p.dead:
                self._send(None, up, TAG_BYE)
                p.sent_bye = True
            if not (p.bye or p.dead):
                return False
        for r in kids:
            p = self._peers[r]
            if not p.dead and not p.sent_bye:
                self._send(None, r, TAG_BYE)
                p.sent_bye = True
        return True


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
        self._stop_seen: float | None = None   # when a wait first saw a stop signal
        # called at every poll of a wait for a message (rank 0's live figures go on: live.py)
        self.while_waiting: Callable[[], None] | None = None
        self.collectives = 0      # tree sweeps (a gather or a broadcast) this rank took part in
        self.messages_sent = 0    # data messages this rank sent in them
        # This communicator's ranks in the world (liveness knows gone ranks by their world rank).
        self._world_rank = MPI.Group.Translate_ranks(self.data.Get_group(), list(range(self.size)),
                                                     MPI.COMM_WORLD.Get_group())
        _precise_sleeps()
        # Ranks of this communicator on this node: more than its cores and polls only sleep.
        node = self.data.Split_type(MPI.COMM_TYPE_SHARED)
        self._busy_wait = node.Get_size() <= (os.cpu_count() or 1)
        self._bell: _Doorbell | None = None
        if not self._busy_wait and os.environ.get("STORLAB_MPI_DOORBELL", "1") != "0":
            try:
                self._bell = _Doorbell(node, self.rank)
                # the world's communicator also gives the liveness thread its bell (its ranks
                # are the world's)
                if liveness.bell is None and self.size == liveness.size:
                    liveness.bell = _Doorbell(node, self.rank)
            except OSError:
                self._bell = None   # no abstract sockets (not Linux): sleeping polls
        node.Free()
        if self._bell is not None:
            bell, me = self._bell, self.rank
            self._waker = lambda: bell.ring(me)
            liveness.wakers.append(self._waker)

    @property
    def failure(self) -> RankFailure | None:
        return self.liveness.failure

    def free(self) -> None:
        if self._bell is not None:
            self.liveness.wakers.remove(self._waker)
            self._bell.close()
        self.data.Free()

    def _isend(self, obj: Any, dest: int, tag: int, synchronous: bool = False):
        """Send, then ring the destination's doorbell (when ranks share cores)."""
        req = (self.data.issend if synchronous else self.data.isend)(obj, dest, tag)
        self.messages_sent += 1
        if self._bell is not None:
            self._bell.ring(dest)
        return req

    # -- waiting --------------------------------------------------------------------------------
    def _check(self, started: float) -> None:
        """Raise when a rank failed, or when a stop signal (signals.STOP) is older than the rank
        timeout and this wait, begun at `started`, has still not ended: this rank then tells the
        others it failed (see the module doc)."""
        f = self.liveness.failure
        if f is not None:
            raise RankFailure(f.rank, f.args[0])
        if STOP.requested:
            now = time.monotonic()
            if self._stop_seen is None:
                self._stop_seen = now
            waited = now - max(started, self._stop_seen)
            if waited > self.liveness.timeout_s:
                raise self.liveness.report(f"interrupted by {STOP.signal_name}, and the other ranks did not "
                                           f"come within {self.liveness.timeout_s:g} s")

    def _wait_request(self, req, deadline: float | None = None) -> bool:
        pause = _Backoff(self._busy_wait)
        started = time.monotonic()
        while not req.test()[0]:
            self._check(started)
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
        quick, rung = _QUICK_ROUNDS, 0
        started = time.monotonic()
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
                self._check(started)
            if self.while_waiting is not None:
                self.while_waiting()
            now = time.monotonic() if deadline is not None else 0.0
            if deadline is not None and now > deadline:
                return None
            if quick > 0:           # a message may have arrived already: probe again at once
                quick -= 1
                continue
            if self._bell is not None and sources <= self._bell.local and rung <= 0:
                # until a sender rings (or its liveness thread, on a failure); after a ring, probe
                # at once (quick rounds), then a few paced polls before sleeping again
                wait_s = _BELL_TIMEOUT_S if deadline is None else max(0.0, min(_BELL_TIMEOUT_S, deadline - now))
                if self._bell.wait(wait_s):
                    quick, rung = _QUICK_ROUNDS, _RUNG_POLLS
            else:
                rung -= 1
                pause()

    def _next(self) -> int:
        """The next collective's sequence number; a failure already known raises here, so a rank
        that failed (or heard of a failure) adds nothing to a collective the others would finish
        without it: every rank's next collective raises."""
        self._check(time.monotonic())
        self.collectives += 1
        self._seq += 1
        return self._seq

    # -- collectives (root is rank 0 of this communicator, along a binomial tree) ----------------
    def parent(self) -> int | None:
        """This rank's parent in the tree (tree.py; None: the root)."""
        return tree.parent(self.rank)

    def children(self) -> list[int]:
        """This rank's children in the tree (tree.py)."""
        return tree.children(self.rank, self.size)

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
            self._wait_request(self._isend((seq, subtree), parent, TAG_GATHER))
            return None
        return [subtree[r] for r in range(self.size)]

    def bcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank: each rank takes it from its parent and passes it on."""
        seq = self._next()
        parent = self.parent()
        if parent is not None:
            obj = self._recv({parent}, TAG_BCAST, seq)[1]
        # the largest subtree first: its path to its deepest rank is the longest
        reqs = [self._isend((seq, obj), r, TAG_BCAST) for r in reversed(self.children())]
        for req in reqs:
            self._wait_request(req)
        return obj

    def reduce(self, obj: Any, merge: Callable[[Any, Any], Any]) -> Any:
        """`obj` of every rank combined with `merge` on rank 0 (None on the others): each rank
        merges its children's partial results into its own and sends its parent one message of
        the same size, whatever the number of ranks below it. `merge` must be associative and
        commutative (a min, a max, a histogram's buckets added)."""
        seq = self._next()
        pending = set(self.children())
        while pending:
            src, payload = self._recv(pending, TAG_GATHER, seq)
            obj = merge(obj, payload)
            pending.discard(src)
        parent = self.parent()
        if parent is not None:
            self._wait_request(self._isend((seq, obj), parent, TAG_GATHER))
            return None
        return obj

    def barrier(self) -> None:
        self.gather(None)
        self.bcast(None)

    def allgather(self, obj: Any) -> list[Any]:
        return self.bcast(self.gather(obj))

    # -- groups of ranks ---------------------------------------------------------------------------
    def split(self, colour: str) -> "GroupComm":
        """The group of the ranks of this communicator that give the same `colour`, ranked in
        their order here (MPI_Comm_split with key = rank); collective over this communicator.

        No MPI collective is called (MPI_Comm_split and MPI_Comm_dup wait for ever for a dead
        rank): the colours are exchanged with this communicator's failure-aware allgather, and
        the group talks over the world's data communicator with its ranks translated and its
        tags shifted into a block of its own. The block's number is one more than the highest
        split any member has taken part in, so two groups that share a rank never share tags."""
        count = getattr(self.liveness, "splits", 0)
        got = self.allgather((colour, count))
        number = max(c for _, c in got) + 1
        if _GROUP_TAG_BASE + _GROUP_TAG_STRIDE * number + TAG_LIVE > _TAG_MAX:
            raise RuntimeError(f"MPI: more than {number - 1} splits of the ranks in one run: no tags left")
        self.liveness.splits = number
        members = [r for r, (c, _) in enumerate(got) if c == colour]
        return GroupComm(self, members, number)

    # -- point to point, for the clock exchange ----------------------------------------------------
    def send(self, obj: Any, dest: int, tag: int = TAG_CLOCK) -> None:
        self._wait_request(self._isend((0, obj), dest, tag))

    def recv(self, source: int, tag: int = TAG_CLOCK) -> Any:
        return self._recv({source}, tag, 0)[1]

    # -- one-way messages, for live figures (live.py) ----------------------------------------------
    def post(self, obj: Any, dest: int, tag: int):
        """Send without waiting; the caller tests the returned request."""
        return self._isend((0, obj), dest, tag)

    def take_all(self, tag: int) -> list[tuple[int, Any]]:
        """(source, payload) of every message with `tag` that has arrived, without waiting (two
        rounds of probes: a message that has just arrived shows one probe late, see `_recv`)."""
        got = []
        status = MPI.Status()
        for _ in range(2):
            while (msg := self.data.improbe(MPI.ANY_SOURCE, tag, status)) is not None:
                got.append((status.Get_source(), msg.recv()[1]))
        return got

    # -- the last exchange of a run: survives failures ----------------------------------------------
    def gone(self) -> set[int]:
        """Ranks of this communicator that stopped responding, as far as this rank knows."""
        gone = self.liveness.gone
        return {r for r in range(self.size) if self._world_rank[r] in gone}

    def gather_surviving(self, obj: Any, timeout_s: float, tag: int = TAG_FINAL) -> dict[int, Any]:
        """The last exchange of a run, failed or not: rank 0 gets rank -> obj of every rank still
        alive, along the tree healed around gone ranks (tree.py): each rank waits for its living
        children's subtrees and sends its own up to its nearest living ancestor in one message.
        A rank waits at most `timeout_s` plus a second per level below it (so its parent, a level
        higher, waits longer than it does) and then sends what it has; other ranks return {}.
        Distinct tags keep two such exchanges of one run apart (a metadata run sends TAG_CLEANUP
        when a rank's clean-up is done, then TAG_FINAL with its results)."""
        start = time.monotonic()
        deadline = start + timeout_s + tree.height(self.rank, self.size)
        got = {self.rank: obj}
        heard: set[int] = set()
        while time.monotonic() < deadline:
            gone = self.gone()
            waiting = set(tree.living_children(self.rank, self.size, gone, heard))
            if not waiting:
                break
            msg = self._recv(waiting, tag, 0, deadline=min(deadline, time.monotonic() + 0.1), check=False)
            if msg is not None:
                got.update(msg[1])
                heard.add(msg[0])
        if self.rank == 0:
            return got
        # A synchronous send completes only when the parent has taken it: a parent that went
        # silent after this rank's last look is noticed, and the subtree goes to the next one up.
        pause = _Backoff(self._busy_wait)
        up, req = None, None
        while time.monotonic() < deadline + 1.0:
            living = tree.living_parent(self.rank, self.gone())
            if living is None:
                break
            if living != up:
                up, req = living, self._isend((0, got), living, tag, synchronous=True)
            if req.test()[0]:
                break
            pause()
        return {}


class _GroupData:
    """The world's data communicator as a group sees it: the group's ranks translated to the
    world's and its tags shifted into the group's block (Comm.split)."""

    def __init__(self, data, to_base: list[int], tag_offset: int) -> None:
        self.base, self.to_base, self.tag_offset = data, to_base, tag_offset

    def improbe(self, source: int, tag: int, status=None):
        return self.base.improbe(self.to_base[source], tag + self.tag_offset, status)

    def isend(self, obj: Any, dest: int, tag: int):
        return self.base.isend(obj, self.to_base[dest], tag + self.tag_offset)

    def issend(self, obj: Any, dest: int, tag: int):
        return self.base.issend(obj, self.to_base[dest], tag + self.tag_offset)


class _GroupBell:
    """The world's doorbells as a group sees them: rung and listed by group rank."""

    def __init__(self, bell: _Doorbell, to_base: list[int]) -> None:
        self.bell, self.to_base = bell, to_base
        self.local = {g for g, b in enumerate(to_base) if b in bell.local}

    def ring(self, dest: int) -> None:
        self.bell.ring(self.to_base[dest])

    def wait(self, timeout_s: float) -> bool:
        return self.bell.wait(timeout_s)


class GroupComm(Comm):
    """A group of the ranks of a communicator (Comm.split): the same failure-aware collectives,
    rooted at the group's rank 0, over the world's data communicator (`_GroupData`). Liveness is
    the world's: a rank that fails anywhere ends every group's next collective, named."""

    def __init__(self, parent: Comm, members: list[int], number: int) -> None:
        base = parent.base if isinstance(parent, GroupComm) else parent
        to_base = [parent.to_base[m] for m in members] if isinstance(parent, GroupComm) else list(members)
        self.base, self.to_base, self.number = base, to_base, number
        self.data = _GroupData(base.data, to_base, _GROUP_TAG_BASE + _GROUP_TAG_STRIDE * number)
        self.rank, self.size = members.index(parent.rank), len(members)
        self.liveness = parent.liveness
        self._seq = 0
        self._stop_seen = None
        self.while_waiting = None
        self.collectives = 0
        self.messages_sent = 0
        self._world_rank = [base._world_rank[b] for b in to_base]
        self._busy_wait = base._busy_wait
        self._bell = None if base._bell is None else _GroupBell(base._bell, to_base)

    def free(self) -> None:
        """Nothing of its own to free: it talks over the world's communicator."""

    def take_all(self, tag: int) -> list[tuple[int, Any]]:
        """(group rank, payload) of every message with `tag` from the group that has arrived."""
        got = []
        for g in range(self.size):
            for _ in range(2):      # a message that has just arrived shows one probe late
                while (msg := self.data.improbe(g, tag)) is not None:
                    got.append((g, msg.recv()[1]))
        return got


# -- MPI itself, for the orchestrator and the commands (no other module imports mpi4py) ----------
def world():
    """MPI's world communicator."""
    return MPI.COMM_WORLD


def world_size() -> int:
    """Ranks in the launch, as MPI counts them."""
    return MPI.COMM_WORLD.Get_size()


def processor_name() -> str:
    """This rank's node name: $STORLAB_NODE_NAME where set (containers that all carry one host
    name; docs/mpi.md), else as MPI names it. Ranks with one name are taken to share a clock."""
    return os.environ.get("STORLAB_NODE_NAME") or MPI.Get_processor_name()


def library_version() -> str:
    """The MPI library's first line of version text (MPICH, Open MPI ...)."""
    return MPI.Get_library_version().strip().splitlines()[0]


def split_first(comm, n: int):
    """The communicator of ranks 0 .. n-1 of `comm` (collective over `comm`); None on the others."""
    rank = comm.Get_rank()
    sub = comm.Split(0 if rank < n else MPI.UNDEFINED, rank)
    return None if sub == MPI.COMM_NULL else sub
