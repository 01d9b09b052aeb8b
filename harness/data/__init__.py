"""Files the package reads at run time and ships inside itself (see :func:`harness.paths.package_data`):

- ``record.schema.json``: the record schema (``docs/record.md`` describes it);
- ``gate.toml``: the gate spec of ``diskbench gate`` when ``--spec`` names none;
- ``presets/NAME.toml`` and ``presets/NAME.seed.toml``: the seed experiments and their figures.
"""
