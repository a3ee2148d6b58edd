"""The bottom layer every other uses: secret redaction, file helpers, safe text, templates."""
