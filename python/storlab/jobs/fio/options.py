"""Every fio option and what `storlab fio` does with it: translated to a storlab option, accepted
with no effect on what is measured (with the reason), or refused (with what storlab does instead).

The names are fio 3.x's (options.c and the io_uring engine's options). The translator
(storlab.jobs.fio.map) consults this table for every setting, and docs/fio.md's option table is
generated from it (`PYTHONPATH=python python3 -m storlab.jobs.fio.options --write docs/fio.md`),
so the page and the translator cannot disagree.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FioOption", "FIO_OPTIONS", "ALIASES", "ENGINES", "META_ENGINES", "REFUSED_ENGINES",
           "HTTP_OPTIONS", "SECRET_OPTIONS", "REDACTED", "shown_value", "status_of", "render_table", "write_docs"]


@dataclass(frozen=True)
class FioOption:
    name: str
    status: str      # mapped | accepted | refused
    text: str        # mapped: the storlab option(s); accepted: why it changes nothing; refused: why


# fio's alternative names -> the name used below
ALIASES = {"readwrite": "rw", "blocksize": "bs", "io_limit": "io_size", "timeout": "runtime",
           "wait_for_previous": "stonewall", "blocksize_range": "bsrange", "ba": "blockalign",
           "nr_files": "nrfiles", "fileoffset": "offset", "ratemin": "rate_min",
           "ratecycle": "rate_cycle", "bs_unaligned": "blocksize_unaligned", "ss": "steadystate",
           "ss_dur": "steadystate_duration", "ss_ramp": "steadystate_ramp_time",
           "ss_interval": "steadystate_check_interval",
           "disable_bw": "disable_bw_measurement", "fixedbufs": "fixedbufs"}

# fio engine -> (storlab engine, the line `storlab fio` prints when the name differs)
ENGINES: dict[str, tuple[str, str]] = {
    "psync": ("psync", ""),
    "sync": ("psync", "sync → psync: one positioned read/write at a time, as fio's lseek+read"),
    "pvsync": ("psync", "pvsync → psync: one positioned read/write at a time (preadv with one vector)"),
    "pvsync2": ("psync", "pvsync2 → psync: one positioned read/write at a time (preadv2 without flags)"),
    "io_uring": ("io_uring", ""),
    "libaio": ("io_uring", "libaio → io_uring: same asynchronous queue-depth semantics"),
    "posixaio": ("io_uring", "posixaio → io_uring: same asynchronous queue-depth semantics"),
    "null": ("null", ""),
    "nbd": ("nbd", ""),
    "nfs": ("nfs", ""),
    "http": ("s3", "http (http_mode=s3) → s3: the same PUTs, GETs and DELETEs of objects, one request in "
                   "flight per job as fio's synchronous engine; object names differ (docs/fio.md)"),
}
# fio's file-system engines -> the storlab meta phases that time the same system calls
META_ENGINES: dict[str, tuple[str, ...]] = {
    "filecreate": ("create",), "filestat": ("create", "stat"), "filedelete": ("create", "remove"),
    "dircreate": ("create",), "dirstat": ("create",), "dirdelete": ("create", "remove", "rmdir"),
}
_NETWORK = ("storlab reads files and block devices (psync, io_uring), NBD exports (nbd), NFS files (nfs) "
            "and S3 objects (http with http_mode=s3), not this network storage")
_DEVICE = "storlab does file and block-device I/O (psync, io_uring), not this device interface"
REFUSED_ENGINES: dict[str, str] = {
    **{e: _NETWORK for e in ("net", "netsplice", "rdma", "rbd", "rados", "gfapi",
                             "gfapi_async", "libhdfs", "dfs", "libiscsi", "ime_psync",
                             "ime_psyncv", "ime_aio", "windowsaio")},
    **{e: _DEVICE for e in ("sg", "io_uring_cmd", "xnvme", "libpmem", "dev-dax", "pmemblk", "mtd",
                            "libzbc", "libblkio", "spdk", "splice", "mmap", "e4defrag", "falloc",
                            "ftruncate", "guasi", "solarisaio", "binject", "libcufile",
                            "libhipfile", "page_fault", "cpp_null", "external")},
    "exec": "storlab runs no programs as jobs; run the program beside storlab",
    "cpuio": "storlab measures I/O, not CPU burn; run a CPU load beside storlab",
}

_M, _A, _R = "mapped", "accepted", "refused"
# fio's sprandom job is its measurement; storlab runs the same fill as preconditioning, reported
# apart from the job (jobs/precondition.py), so a job file asking for it is not translated.
_SPRANDOM = "run as --precondition-method sprandom:OP:REGIONS, reported apart from the job"
_ROWS: list[tuple[str, str, str]] = [
    # --- jobs, files, targets ---
    ("name", _M, "the job's name (storlab group name)"),
    ("description", _A, "free text"),
    ("wait_for", _M, "starts a new phase after the named job's (storlab phases end together)"),
    ("stonewall", _M, "starts a new phase"),
    ("new_group", _M, "starts a new reporting group in the output"),
    ("group_reporting", _M, "the output sums the group's jobs"),
    ("filename", _M, "target (a `:` list: one worker per file; `/dev/null` with the null engine: no file)"),
    ("directory", _M, "prefixes every file name, generated or given (an absolute filename too, as "
                      "fio joins them); a `:` list is dealt to clones round-robin"),
    ("filename_format", _M, "generated file names ($jobname, $jobnum, $filenum)"),
    ("unique_filename", _A, "storlab names files per job as fio does"),
    ("nrfiles", _M, "one target per file, one worker each (fio: one job cycling through its files)"),
    ("filesize", _M, "size of each target (a range `a-b` only with a = b)"),
    ("openfiles", _A, "storlab keeps every target open"),
    ("file_service_type", _A, "storlab runs one worker per file, so no file is chosen per request"),
    ("filetype", _R, "storlab opens regular files and block devices only"),
    ("opendir", _R, "give the files or a directory with nrfiles"),
    ("lockfile", _A, "only `none` (fio's default): storlab does not lock files"),
    ("create_on_open", _A, "storlab creates files when the plan is built, before the timed window"),
    ("create_serialize", _A, "storlab lays files out before the timed window"),
    ("create_fsync", _A, "storlab flushes laid-out files"),
    ("create_only", _R, "storlab lays out files as part of a run only"),
    ("allow_file_create", _A, "storlab creates missing files"),
    ("allow_mounted_write", _R, "storlab never writes a mounted device"),
    ("unlink", _M, "`storlab fio` removes the job's files after the run"),
    ("unlink_each_loop", _R, "storlab removes files at the end only"),
    ("fallocate", _M, "preallocate (native, posix, keep, 1: on, as fio's default; none, 0: off, the file only sized)"),
    ("fadvise_hint", _A, "storlab gives no access-pattern hints"),
    ("overwrite", _M, "a `layout` phase writes the job's files once before the jobs, as fio lays them out"),
    ("file_append", _R, "storlab writes inside the range [offset, offset+size)"),
    ("pre_read", _R, "storlab reads only within the timed run"),
    # --- sizes and ranges ---
    ("size", _M, "size (`N%` of an existing file or device)"),
    ("io_size", _M, "io_size"),
    ("number_ios", _M, "io_size = number_ios × bs"),
    ("fill_device", _R, "give size"),
    ("fill_fs", _R, "give size"),
    ("offset", _M, "offset (`N%` of an existing file or device)"),
    ("offset_align", _A, "storlab aligns offsets to bs (only 0 or bs)"),
    ("offset_increment", _M, "one group per clone at offset + k × offset_increment"),
    ("loops", _M, "io_size = loops × size (each pass covers the range once)"),
    ("kb_base", _M, "sizes read with fio's 1000/1024 rules"),
    ("unit_base", _A, "storlab reports bytes"),
    # --- block sizes ---
    ("bs", _M, "bs; sizes differing per direction (`R,W[,T]`) become a bssplit of one size per direction"),
    ("bsrange", _M, "bsrange: each request's size drawn per I/O between MIN and MAX, as fio"),
    ("bssplit", _M, "bssplit: each request's size drawn per I/O from the split (fio's draw), time- or size-based"),
    ("blockalign", _M, "blockalign (one value for every direction); turns the random map off as in fio"),
    ("blocksize_unaligned", _R, "storlab issues bs-aligned requests"),
    ("bs_is_seq_rand", _R, "storlab's block size does not depend on direction"),
    # --- pattern ---
    ("rw", _M, "rw (read, write, randread, randwrite, rw, randrw; trim, randtrim, trimwrite); "
     "`read:SIZE` (and write:, rw:, trim: …) → seq_hole = SIZE, a multiple of bs; "
     "`randread:1` only"),
    ("rw_sequencer", _A, "used by fio only for `randread:N` with N > 1, which storlab refuses"),
    ("rwmixread", _M, "rwmix_read"),
    ("rwmixwrite", _M, "rwmix_read = 100 − rwmixwrite"),
    ("rwmixcycle", _A, "obsolete in fio"),
    ("randrepeat", _M, "seed fixed (1) or new each run (0)"),
    ("allrandrepeat", _M, "as randrepeat"),
    ("randseed", _M, "seed"),
    ("norandommap", _M, "random_map = off"),
    ("softrandommap", _A, "storlab's random map never fails to allocate"),
    ("random_generator", _A, "storlab's generator (SplitMix/xoshiro); the map gives lfsr's no-repeat coverage"),
    ("random_distribution", _M, "random_distribution (zoned_abs refused)"),
    ("percentage_random", _M, "percentage_random (one value for every direction)"),
    ("percentage_sequential", _M, "percentage_random = 100 - it (one value for every direction)"),
    ("random_sequence_stride", _R, "storlab does one request per random offset"),
    ("sprandom", _R, _SPRANDOM),
    ("spr_num_regions", _R, _SPRANDOM),
    ("spr_op", _R, _SPRANDOM),
    ("spr_cs", _R, "storlab's sprandom preconditioning does not defer rewrites past a device cache"),
    ("num_range", _R, "storlab's trim is one range per request"),
    # --- timing ---
    ("runtime", _M, "time (without time_based also one pass over size: io_size)"),
    ("time_based", _M, "time"),
    ("ramp_time", _M, "ramp"),
    ("ramp_size", _R, "give ramp_time"),
    ("startdelay", _M, "start_delay (a range refused)"),
    ("clocksource", _A, "storlab uses CLOCK_MONOTONIC"),
    ("gtod_reduce", _A, "storlab always times every request"),
    ("gtod_cpu", _R, "storlab does not dedicate a timing thread"),
    ("job_start_clock_id", _A, "storlab records its own start times"),
    # --- engine ---
    ("ioengine", _M, "engine (see the engine table)"),
    ("uri", _M, "target, with ioengine=nbd (the export's nbd:// URI)"),
    ("nfs_url", _M, "the target's server and export, with ioengine=nfs: each file is nfs_url/filename"),
    # --- the http engine's options (engines/http.c): http_mode=s3 runs on the s3 engine ---
    ("http_mode", _M, "s3: the s3 engine; webdav (fio's default) and swift refused"),
    ("http_host", _M, "endpoint http(s)://HOST[:PORT], path style: filename=/BUCKET/KEY; a host "
                      "BUCKET.s3.… is virtual-host style (virtual_host, filename=/KEY)"),
    ("https", _M, "the endpoint's scheme: off (fio's default) http://, on https://, insecure "
                  "https:// with insecure (the certificate not checked)"),
    ("http_object_mode", _M, "block (fio's default): one object per request, object_size = bs, "
                             "names KEY/obj-N (fio: KEY_OFFSET_BS); range: the one object KEY "
                             "(KEY/obj-000000000000 unless KEY is P/obj-N), object_size = size, "
                             "ranged GETs; writes and trims only with bs = size"),
    ("http_s3_keyid", _M, "AWS_ACCESS_KEY_ID of the run's environment (shown and recorded as <redacted>)"),
    ("http_s3_key", _M, "AWS_SECRET_ACCESS_KEY of the run's environment (shown and recorded as <redacted>)"),
    ("http_s3_security_token", _M, "AWS_SESSION_TOKEN of the run's environment (shown and recorded as "
                                   "<redacted>)"),
    ("http_s3_region", _M, "AWS_REGION of the run's environment (not given: us-east-1, fio's default)"),
    ("http_s3_storage_class", _R, "storlab sends no x-amz-storage-class: objects get the server's "
                                  "default class (STANDARD, fio's default, runs)"),
    ("http_s3_sse_customer_key", _R, "storlab's s3 engine sends no server-side encryption (SSE-C) headers"),
    ("http_s3_sse_customer_algorithm", _A, "used by fio only with http_s3_sse_customer_key (refused)"),
    ("http_user", _R, "user and password are webdav's authentication; S3 requests are signed with "
                      "http_s3_keyid and http_s3_key"),
    ("http_pass", _R, "user and password are webdav's authentication; S3 requests are signed with "
                      "http_s3_keyid and http_s3_key"),
    ("http_swift_auth_token", _A, "used by fio only with http_mode=swift (refused)"),
    ("http_verbose", _A, "curl's trace output; storlab prints no HTTP traces"),
    ("iodepth", _M, "qd (psync: 1, as fio's synchronous engines)"),
    ("iodepth_batch", _M, "uring.batch"),
    ("iodepth_batch_submit", _M, "uring.batch"),
    ("iodepth_batch_complete", _A, "storlab reaps every completion that is ready"),
    ("iodepth_batch_complete_min", _A, "storlab reaps every completion that is ready"),
    ("iodepth_batch_complete_max", _A, "storlab reaps every completion that is ready"),
    ("iodepth_low", _A, "storlab refills the queue as completions arrive"),
    ("io_submit_mode", _A, "only `inline`: storlab submits from the worker"),
    ("serialize_overlap", _A, "storlab never has two overlapping requests in flight with the random map"),
    ("sqthread_poll", _M, "uring.sqpoll"),
    ("sqthread_poll_cpu", _A, "the kernel places the SQPOLL thread"),
    ("registerfiles", _M, "uring.fixed_files"),
    ("fixedbufs", _M, "uring.fixed_buffers (1: on; 0: off, fio's default; not set in an io_uring job: "
                      "storlab's auto, registered where the kernel allows, said in one line)"),
    ("nonvectored", _A, "storlab issues non-vectored requests"),
    ("hipri", _R, "storlab does not do polled completions"),
    ("uncached", _R, "use direct=1 or buffered"),
    ("nowait", _R, "storlab does not set RWF_NOWAIT"),
    ("force_async", _R, "storlab does not force async punts"),
    ("direct", _M, "direct"),
    ("buffered", _M, "direct = not buffered"),
    ("atomic", _R, "storlab does not issue atomic writes"),
    ("sync", _M, "open_sync (1 or sync: O_SYNC; dsync: O_DSYNC; 0 or none: none)"),
    ("write_barrier", _R, "use fsync=N"),
    ("sync_file_range", _R, "use fsync=N"),
    ("mem", _A, "storlab allocates its own aligned buffers"),
    ("iomem", _A, "storlab allocates its own aligned buffers"),
    ("mem_align", _A, "storlab aligns buffers to the page"),
    ("iomem_align", _A, "storlab aligns buffers to the page"),
    ("hugepage-size", _A, "storlab allocates its own buffers"),
    ("lockmem", _R, "storlab does not limit its memory"),
    ("thread", _A, "storlab workers are always threads"),
    # --- syncs ---
    ("fsync", _M, "fsync_every"),
    ("fdatasync", _M, "fsync_every (storlab calls fsync, which also flushes metadata)"),
    ("end_fsync", _M, "fsync_end"),
    ("fsync_on_close", _M, "fsync_end"),
    ("end_syncfs", _R, "use end_fsync"),
    ("invalidate", _M, "invalidate"),
    # --- rate and think time (storlab's rate limiter) ---
    ("rate", _M, "rate"),
    ("rate_min", _M, "rate_min"),
    ("rate_iops", _M, "rate_iops"),
    ("rate_iops_min", _M, "rate_iops_min"),
    ("rate_process", _M, "rate_process (linear or poisson)"),
    ("rate_cycle", _R, "storlab checks rate_min over its own interval"),
    ("rate_ignore_thinktime", _R, "storlab counts think time in the rate"),
    ("thinktime", _M, "thinktime"),
    ("thinktime_spin", _M, "thinktime_spin"),
    ("thinktime_blocks", _M, "thinktime_blocks"),
    ("thinktime_blocks_type", _R, "storlab counts thinktime_blocks as completions"),
    ("thinktime_iotime", _R, "storlab thinks between blocks only"),
    ("thinkcycles", _R, "storlab does not burn CPU cycles"),
    ("max_latency", _M, "stall_after + stall_abort: the phase ends with an error at the first request outstanding that long"),
    ("latency_target", _M, "latency_target: the highest queue depth up to iodepth holding the percentile "
                           "(doubling, then bisection; for the whole run)"),
    ("latency_window", _M, "latency_window"),
    ("latency_percentile", _M, "latency_percentile"),
    ("latency_run", _R, "storlab does not adjust the depth while running; storlab's latency_run runs the phase at the depth found"),
    # --- verification ---
    ("verify", _M, "verify (every checksum kind → crc32c: storlab's header and checksum per block)"),
    ("do_verify", _M, "verify_readback"),
    ("verify_pattern", _M, "verify = crc32c (storlab writes stamped blocks, not the pattern)"),
    ("verify_backlog", _A, "storlab reads back after the writes"),
    ("verify_backlog_batch", _A, "storlab reads back after the writes"),
    ("verify_fatal", _A, "storlab reports every mismatch and fails the run"),
    ("verify_dump", _A, "storlab prints the first mismatches"),
    ("verify_async", _A, "storlab checks in the worker"),
    ("verify_async_cpus", _R, "storlab does not pin CPUs"),
    ("verify_interval", _R, "storlab stamps one header per block"),
    ("verify_offset", _R, "storlab's header is at the block start"),
    ("verify_pattern_interval", _R, "storlab stamps one header per block"),
    ("verify_only", _R, "run the reading job with verify"),
    ("verify_policy", _R, "storlab reads back in write order"),
    ("verifysort", _A, "obsolete in fio"),
    ("verifysort_nr", _A, "obsolete in fio"),
    ("experimental_verify", _R, "storlab's read-back is its own"),
    ("verify_state_load", _R, "storlab keeps no verify state files"),
    ("verify_state_save", _A, "storlab keeps no verify state files"),
    ("verify_write_sequence", _A, "storlab stamps a sequence in each header"),
    ("verify_header_seed", _A, "storlab's header carries its own seed"),
    ("trim_percentage", _R, "use rw=trimwrite"),
    ("trim_verify_zero", _R, "storlab does not verify trimmed blocks"),
    ("trim_backlog", _R, "use rw=trimwrite"),
    ("trim_backlog_batch", _R, "use rw=trimwrite"),
    # --- data in buffers ---
    ("zero_buffers", _M, "buffer_pattern = 0x00 (and scramble off unless scramble_buffers is given, as fio)"),
    ("refill_buffers", _M, "scramble = true (every 512-byte sector written made unique, the buffer not "
                           "refilled with new random data: said in one line)"),
    ("scramble_buffers", _M, "scramble (1: on, the default of both; 0: off, every write of a request slot "
                             "carries the same bytes; under refill_buffers ignored, as in fio)"),
    ("buffer_pattern", _M, "buffer_pattern (hex, quoted strings and decimal bytes joined with |, as hex bytes)"),
    ("buffer_compress_percentage", _M, "compress_percentage"),
    ("buffer_compress_chunk", _M, "compress_chunk"),
    ("dedupe_percentage", _M, "dedupe_percentage (each thread repeats its own earlier writes)"),
    ("dedupe_global", _R, "storlab's threads repeat their own writes, not one another's"),
    ("dedupe_mode", _M, "repeat only (fio's default); working_set refused"),
    ("dedupe_working_set_percentage", _R, "storlab repeats earlier writes (dedupe_mode=repeat)"),
    # --- I/O logs ---
    ("write_iolog", _M, "write_iolog"),
    ("read_iolog", _M, "read_iolog"),
    ("replay_no_stall", _M, "replay_no_stall"),
    ("read_iolog_chunked", _A, "storlab reads the log as it replays"),
    ("replay_redirect", _R, "give the target in the log"),
    ("replay_scale", _R, "storlab replays offsets as logged"),
    ("replay_align", _R, "storlab replays offsets as logged"),
    ("replay_time_scale", _R, "use replay_no_stall"),
    ("replay_skip", _R, "storlab replays every direction"),
    ("merge_blktrace_file", _R, "storlab replays fio iologs, not blktrace"),
    ("merge_blktrace_scalars", _R, "storlab replays fio iologs, not blktrace"),
    ("merge_blktrace_iters", _R, "storlab replays fio iologs, not blktrace"),
    # --- reporting and logs ---
    ("percentile_list", _M, "the percentiles printed (from storlab's histograms)"),
    ("lat_percentiles", _M, "percentiles of total latency (storlab's default)"),
    ("clat_percentiles", _A, "storlab prints percentiles of total latency; clat is in the JSON"),
    ("slat_percentiles", _A, "storlab prints percentiles of total latency; slat is in the JSON"),
    ("significant_figures", _A, "storlab prints its own precision"),
    ("write_bw_log", _M, "written from storlab's time series (interval = log_avg_msec)"),
    ("write_lat_log", _M, "written from storlab's time series: mean lat, clat and slat per "
     "interval (interval = log_avg_msec)"),
    ("write_iops_log", _M, "written from storlab's time series (interval = log_avg_msec)"),
    ("log_avg_msec", _M, "interval"),
    ("per_job_logs", _A, "storlab writes one log per job"),
    ("write_hist_log", _R, "the histograms are in the JSON"),
    ("log_hist_msec", _R, "the histograms are in the JSON"),
    ("log_hist_coarseness", _R, "the histograms are in the JSON"),
    ("log_entries", _A, "storlab sizes its series itself"),
    ("log_offset", _R, "storlab's logs carry no offsets"),
    ("log_prio", _R, "storlab's logs carry no priorities"),
    ("log_issue_time", _R, "storlab's logs carry no issue times"),
    ("log_max_value", _R, "storlab's logs are interval means"),
    ("log_window_value", _R, "storlab's logs are interval means"),
    ("log_compression", _R, "storlab writes plain logs"),
    ("log_compression_cpus", _R, "storlab writes plain logs"),
    ("log_store_compressed", _R, "storlab writes plain logs"),
    ("log_unix_epoch", _R, "storlab's logs count from the start"),
    ("log_alternate_epoch", _R, "storlab's logs count from the start"),
    ("log_alternate_epoch_clock_id", _R, "storlab's logs count from the start"),
    ("bwavgtime", _A, "storlab's interval"),
    ("iopsavgtime", _A, "storlab's interval"),
    ("disable_lat", _A, "storlab always measures latency"),
    ("disable_clat", _A, "storlab always measures latency"),
    ("disable_slat", _A, "storlab always measures latency"),
    ("disable_bw_measurement", _A, "storlab always measures bandwidth"),
    ("block_error_percentiles", _R, "storlab does not track trim errors per block"),
    ("unified_rw_reporting", _M, "the fio report's `mixed` direction (none/0; mixed/1: instead of read, "
                              "write, trim; both/2: beside them): requests and bytes summed, latencies pooled"),
    ("stats", _A, "storlab always keeps statistics"),
    ("disk_util", _A, "storlab's JSON has no disk utilisation yet"),
    ("steadystate", _M, "ss of the job's phase (iops, bw, lat and their _slope, with fio's criteria; "
                        "the jobs between two stonewalls must agree, as fio's reporting group)"),
    ("steadystate_duration", _M, "ss_dur of the job's phase (without ss: fio's default iops_slope:0.01%)"),
    ("steadystate_ramp_time", _M, "ss_ramp of the job's phase"),
    ("steadystate_check_interval", _M, "ss_interval of the job's phase"),
    # --- process placement and control ---
    ("numjobs", _M, "one worker per clone (shared file: threads; generated names: one file each)"),
    ("cpus_allowed", _M, "cpus (the worker threads pinned to the list's CPUs)"),
    ("cpumask", _M, "cpus (the mask's bits as a CPU list)"),
    ("cpus_allowed_policy", _M, "cpus_policy (shared or split)"),
    ("numa_cpu_nodes", _R, "storlab does not bind NUMA nodes; run it under numactl"),
    ("numa_mem_policy", _R, "storlab does not bind NUMA nodes; run it under numactl"),
    ("nice", _R, "run storlab under nice"),
    ("prio", _R, "run storlab under ionice"),
    ("prioclass", _R, "run storlab under ionice"),
    ("priohint", _R, "storlab does not set I/O priority hints"),
    ("cmdprio_percentage", _R, "storlab does not set per-command priorities"),
    ("cmdprio_class", _R, "storlab does not set per-command priorities"),
    ("cmdprio", _R, "storlab does not set per-command priorities"),
    ("cmdprio_bssplit", _R, "storlab does not set per-command priorities"),
    ("write_hint", _R, "storlab does not set write lifetime hints"),
    ("ioscheduler", _R, "set the scheduler in sysfs before the run"),
    ("cgroup", _R, "run storlab in the cgroup"),
    ("cgroup_nodelete", _R, "run storlab in the cgroup"),
    ("cgroup_weight", _R, "run storlab in the cgroup"),
    ("uid", _R, "run storlab as that user"),
    ("gid", _R, "run storlab as that group"),
    ("comm", _A, "thread names"),
    ("exitall", _R, "storlab's phases end when all their workers end"),
    ("exit_what", _R, "storlab's phases end when all their workers end"),
    ("exitall_on_error", _R, "storlab stops a phase at its first error"),
    ("continue_on_error", _A, "only `none`: storlab stops at the first I/O error"),
    ("ignore_error", _R, "storlab stops at the first I/O error"),
    ("error_dump", _A, "storlab names the failing request in its error"),
    ("exec_prerun", _M, "exec_prerun: the command runs before the phase holding the job"),
    ("exec_postrun", _M, "exec_postrun: the command runs after the phase holding the job"),
    ("profile", _R, "write the job out"),
    ("flow_id", _R, "storlab does not couple jobs' rates"),
    ("flow", _R, "storlab does not couple jobs' rates"),
    ("flow_watermark", _R, "storlab does not couple jobs' rates"),
    ("flow_sleep", _R, "storlab does not couple jobs' rates"),
    ("gpu_dev_id", _R, "storlab does no GPU I/O"),
    # --- zoned devices and data placement ---
    *((z, _R, "storlab does not manage zones or data placement") for z in (
        "zonemode", "zonesize", "zonecapacity", "zonerange", "zoneskip", "read_beyond_wp",
        "max_open_zones", "job_max_open_zones", "ignore_zone_limits", "zone_reset_threshold",
        "zone_reset_frequency", "recover_zbd_write_error", "write_zone_remainder", "fdp",
        "dataplacement", "data_placement", "plid_select", "fdp_pli_select", "plids", "fdp_pli",
        "dp_scheme")),
    # --- options of fio's profiles (act, tiobench): they do nothing without `profile` ---
    *((z, _A, "an option of fio's act profile: no effect without profile=act (refused)") for z in (
        "device-names", "load", "test-duration", "threads-per-queue", "read-req-num-512-blocks",
        "large-block-op-kbytes", "prep")),
    *((z, _A, "an option of fio's tiobench profile: no effect without profile=tiobench (refused)")
      for z in ("block", "numruns", "dir", "threads")),
    # --- io_uring engine options that are NVMe passthrough ---
    *((z, _R, "storlab's io_uring does reads and writes, not NVMe passthrough") for z in (
        "readfua", "writefua", "write_mode", "verify_mode", "cmd_type", "cdb_len", "verify_bytchk",
        "read_mode", "md_per_io_size", "pi_act", "pi_chk", "apptag", "apptag_mask", "deac")),
]

FIO_OPTIONS: dict[str, FioOption] = {name: FioOption(name, status, text) for name, status, text in _ROWS}

# the http engine's own options: fio takes them only with ioengine=http
HTTP_OPTIONS = frozenset(name for name, _, _ in _ROWS if name.startswith("http_") or name == "https")
# values never printed, written to an emitted job or recorded in a result: credentials and keys
SECRET_OPTIONS = frozenset({"http_s3_keyid", "http_s3_key", "http_s3_security_token", "http_pass",
                            "http_s3_sse_customer_key", "http_swift_auth_token"})
REDACTED = "<redacted>"


def shown_value(name: str, value):
    """A setting's value as it may be shown or recorded: a secret's is REDACTED."""
    return REDACTED if ALIASES.get(name, name) in SECRET_OPTIONS and value not in (None, "") else value


def status_of(name: str) -> FioOption | None:
    """The table's row for a fio option name (aliases resolved); None for a name fio does not have."""
    return FIO_OPTIONS.get(ALIASES.get(name, name))


BEGIN = "<!-- begin generated: storlab/jobs/fio/options.py -->"
END = "<!-- end generated: storlab/jobs/fio/options.py -->"


def render_table() -> str:
    """The Markdown section of docs/fio.md: every fio option, then every engine."""
    alias_of: dict[str, list[str]] = {}
    for alias, name in ALIASES.items():
        if alias != name:
            alias_of.setdefault(name, []).append(alias)
    word = {"mapped": "translated", "accepted": "accepted, no effect", "refused": "refused"}
    lines = [BEGIN, "", "| fio option | `storlab fio` | storlab / why |", "|---|---|---|"]
    for name in sorted(FIO_OPTIONS):
        o = FIO_OPTIONS[name]
        shown = f"`{name}`" + "".join(f", `{a}`" for a in sorted(alias_of.get(name, ())))
        lines.append(f"| {shown} | {word[o.status]} | {o.text.replace('|', '/')} |")
    lines += ["", "| fio engine | `storlab fio` |", "|---|---|"]
    for name, (engine, line) in ENGINES.items():
        lines.append(f"| `{name}` | {line or f'{engine}: the same engine'} |")
    for name, phases in META_ENGINES.items():
        lines.append(f"| `{name}` | storlab meta phases {', '.join(phases)} (the tree's mkdir is timed too) |")
    for name, why in sorted(REFUSED_ENGINES.items()):
        lines.append(f"| `{name}` | refused: {why} |")
    lines += ["", END]
    return "\n".join(lines)


def write_docs(path: str | Path, section: str, begin: str = BEGIN, end: str = END) -> bool:
    """Put `section` between its markers in the page at `path` (appended if absent); True if changed."""
    page = Path(path)
    text = page.read_text()
    if begin in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = head + section + tail
    else:
        new = text.rstrip("\n") + "\n\n" + section + "\n"
    if new != text:
        page.write_text(new)
        return True
    return False


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        write_docs(sys.argv[2], render_table())
    else:
        print(render_table())
