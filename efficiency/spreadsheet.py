"""Cells that spreadsheet programs open safely: every CSV the portal writes (pages, packs) uses it.

OWASP's CSV injection guard: a cell a spreadsheet program would read as a formula gets a leading
quote. Tab and carriage return both start one in Excel and LibreOffice, and so does a formula
behind leading whitespace ("  =1+1", "\\n=cmd").
"""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell_text(value: str) -> str:
    """``value`` made inert for spreadsheet programs: a formula-like cell gets a leading quote."""
    if value.startswith(FORMULA_STARTS) or value.lstrip().startswith(FORMULA_STARTS):
        return "'" + value
    return value
