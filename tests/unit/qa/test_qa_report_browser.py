"""The report renders in a real headless browser (Debian's chromium; no skip when it is missing)."""

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from pipeline.qa.report import write_report

from .test_qa_report import sample_results

CHROMIUM_TIMEOUT_S = 90


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("chromium is not installed: apt-get install chromium (tools/setup.sh does)")


def run_chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", "--hide-scrollbars", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S, check=False)


def png_colours(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct colours) of an 8-bit RGB/RGBA PNG, decoded by hand."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour_type in (2, 6), (depth, colour_type)
    bpp = 3 if colour_type == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, colours = bytearray(stride), set()
    for row in range(height):
        start = row * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prev, bpp)
        colours.update(bytes(line[i : i + 3]) for i in range(0, stride, bpp * 7))  # sample every 7th pixel
        prev = line
    return width, height, len(colours)


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> bytearray:
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + pred) & 0xFF
    return line


def test_report_renders_in_headless_chromium(tmp_path):
    pack, results = sample_results()
    report = write_report(tmp_path / "report.html", results, pack=pack)
    url = report.resolve().as_uri()

    dom = run_chromium("--dump-dom", url, profile=tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    for element_id in ("summary", "score-distribution", "findings-by-rule", "rules", "agents", "worst-calls"):
        assert f'id="{element_id}"' in html, element_id
    assert html.count("<svg") == 2 and html.count('class="bar"') >= 10
    assert 'id="total-calls">3<' in html
    assert "misselling.guaranteed_returns" in html and "[CARD]" in html

    shot = tmp_path / "report.png"
    result = run_chromium(
        f"--screenshot={shot}", "--window-size=1200,1600", url, profile=tmp_path / "profile-png"
    )
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    width, height, colours = png_colours(shot)
    assert (width, height) == (1200, 1600)
    assert colours > 20, f"screenshot looks blank ({colours} colours)"
