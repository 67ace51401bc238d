"""The frames the pages show: report, prompt detail, worst cases, tables, method choices, assumptions, text diff, palette.

Pages render these; all math stays below."""
