"""The history's change points: where a series steps, how sure that is, and what else changed then.

- :mod:`~harness.changes.method`: the method on one series (pure);
- :mod:`~harness.changes.series`: asv's result files as series;
- :mod:`~harness.changes.attribution`: a commit's identity from its records, and what differs (pure);
- :mod:`~harness.changes.find`: every series' change points with their causes;
- :mod:`~harness.changes.table`, :mod:`~harness.changes.page`: the table and the page of the pages.

``diskbench history changes`` prints them; ``diskbench history`` writes the page at every publish.
"""
