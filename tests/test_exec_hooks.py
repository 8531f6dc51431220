"""exec_prerun / exec_postrun (fio's): a shell command run before and after a phase, its output in
PHASE.WHEN.txt, its exit status in the document; a failing command ends the run with an error
before the phase does any I/O."""
from __future__ import annotations

import json
import subprocess
import sys

from storlab import schemas


def run(tmp_path, *args):
    out = tmp_path / "run.json"
    r = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", str(tmp_path / "f"), "--size", "1m",
                        "--rw", "write", "--no-store", "-q", "--json", str(out), *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return r, (json.loads(out.read_text()) if out.exists() else None)


def test_commands_run_around_the_phase_and_are_recorded(tmp_path):
    r, doc = run(tmp_path, "--exec-prerun", "test ! -e f && echo before", "--exec-postrun", "stat -c %s f")
    assert r.returncode == 0, r.stderr
    schemas.validate(doc)
    assert [(e["when"], e["returncode"]) for e in doc["exec"]] == [("prerun", 0), ("postrun", 0)]
    assert (tmp_path / "write.prerun.txt").read_text() == "before\n"       # the file was not there yet
    assert (tmp_path / "write.postrun.txt").read_text() == "1048576\n"     # ... and written in full after


def test_a_failing_prerun_ends_the_run_before_any_io(tmp_path):
    r, _ = run(tmp_path, "--exec-prerun", "echo no >&2; exit 3")
    assert r.returncode == 1 and "exited with 3" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "f").exists()
    assert (tmp_path / "write.prerun.txt").read_text() == "no\n"
