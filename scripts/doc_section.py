"""Shared by the scripts that write one section of a page (drills_doc.py,
durability_doc.py): the section is the lines between two marker comments,
which stay."""


def replace_section(path, begin, end, lines):
    """Writes `lines` (the markers included) over the text from `begin` to
    `end` in the page at `path`."""
    page = open(path, encoding="utf-8").read()
    start, stop = page.index(begin), page.index(end) + len(end)
    page = page[:start] + "\n".join(lines) + page[stop:]
    open(path, "w", encoding="utf-8").write(page)
