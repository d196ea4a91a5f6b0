"""The self-contained HTML report of ``turnkit replay --html FILE``.

One file, nothing fetched: inline CSS, charts drawn here as inline SVG, no
script (sections fold with ``<details>``). It shows what was replayed and what
failed, the results table, the paired comparisons against the first detector,
the response-latency CDFs, the operating-point curves of a ``--sweep``, and a
timeline per call: the labels (caller turns with their holds, backchannels,
echo, noise, the recorded agent) above one lane per detector with its
end-of-turn decisions and the replayed agent audio.

Layers, each importing only the ones before it:

- :mod:`~turnkit.replay.report.svg`: chart primitives (escaping, number
  formats, ticks, palettes, axes, legends, swatches, tooltips);
- :mod:`~turnkit.replay.report.model`: typed views of the replay results the
  report reads (:class:`ReportData`), validated once at the entry;
- :mod:`~turnkit.replay.report.charts`: the charts (paired-difference forest,
  latency CDFs, operating points, call timelines);
- :mod:`~turnkit.replay.report.page`: the page (sections, tables, prose) and
  the atomic write.

Every piece of text that comes from the data (call ids, paths, transcripts,
detector specs, error messages) is escaped, in element content and in
attribute values alike. The output depends only on the inputs: the same
inputs give the same bytes.

Example::

    write_report(Path("report.html"), results=results, comparisons=comparisons,
                 sweeps=sweeps, calls=calls, failed=failed)
"""

from turnkit.replay.report.model import ReportData, ReportInputs
from turnkit.replay.report.page import render_page, render_report, write_report

__all__ = ["ReportData", "ReportInputs", "render_page", "render_report", "write_report"]
