"""The result documents storlab writes: one type per kind, the common header every document opens
with (built here and nowhere else), and the clock that stamps it.

Every document starts with `schema`, `kind` and `storlab_version`. The kinds that measure (run,
meta, scale, sweep) go on with the run's identity, times, outcome and command line: `run_id`,
`started_at`, `finished_at`, `complete`, `stop_reason`, `error`, `argv`. The body of each kind is
described by the TypedDicts below and, for validation, by the JSON Schemas in storlab/schemas/
(docs/result-format.md). Documents stay plain dicts on the wire and in the store; the types say
what each one holds.
"""
from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Dict, List, Optional, Sequence, TypedDict

__all__ = [
    "DIRECTIONS", "RUN_SCHEMA", "IO500_SCHEMA", "NET_SCHEMA", "KVCACHE_SCHEMA",
    "SWEEP_SCHEMA", "DOCTOR_SCHEMA", "DIAGNOSE_SCHEMA", "PLAN_SCHEMA_VERSION", "MEASURED_KINDS",
    "KINDS",
    "plan_schema", "now_iso", "header",
    "Header", "RunHeader", "RunDocument", "MetaDocument", "ScaleDocument", "SweepDocument",
    "DoctorDocument", "PlanDocument", "DiagnoseDocument", "NetDocument", "KvcacheDocument",
]

# The directions a phase result can have, in fio's order; trim only where the phase trimmed.
DIRECTIONS = ("read", "write", "trim")

RUN_SCHEMA = "storlab.run/1"          # kinds run, meta and scale
IO500_SCHEMA = "storlab.io500/1"      # `storlab io500`: io500's phases, score and validity
SWEEP_SCHEMA = "storlab.sweep/1"
DOCTOR_SCHEMA = "storlab.doctor/1"
DIAGNOSE_SCHEMA = "storlab.diagnose/1"
WORKLOAD_SCHEMA = "storlab.workload/1"
NET_SCHEMA = "storlab.net/1"          # `storlab net`: the fabric between client and server nodes
KVCACHE_SCHEMA = "storlab.kvcache/1"  # `storlab kvcache`: MLPerf Storage's KV-cache benchmark
PLAN_SCHEMA_VERSION = 1               # storlab.plan.<command>/1, one per plan command

# The schema of each kind; plan's depends on the plan command (plan_schema).
_SCHEMA_OF_KIND = {"run": RUN_SCHEMA, "meta": RUN_SCHEMA, "scale": RUN_SCHEMA, "sweep": SWEEP_SCHEMA,
                   "doctor": DOCTOR_SCHEMA, "diagnose": DIAGNOSE_SCHEMA, "io500": IO500_SCHEMA,
                   "workload": WORKLOAD_SCHEMA, "net": NET_SCHEMA, "kvcache": KVCACHE_SCHEMA}
# Kinds whose documents record one measurement: they carry a run_id, times and an outcome.
MEASURED_KINDS = frozenset({"run", "meta", "scale", "sweep", "diagnose", "io500", "workload", "net", "kvcache"})
KINDS = frozenset({*MEASURED_KINDS, "doctor", "plan"})
PLAN_COMMANDS = ("geometry", "reliability", "perf", "recommend", "script", "profile")


def plan_schema(command: str) -> str:
    """The schema name of a `storlab plan COMMAND --json` document."""
    if command not in PLAN_COMMANDS:
        raise ValueError(f"plan command: {command!r} has no document; allowed: {', '.join(PLAN_COMMANDS)}")
    return f"storlab.plan.{command}/{PLAN_SCHEMA_VERSION}"


def uuid4_hex() -> str:
    """A random (version 4) UUID as 32 hex digits, what `uuid.uuid4().hex` gives, without importing
    uuid (which imports platform and costs every command's start-up)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40   # version 4
    b[8] = (b[8] & 0x3F) | 0x80   # the RFC 4122 variant
    return b.hex()


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds and a Z, as every document stamps it."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def header(kind: str, *, schema: str | None = None, argv: Sequence[str] = (), run_id: str | None = None,
           started_at: str | None = None, finished_at: str | None = None) -> dict[str, Any]:
    """The common header of a document of `kind`, to be extended with the kind's body.

    Every kind gets schema, kind and storlab_version (`schema` is needed only for plan, whose
    schema names its command). A measured kind also gets a run_id (a new uuid4 hex unless given),
    started_at (now unless given), finished_at (None until the run ends), complete true,
    stop_reason "done", error None and a copy of argv: the outcome of a run that has not failed.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not a document kind; allowed: {', '.join(sorted(KINDS))}")
    if schema is None:
        if kind == "plan":
            raise ValueError("schema: a plan document needs its schema (plan_schema(command))")
        schema = _SCHEMA_OF_KIND[kind]
    from . import __version__

    doc: dict[str, Any] = {"schema": schema, "kind": kind, "storlab_version": __version__}
    if kind in MEASURED_KINDS:
        doc.update({
            "run_id": run_id or uuid4_hex(),
            "started_at": started_at or now_iso(),
            "finished_at": finished_at,
            "complete": True,
            "stop_reason": "done",
            "error": None,
            "argv": list(argv),
        })
    return doc


# --- document types ----------------------------------------------------------------------------
# TypedDicts with a required base and an optional (total=False) extension, which works on every
# Python storlab supports (typing.NotRequired needs 3.11).

class Header(TypedDict):
    schema: str
    kind: str
    storlab_version: str


class RunHeader(Header):
    run_id: str
    started_at: str
    finished_at: Optional[str]
    complete: bool
    stop_reason: str            # done | interrupted | error | running (a checkpoint)
    error: Optional[str]
    argv: List[str]


class _RunBody(RunHeader):
    job: Dict[str, Any]
    environment: Dict[str, Any]
    warnings: List[Dict[str, Any]]
    phases: List[Dict[str, Any]]


class RunDocument(_RunBody, total=False):
    """`storlab run` (storlab.run/1, kind run); under MPI with an `mpi` section."""
    signal: str                 # SIGINT | SIGTERM | SIGHUP, when a signal stopped the run
    main_job: Dict[str, Any]
    passes: Dict[str, Any]
    model: Dict[str, Any]
    mpi: Dict[str, Any]
    sweep: Dict[str, Any]       # the sweep and point this run belongs to


class _MetaBody(_RunBody):
    workers: int
    cleanup: Optional[Dict[str, Any]]


class MetaDocument(_MetaBody, total=False):
    """`storlab meta` (storlab.run/1, kind meta): one phase per metadata operation."""
    mpi: Dict[str, Any]


class ScaleDocument(_RunBody):
    """`storlab scale` (storlab.run/1, kind scale): an MPI run at each rank count and the curve;
    `phases` is empty, the measurements are the `runs`."""
    runs: List[RunDocument]
    scale: Dict[str, Any]       # ranks_planned, ranks_run, curve


class SweepDocument(RunHeader):
    """`storlab sweep` (storlab.sweep/1): every point's run document under `runs`."""
    axes: List[Dict[str, Any]]
    settings: Dict[str, Any]
    job: Dict[str, Any]
    environment: Dict[str, Any]
    points: List[Dict[str, Any]]
    series: List[Dict[str, Any]]
    early_stops: List[Dict[str, Any]]
    warnings: List[Dict[str, Any]]
    runs: List[RunDocument]


class _DoctorBody(Header):
    host: str
    kernel: str
    targets: List[str]
    summary: Dict[str, int]
    devices: List[Dict[str, Any]]
    partitions: List[Dict[str, Any]]
    filesystems: List[Dict[str, Any]]
    notes: List[str]
    findings: List[Dict[str, Any]]


class DoctorDocument(_DoctorBody, total=False):
    """`storlab doctor --json` (storlab.doctor/1)."""
    stack: Dict[str, Any]       # file, differences: with --stack


class PlanDocument(Header, total=False):
    """`storlab plan COMMAND --json` (storlab.plan.COMMAND/1): the header, the command's
    report, whose fields depend on the command (schemas/plan-1.schema.json), and the warnings on
    the stack that every plan command carries (storlab.model.advice)."""
    warnings: List[Dict[str, str]]      # {code, message}


class DiagnoseLayer(TypedDict):
    """One row of `storlab diagnose`: a layer measured with one workload against its prediction."""
    layer: str                  # member | members | volume | fs | fs-buffered | fs-cached
    subject: str
    workload: str
    unit: str                   # bytes/s | IOPS
    measured: Optional[float]
    predicted: Optional[float]
    efficiency: Optional[float]
    limited_by: Optional[str]
    rule: Optional[str]
    run_id: Optional[str]


class DiagnoseFinding(TypedDict):
    code: str                   # layer-loss | straggler | shared-limit | fs-below-device | doctor | cache-effect
    severity: str               # warning | info
    layer: str
    message: str
    evidence: str
    fix: Optional[str]


class DiagnoseDocument(RunHeader, total=False):
    """`storlab diagnose --json` (storlab.diagnose/1): the stack found below the target, every
    probe (each also stored as a run), one row per layer and workload, and the findings."""
    target: str
    stack: Dict[str, Any]
    stack_check: Optional[Dict[str, Any]]
    budget_s: float
    workloads: List[Dict[str, Any]]
    probes: List[Dict[str, Any]]
    layers: List[DiagnoseLayer]
    findings: List[DiagnoseFinding]
    doctor: List[Dict[str, Any]]


class NetPair(TypedDict):
    """One client node and one server node measured alone (`storlab net`)."""
    client: str
    server: str
    address: str                # the server address the client used
    rtt_s: float                # median round trip of a one-byte exchange over TCP
    bw_bytes: float             # received rate of the pair's streams together
    stream_bw_bytes: List[float]


class NetDocument(RunHeader, total=False):
    """`storlab net --json` (storlab.net/1): each client-server pair alone, then every client at
    once, and the shared links that shows."""
    servers: List[str]
    clients: List[str]
    streams: int
    seconds: float
    pairs: List[NetPair]
    aggregate: List[Dict[str, Any]]     # {client, server, bw_bytes}, all clients at once
    aggregate_bw_bytes: Optional[float]
    findings: List[str]
    mpi: Dict[str, Any]


class KvcacheDocument(RunHeader, total=False):
    """`storlab kvcache --json` (storlab.kvcache/1): MLPerf Storage v3.0's KV-cache benchmark, one
    entry per option with its trials (each with every rank's record) and the headline figures:
    read_bw_bytes and tokens_per_s summed over ranks and averaged over trials, read_p95_s and
    write_p95_s the maximum of the ranks' device P95s (docs/kvcache.md)."""
    cache_dir: str
    seed: int
    trials: int
    inter_option_delay_s: float
    ranks: int
    hosts: int
    scale: float
    requests_per_user: int
    storage_capacity_bytes: Optional[int]
    division: str               # closed | open
    compliant: bool
    noncompliant_reasons: List[str]
    precondition: Optional[Dict[str, Any]]
    options: List[Dict[str, Any]]
    warnings: List[Dict[str, Any]]
