"""Checks of a page in real headless Chromium, shared by the report tests: the page's console
output, every image decoded, no script error (in-page hook), and a screenshot that is not blank."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["chromium_path", "CHECK_HOOK", "run_chromium", "console_lines", "in_page_check", "screenshot",
           "needs_chromium"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHECK_HOOK = """<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message || e.type)); }, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var r = {images: imgs.length,
           broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length,
           errors: window.__errors,
           height: document.body.scrollHeight};
  var pre = document.createElement('pre'); pre.id = 'storlab-check';
  pre.textContent = JSON.stringify(r); document.body.appendChild(pre);
});
</script>"""


def run_chromium(args: list[str], workdir: Path) -> subprocess.CompletedProcess:
    exe = chromium_path()
    profile = tempfile.mkdtemp(dir=workdir, prefix="profile-")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    """Messages the page wrote to the console (errors, failed loads, uncaught exceptions)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def in_page_check(html_file: Path, workdir: Path) -> tuple[dict, list[str]]:
    """Load a copy of the page with an error hook that writes its findings into the DOM."""
    hooked = workdir / ("hooked-" + html_file.name)
    hooked.write_text(html_file.read_text().replace("<head>", "<head>" + CHECK_HOOK, 1))
    res = run_chromium(["--dump-dom", "--virtual-time-budget=10000", hooked.as_uri()], workdir)
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r'<pre id="storlab-check">(.*?)</pre>', res.stdout)
    assert m, "the page did not finish loading"
    return json.loads(m.group(1).replace("&quot;", '"')), console_lines(res.stderr)


def screenshot(html_file: Path, workdir: Path):
    """(colours in a downscaled screenshot, share of non-white pixels, console lines, size)."""
    from PIL import Image

    shot = workdir / (html_file.stem + ".png")
    res = run_chromium([f"--screenshot={shot}", "--window-size=1280,2400", html_file.as_uri()], workdir)
    assert res.returncode == 0, res.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    small = img.resize((320, 600))
    colors = small.getcolors(maxcolors=1 << 20)
    non_white = sum(n for n, c in colors if sum(c) < 3 * 245) / (320 * 600)
    return len(colors), non_white, console_lines(res.stderr), img.size


needs_chromium = pytest.mark.skipif(chromium_path() is None,
                                    reason="chromium not installed (apt-get install chromium)")
