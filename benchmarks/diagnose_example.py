"""Write the worked example of docs/diagnose.md: build a testbed stack (four throttled loop devices
in btrfs RAID 0, the last one four times slower), run `storlab diagnose` on it inside the throttle
and put the command and its real output between the markers of docs/diagnose.md.

    sudo python3 benchmarks/diagnose_example.py          # ~2 minutes; needs root, loop, blkio
"""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from testbed import REPO_ROOT, Limits, Testbed, testbed_unavailable  # noqa: E402
from testbed.report import replace_generated  # noqa: E402
from testbed.stacks import build_stack  # noqa: E402

MiB = 1 << 20
FAST = Limits(read_bps=40 * MiB, write_bps=40 * MiB, read_iops=1000, write_iops=1000)
SLOW = Limits(read_bps=10 * MiB, write_bps=10 * MiB, read_iops=250, write_iops=250)
BUDGET = "60s"


def main() -> int:
    why = testbed_unavailable()
    if why:
        print(f"diagnose_example: {why}", file=sys.stderr)
        return 2
    with Testbed("storlab-diagnose-example") as bed:
        built = build_stack(bed, [FAST, FAST, FAST, SLOW], 256 * MiB, btrfs="raid0", fill_fraction=0.3)
        folder = "/mnt/storlab-example"        # a short name for the page: a bind mount of the stack's top
        os.makedirs(folder, exist_ok=True)
        subprocess.run(["mount", "--bind", os.path.dirname(built.target), folder], check=True)
        bed.mounts.append(folder)               # unmounted at teardown, before the stack below it
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
        cmd = [sys.executable, "-m", "storlab.cli.main", "diagnose", folder, "--budget", BUDGET, "--no-store"]
        child = bed.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = child.communicate(timeout=300)
        if child.returncode != 0:
            print(err, file=sys.stderr)
            return 1
        shown = out
        members = ", ".join(os.path.basename(m) for m in built.members)
        text = "\n".join([
            f"Stack: {', '.join(built.layers)}; members {members}, each limited to 40 MiB/s and 1,000 IOPS,",
            f"the last one to 10 MiB/s and 250 IOPS (a quarter), reached at {folder} (a bind mount of the btrfs).",
            "",
            "```",
            f"$ storlab diagnose {folder} --budget {BUDGET}",
            shown.rstrip(),
            "```",
        ])
    replace_generated(os.path.join(ROOT, "docs", "diagnose.md"), "example", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
