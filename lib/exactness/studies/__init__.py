"""One package per study: its parameter rules, run, rows, findings and figures. The workbook finds a study's rules
by its notebook's name (`exactness.studies.<study>.rules`) and imports nothing else of it."""
