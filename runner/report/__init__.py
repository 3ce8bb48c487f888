"""`prooflock report`: a static, offline HTML page of a run, from a log or a bundle.

The modules, in the order data flows:
- load: reads a log or bundle, refusing a tampered chain;
- replayed: lines a replay file up with the records;
- tables, diagrams, geometry, environment, statement: what each section shows;
- plots: SVG time distributions;
- page: Jinja2, autoescaped;
- write: `write_report`, which puts it together.

Everything an artifact supplies passes through text.visible.
"""

from runner.report.write import ReportSummary, write_report

__all__ = ["ReportSummary", "write_report"]
