"""External results read into a sago store as labelled runs (``runs.backend = "imported"``).

Modules:

* ``authors_format`` — the released per-row CSVs of the SAGO authors' code: files, columns, runs,
  the latest run per cell, and how each row maps to a sago prompt and variant.
* ``leak``           — leaked prompt tails at the start of replies decoded from left-padded batches.
* ``salad``          — replies that are token salad (a measurable rule), for flagging degenerate models.
* ``importer``       — rows → runs, prompts, variants, responses, deltas (through ``sago_engine.store``).
* ``audit``          — the authors' aggregation of their own rows and the leak's effect, per model × axis.
"""
