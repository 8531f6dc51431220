"""Command line for the testbed: build a throttled stack, run storlab on it inside the throttle, tear it
down (also after Ctrl-C or SIGTERM).

    python -m tests.testbed --devices 2 --bps 20MiB --iops 500 --btrfs raid0 -- \\
        --rw read --bs 1MiB --qd 16 --engine io_uring --direct --time 20s
    python -m tests.testbed --devices 4 --shared 40MiB --hold      # build, print, wait for Ctrl-C

The storlab arguments follow `--`; `--target` defaults to the stack's top (a file on the file system,
or the device). Prints the read and write bandwidth and IOPS that storlab measured.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

if __package__ in (None, ""):                      # run as a file: make `tests.testbed` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "tests.testbed"

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
from storlab.units import UnitError, parse_rate, parse_size  # noqa: E402

from .bed import BTRFS_LEVELS, Testbed, TestbedError, testbed_unavailable  # noqa: E402
from .stacks import build_stack  # noqa: E402
from .throttle import Limits  # noqa: E402


def _rate(text: str) -> int:
    try:
        value = int(parse_rate(text if "/" in text else f"{text}/s"))
    except UnitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a limit must be positive (leave the flag out for none)")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except UnitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _terminate(signum, frame):          # SIGTERM tears down like Ctrl-C
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    storlab_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, storlab_args = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(prog="python -m tests.testbed", description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=_positive, default=1, help="member loop devices (default 1)")
    p.add_argument("--size", type=_size, default=256 << 20, help="size of each member (default 256MiB)")
    p.add_argument("--bps", type=_rate, help="bandwidth limit of each member, both directions (e.g. 20MiB)")
    p.add_argument("--iops", type=_positive, help="IOPS limit of each member, both directions")
    p.add_argument("--slow-bps", type=_rate, help="bandwidth limit of the last member instead of --bps")
    p.add_argument("--shared", type=_rate, help="one shared bandwidth limit over all members (a bus)")
    p.add_argument("--btrfs", choices=BTRFS_LEVELS, help="btrfs with this data and metadata profile")
    p.add_argument("--fs", choices=("xfs", "ext4"), help="xfs or ext4 on the top device")
    p.add_argument("--su", type=_size, help="stripe unit for --fs (bytes)")
    p.add_argument("--sw", type=_positive, help="stripe width for --fs (units)")
    p.add_argument("--hold", action="store_true", help="build, print the stack, wait for Ctrl-C")
    args = p.parse_args(argv)
    why = testbed_unavailable()
    if why:
        print(f"testbed: {why}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C tears down too, also when started with SIGINT ignored (a background job of a
    # non-interactive shell inherits SIG_IGN, and Python then installs no handler of its own)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    per = Limits.both(bps=args.bps, iops=args.iops)
    limits = [per] * args.devices
    if args.slow_bps:
        limits[-1] = Limits.both(bps=args.slow_bps, iops=args.iops)
    try:
        with Testbed() as bed:
            stack = build_stack(bed, limits, args.size, btrfs=args.btrfs, fs=args.fs, su=args.su, sw=args.sw,
                                shared_bps=args.shared)
            print(f"testbed: members {' '.join(stack.members)}; target {stack.target}; cgroup {bed.throttle.path}")
            if args.hold:
                # not signal.pause(): a signal landing between the print and the pause would be
                # handled before the pause began, which then waits forever; a short sleep wakes
                # to run the handler within its length
                while True:
                    time.sleep(0.5)
            run_args = list(storlab_args)
            if "--target" not in run_args:
                run_args += ["--target", stack.target] + stack.run_args
            doc = bed.run_storlab(run_args)
            for phase in doc["phases"]:
                for direction in ("read", "write"):
                    d = phase.get(direction)
                    if d and d.get("ops"):
                        print(f"{phase['name']} {direction}: {d['bw_bytes'] / 2**20:.2f} MiB/s, "
                              f"{d['iops']:.1f} IOPS over {d['seconds']:.1f} s")
    except (TestbedError, ValueError, OSError) as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("testbed: interrupted; removed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
