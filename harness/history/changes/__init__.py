"""The history's change points: where a series steps, how sure that is, and what else changed then.

- :mod:`~harness.history.changes.method`: the method on one series (pure);
- :mod:`~harness.history.changes.series`: asv's result files as series;
- :mod:`~harness.history.changes.attribution`: a commit's identity from its records, and what differs (pure);
- :mod:`~harness.history.changes.find`: every series' change points with their causes;
- :mod:`~harness.history.changes.table`, :mod:`~harness.history.changes.page`: the table and the page of the pages.

``diskbench history changes`` prints them; ``diskbench history`` writes the page at every publish.
"""
