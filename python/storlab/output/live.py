"""Live figures of a running `storlab run` or `scale`: every rank's latest progress, combined into
the live line on standard error (`--live`) and the OpenMetrics endpoint a Prometheus server
scrapes (`--metrics-listen`). docs/live.md describes both.

A rank's report carries only its own counters and the seconds since its own phase started
(measure/mpi/live.py sends them to rank 0; a one-process run reports through the runner's
progress callback), so rates are each rank's own bytes over its own elapsed time and no wall
clock of one host is compared with another's. Shown: the combined rate (the sum of the running
ranks' rates over their last report), IOPS, ranks done of all, and the slowest node (the slowest
rank when every rank runs on one node).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TextIO

from ..units import format_rate
from .openmetrics import Family, job_name, render
from .progress import wants_progress

__all__ = ["RankFigures", "LiveSummary", "LiveFigures", "LiveLine", "MetricsServer", "live_figures",
           "PLAIN_EVERY_S", "CONTENT_TYPE"]

PLAIN_EVERY_S = 1.0   # a plain live line (no terminal, or NO_COLOR) is printed at most this often
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass
class RankFigures:
    """One rank's latest report in the current phase; rates over the interval since its previous
    report, in its own elapsed time."""
    rank: int
    node: str
    phase_index: int
    phase: str
    bytes: int
    ops: int
    elapsed_s: float
    done: bool
    bw_bytes: float = 0.0
    iops: float = 0.0


@dataclass(frozen=True)
class LiveSummary:
    """What the live line shows and the endpoint serves: the current phase over every rank."""
    phase: str
    elapsed_s: float                     # the longest any rank has been in the phase
    bw_bytes: float                      # combined rate of the ranks still running
    iops: float
    bytes: int                           # moved so far in the phase, every rank
    ranks: int
    ranks_done: int
    by_node: dict[str, tuple[float, float, int]]   # node -> (bw_bytes, iops, bytes) of its running ranks
    slowest: tuple[str, float] | None    # ("node n2" / "rank 3", its rate), among two or more running


class LiveFigures:
    """Every rank's latest figures (thread-safe: the endpoint reads them from its own thread), the
    live line that shows them and the endpoint that serves them."""

    def __init__(self, line: "LiveLine | None" = None, server: "MetricsServer | None" = None,
                 labels: Mapping[str, str] | None = None) -> None:
        self.line = line
        self.server = server
        self.labels = dict(labels or {})     # job, target, host: the endpoint's labels
        self._lock = threading.Lock()
        self._nodes: list[str] = [self.labels.get("host", "")]
        self._ranks: dict[int, RankFigures] = {}
        self._one_process_phase: tuple[int, str] | None = None
        if server is not None:
            server.serve(self)

    # -- what the ranks report ------------------------------------------------------------------
    def start(self, nodes: Sequence[str]) -> None:
        """A run on len(nodes) ranks begins (each rank count of `storlab scale` is one)."""
        with self._lock:
            self._nodes = list(nodes)
            self._ranks.clear()

    def report(self, rank: int, phase_index: int, phase: str, nbytes: int, ops: int, elapsed_s: float,
               done: bool) -> None:
        """Rank `rank`'s counters in phase `phase_index` (named `phase`), `elapsed_s` after it
        started on that rank's clock; an older phase's late report is dropped."""
        with self._lock:
            prev = self._ranks.get(rank)
            if prev is not None and phase_index < prev.phase_index:
                return
            node = self._nodes[rank] if rank < len(self._nodes) else "?"
            now = RankFigures(rank, node, phase_index, phase, nbytes, ops, elapsed_s, done)
            same = prev is not None and prev.phase_index == phase_index
            base = (prev.bytes, prev.ops, prev.elapsed_s) if same else (0, 0, 0.0)
            dt = elapsed_s - base[2]
            if dt > 0:
                now.bw_bytes, now.iops = (nbytes - base[0]) / dt, (ops - base[1]) / dt
            elif same:
                now.bw_bytes, now.iops = prev.bw_bytes, prev.iops
            self._ranks[rank] = now

    def __call__(self, phase: str, done_bytes: int, done_ops: int, elapsed: float) -> None:
        """The runner's progress callback in a one-process run: rank 0's report (a new phase when
        the name changes or the counters start again)."""
        last = self._one_process_phase
        prev = self._ranks.get(0)
        index = 0 if last is None else last[0]
        if last is not None and (last[1] != phase or (prev is not None and done_ops < prev.ops)):
            index += 1
        self._one_process_phase = (index, phase)
        self.report(0, index, phase, done_bytes, done_ops, elapsed, False)
        self.refresh()

    def refresh(self) -> None:
        """Redraw the line with the reports so far."""
        if self.line is not None:
            self.line.show(self.summary())

    # -- what is shown --------------------------------------------------------------------------
    def summary(self) -> LiveSummary | None:
        """The current phase (the latest any rank reported) over every rank; None before any report."""
        with self._lock:
            figures = list(self._ranks.values())
            size = max(len(self._nodes), len(figures))
        if not figures:
            return None
        current = max(f.phase_index for f in figures)
        here = [f for f in figures if f.phase_index == current]
        running = [f for f in here if not f.done]
        by_node: dict[str, tuple[float, float, int]] = {}
        for f in here:
            bw, iops, nbytes = by_node.get(f.node, (0.0, 0.0, 0))
            by_node[f.node] = (bw + (0.0 if f.done else f.bw_bytes), iops + (0.0 if f.done else f.iops),
                               nbytes + f.bytes)
        slowest = None
        running_nodes = {f.node for f in running}
        if len(running_nodes) > 1:
            node = min(running_nodes, key=lambda n: by_node[n][0])
            slowest = (f"node {node}", by_node[node][0])
        elif len(running) > 1:
            f = min(running, key=lambda x: x.bw_bytes)
            slowest = (f"rank {f.rank}", f.bw_bytes)
        return LiveSummary(phase=here[0].phase, elapsed_s=max(f.elapsed_s for f in here),
                           bw_bytes=sum(f.bw_bytes for f in running), iops=sum(f.iops for f in running),
                           bytes=sum(f.bytes for f in here), ranks=size,
                           ranks_done=sum(1 for f in here if f.done), by_node=by_node, slowest=slowest)

    def families(self) -> list[Family]:
        """The figures as OpenMetrics families (labels host, target, job, phase)."""
        s = self.summary()
        fams = [
            Family("storlab_live_bandwidth_bytes_per_second", "gauge", "bytes_per_second",
                   "bytes per second of one host's running ranks over their last report"),
            Family("storlab_live_iops", "gauge", "", "requests per second of one host's running ranks"),
            Family("storlab_live_io_bytes", "counter", "bytes", "bytes one host's ranks moved so far in the phase"),
            Family("storlab_live_ranks", "gauge", "", "ranks in the run"),
            Family("storlab_live_ranks_done", "gauge", "", "ranks that finished the phase"),
            Family("storlab_live_elapsed_seconds", "gauge", "seconds", "the longest any rank has been in the phase"),
        ]
        if s is None:
            return fams
        base = {"job": self.labels.get("job", ""), "target": self.labels.get("target", ""), "phase": s.phase}
        for node, (bw, iops, nbytes) in s.by_node.items():
            labels = {"host": node, **base}
            fams[0].add(labels, bw)
            fams[1].add(labels, iops)
            fams[2].add(labels, nbytes, suffix="_total")
        labels = {"host": self.labels.get("host", ""), **base}
        fams[3].add(labels, s.ranks)
        fams[4].add(labels, s.ranks_done)
        fams[5].add(labels, s.elapsed_s)
        return fams

    def finish(self) -> None:
        """The run ended: clear the line and stop serving."""
        if self.line is not None:
            self.line.finish()
        if self.server is not None:
            self.server.close()


class LiveLine:
    """The live line on standard error: redrawn in place on a terminal, else (forced with
    `--live on`) a plain line at most once every PLAIN_EVERY_S."""

    def __init__(self, stream: TextIO, plain: bool) -> None:
        self.stream = stream
        self.plain = plain
        self.shown = False
        self._last_plain = 0.0

    def show(self, s: LiveSummary | None) -> None:
        if s is None:
            return
        if self.plain:
            now = time.monotonic()
            if now - self._last_plain < PLAIN_EVERY_S:
                return
            self._last_plain = now
        text = (f"{s.phase}: {s.elapsed_s:6.1f} s  {format_rate(s.bw_bytes):>12}  {s.iops:12,.0f} IOPS"
                f"  ranks done {s.ranks_done}/{s.ranks}")
        if s.slowest is not None:
            text += f"  slowest {s.slowest[0]} {format_rate(s.slowest[1])}"
        self.stream.write(f"live {text}\n" if self.plain else f"\r\x1b[K{text}")
        self.stream.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown and not self.plain:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


class MetricsServer:
    """An HTTP endpoint serving the live figures as OpenMetrics text at /metrics (and /), from a
    thread of its own. Made (and bound) before the run, so a busy port is an error before anything
    runs; it answers from `serve` on."""

    def __init__(self, listen: str) -> None:
        import socket
        from http.server import ThreadingHTTPServer

        from ..errors import UserError
        from ..jobs.listen import split_listen

        host, port = split_listen(listen)

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            daemon_threads = True

        try:
            self.httpd = Server((host, port), _handler(self))
        except OSError as e:
            raise UserError(f"metrics_listen: cannot listen on {listen}: {e.strerror or e}") from None
        bound = self.httpd.server_address[1]
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/metrics"
        self.figures: LiveFigures | None = None
        self._thread: threading.Thread | None = None

    def serve(self, figures: LiveFigures) -> None:
        self.figures = figures
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="storlab-metrics", daemon=True)
        self._thread.start()

    def text(self) -> str:
        return render(self.figures.families() if self.figures is not None else [])

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(2.0)
        self.httpd.server_close()


def _handler(server: MetricsServer) -> type:
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:   # noqa: N802 - http.server's name
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "the figures are at /metrics")
                return
            body = server.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - quiet: stderr is the user's
            pass

    return Handler


def live_figures(settings: Mapping[str, Any], argv: Sequence[str], job: Any) -> LiveFigures | None:
    """The live figures a command (`argv`: storlab, the command, its arguments) keeps while it
    runs `job` (jobs/job.py's Job), from its settings (`live`, `quiet`, `metrics_listen`), or None
    when neither a line nor an endpoint wants them. The endpoint is bound here (a busy port:
    UserError, exit 2) and its address said on standard error."""
    command = argv[1] if len(argv) > 1 else "run"
    targets = dict.fromkeys(str(t) for p in job.phases for g in p.groups
                            for t in _as_list(g.values.get("target")))
    labels = {"job": job_name({"argv": list(argv)}), "target": ",".join(targets),
              "host": os.uname().nodename}
    mode = settings.get("live") or "auto"
    line = None
    if mode == "on" or (mode == "auto" and wants_progress(bool(settings.get("quiet")))):
        plain = not sys.stderr.isatty() or bool(os.environ.get("NO_COLOR"))
        line = LiveLine(sys.stderr, plain)
    server = None
    if settings.get("metrics_listen"):
        server = MetricsServer(settings["metrics_listen"])
        print(f"storlab {command}: live metrics at {server.url}", file=sys.stderr, flush=True)
    if line is None and server is None:
        return None
    return LiveFigures(line, server, labels)


def _as_list(value: Any) -> list[Any]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)
