"""The HTML report (docs/files.md): ``render_report(results) -> str`` and ``write_report(results, path)``."""

from fdp_audit.report.render import load_results, render_report, write_report

__all__ = ["load_results", "render_report", "write_report"]
