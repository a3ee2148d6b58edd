"""Gate 2 of a finished run, its baseline comparison and its reproduction."""
