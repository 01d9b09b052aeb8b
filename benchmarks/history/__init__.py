"""The asv history suite: every figure of every cell of the history matrix, per commit.

asv imports this package from the current checkout and runs it against each
commit installed in its environment (``harness`` is the commit's there, and
the commit's ``policy.toml`` and ``images/`` are copied next to it by
``benchmarks/asv_subject.py``).  One real run of every cell happens once
per commit, in :func:`history.run.setup_cache`; the ``track_*`` benchmarks
only read its figures.

- :mod:`history.layout`: pure: the matrix, the figures and their units.
- :mod:`history.run`: the run (``setup_cache``) and the checks before it.
- :mod:`history.matrix`: one class per workload, parameterised by the
  matrix's axes (``matrix.Dd.track_total_s`` ...).
- :mod:`history.policy`: the same figures of the policy's own cell
  (``policy.Dd.track_total_s`` ...).
- :mod:`history.linked`: the same figures of the policy's overlay over a
  populated base, per chain (``linked.Fio.track_host_write_amplification``).

Run it with ``diskbench history``, which names the asv machine after the
accelerator and tells the suite (``DISKBENCH_ASV_MACHINE``).
"""
