"""Sizes a newcomer can read: no file in host/, codelets/ or include/ over ~600 lines, no C++
function there over ~80 (a brace-matching scan of the source with comments, strings and
preprocessor lines removed), no module of the Python package over ~600 lines and no Python
function there over ~80 (from its first decorator to its last line)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
CPP_FOLDERS = ("host", "codelets", "include")
SCOPE_WORDS = {"class", "struct", "union", "namespace"}
TOKEN = re.compile(r"[A-Za-z_]\w*|\d\w*|::|->|\S")


def without_comments_and_strings(src: str) -> str:
    """The source with comments, string and character literals and preprocessor lines
    blanked out (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(src)
    at_line_start = True
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            i = src.find("\n", i) if "\n" in src[i:] else n
            continue
        if src.startswith("/*", i):
            end = src.find("*/", i + 2) + 2
            out.append("\n" * src.count("\n", i, end))
            i = end
            continue
        if src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            open_paren = src.find("(", i)
            close = ")" + src[i + 2 : open_paren] + '"'
            end = src.find(close, open_paren) + len(close)
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "#" and at_line_start:  # a directive, with its continuation lines
            while True:
                j = src.find("\n", i)
                if j < 0:
                    i = n
                    break
                if src[j - 1] != "\\":
                    i = j
                    break
                out.append("\n")
                i = j + 1
            continue
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def tokens(path: Path) -> list:
    text = without_comments_and_strings(path.read_text())
    return [
        (m.group(), line)
        for line, row in enumerate(text.split("\n"), 1)
        for m in TOKEN.finditer(row)
    ]


def closing_brace(toks: list, i: int) -> int:
    depth = 0
    for j in range(i, len(toks)):
        depth += {"{": 1, "}": -1}.get(toks[j][0], 0)
        if depth == 0:
            return j
    raise ValueError("unbalanced braces")


def without_template_heads(words: list) -> list:
    while words[:2] == ["template", "<"]:
        depth = 0
        for k in range(1, len(words)):
            depth += {"<": 1, ">": -1}.get(words[k], 0)
            if depth == 0:
                break
        words = words[k + 1 :]
    return words


def function_lengths(path: Path) -> list:
    """(lines, name, first line) of every function body at namespace or class scope, from
    its declaration's first line to its closing brace (lambdas and local classes inside a
    function count towards it)."""
    toks, found = tokens(path), []

    def scope(begin, end):
        stmt, i = [], begin
        while i < end:
            word = toks[i][0]
            if word in (";", "}") or (word == ":" and stmt and stmt[-1][0] in ACCESS):
                stmt, i = [], i + 1
                continue
            if word != "{":
                stmt.append(toks[i])
                i += 1
                continue
            close = closing_brace(toks, i)
            words = without_template_heads([w for w, _ in stmt])
            paren = words.index("(") if "(" in words else len(words)
            if SCOPE_WORDS & set(words[:paren]) or words[:1] == ["extern"]:
                scope(i + 1, close)  # a class or namespace: its functions count one by one
            elif paren < len(words) and "=" not in words[:paren] and "enum" not in words:
                found.append((toks[close][1] - stmt[0][1] + 1, words[paren - 1], stmt[0][1]))
            stmt, i = [], close + 1

    scope(0, len(toks))
    return found


ACCESS = {"public", "private", "protected"}


def cpp_files() -> list:
    return sorted(
        p
        for folder in CPP_FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".cpp", ".hpp", ".h")
    )


def test_the_scan_finds_functions():
    found = {name for _, name, _ in function_lengths(ROOT / "host/src/VertexWiring.cpp")}
    assert {"addVertices", "forward", "backward"} <= found


def test_no_cpp_function_over_80_lines():
    long = [
        f"{p.relative_to(ROOT)}:{line} {name} ({lines} lines)"
        for p in cpp_files()
        for lines, name, line in function_lengths(p)
        if lines > MAX_FUNCTION_LINES
    ]
    assert not long, "split these functions:\n" + "\n".join(long)


def test_no_file_over_600_lines():
    python = sorted((ROOT / "python/popsnn").rglob("*.py"))
    long = [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for p in cpp_files() + python
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert not long, "split these files by job:\n" + "\n".join(long)


def python_function_lengths(path: Path) -> list:
    """(lines, name, first line) of every function and method in a Python module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.append((node.end_lineno - first + 1, node.name, first))
    return found


def test_no_python_function_over_80_lines():
    long = [
        f"{p.relative_to(ROOT)}:{line} {name} ({lines} lines)"
        for p in sorted((ROOT / "python/popsnn").rglob("*.py"))
        for lines, name, line in python_function_lengths(p)
        if lines > MAX_FUNCTION_LINES
    ]
    assert not long, "split these functions:\n" + "\n".join(long)


def test_the_python_scan_finds_functions():
    found = {name for _, name, _ in python_function_lengths(ROOT / "python/popsnn/train.py")}
    assert {"fit", "evaluate"} <= found
