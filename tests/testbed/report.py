"""Writing generated tables into documents: the text between `<!-- BEGIN generated:NAME -->` and
`<!-- END generated:NAME -->` is replaced, the rest of the page is kept."""
from __future__ import annotations

from pathlib import Path

__all__ = ["replace_generated", "markdown_table"]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def replace_generated(path: str | Path, name: str, text: str) -> None:
    """Put text between the markers of NAME in the page (appended with markers if absent)."""
    page = Path(path)
    begin, end = f"<!-- BEGIN generated:{name} -->", f"<!-- END generated:{name} -->"
    body = page.read_text() if page.exists() else ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in body and end in body:
        head, rest = body.split(begin, 1)
        _, tail = rest.split(end, 1)
        body = head + block + tail
    else:
        body = body.rstrip() + "\n\n" + block + "\n"
    page.write_text(body)
