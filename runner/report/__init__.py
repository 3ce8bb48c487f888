"""`prooflock report`: a static, offline HTML page of a run (a checkpoint log or a bundle).

Modules, in the order data flows: load (log or bundle, refusing a tampered chain), replayed (a
replay file lined up with the records), tables / diagrams / geometry / environment / statement
(what each section shows), plots (SVG time distributions), page (Jinja2, autoescaped), write
(`write_report`, which puts it together). Everything an artifact supplies passes text.visible.
"""

from runner.report.write import ReportSummary, write_report

__all__ = ["ReportSummary", "write_report"]
