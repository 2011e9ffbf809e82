"""Dependencies run one way, python -> host -> codelets: no file of the host (host/,
python/bindings/) includes a codelet header; what both sides share lives in include/popsnn/."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def test_the_host_includes_no_codelet_header():
    codelet_headers = {p.name for p in (ROOT / "codelets").glob("*.hpp")}
    assert codelet_headers, "codelets/ has headers to guard"
    host_files = [
        p
        for folder in ("host", "python/bindings")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".cpp", ".hpp", ".h")
    ]
    back_up = [
        f"{p.relative_to(ROOT)}: #include {name}"
        for p in host_files
        for name in INCLUDE.findall(p.read_text())
        if "codelets/" in name or Path(name).name in codelet_headers
    ]
    assert not back_up, "the host includes codelet headers:\n" + "\n".join(back_up)
