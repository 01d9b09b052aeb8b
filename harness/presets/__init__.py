"""Presets: the seed experiments as named sweeps, scalable, with the seeds' own figures.

- :mod:`~harness.presets.preset`: the preset file (``harness/data/presets/NAME.toml``, a sweep
  spec with a ``[preset]`` table), listing and loading presets, the spec ``diskbench sweep``
  runs, and the ``--preset list`` text with its time estimates;
- :mod:`~harness.presets.scaling`: ``--scale``, the scaled parameters and the scaled sweep names;
- :mod:`~harness.presets.seed`: the seed's figures (``NAME.seed.toml``) and its shape claims
  checked against ours;
- :mod:`~harness.presets.select`: cells as flat values and the ``where`` selectors over them.

What a preset reports but cannot run (qcow2 compressed writes) is probed with the other
capabilities of this QEMU, in :mod:`harness.sample.capabilities`.
"""

from __future__ import annotations

from harness.presets.preset import (
    LAYOUTS,
    PRESETS_DIR,
    SEED_SUFFIX,
    PlotSpec,
    Preset,
    TableSpec,
    estimate_s,
    list_presets,
    load_preset,
    parse_preset,
    probes_of,
    render_list,
    resolve_spec,
)
from harness.presets.scaling import (
    MAX_SCALE,
    SCALABLE,
    check_scale,
    scale_value,
    scaled_name,
    split_scaled_name,
)
from harness.presets.seed import (
    SAME_TOLERANCE,
    BonnieRow,
    Figure,
    Order,
    Ratio,
    Resolve,
    SeedReference,
    ShapeCheck,
    check_order,
    check_ratio,
    check_shape,
    direction,
    load_reference,
)
from harness.presets.select import Where, cell_values, display_value, matches, parse_where
from harness.sample.capabilities import PROBE_LABELS, read_probes

__all__ = [
    "LAYOUTS",
    "MAX_SCALE",
    "PRESETS_DIR",
    "PROBE_LABELS",
    "SAME_TOLERANCE",
    "SCALABLE",
    "SEED_SUFFIX",
    "BonnieRow",
    "Figure",
    "Order",
    "PlotSpec",
    "Preset",
    "Ratio",
    "Resolve",
    "SeedReference",
    "ShapeCheck",
    "TableSpec",
    "Where",
    "cell_values",
    "check_order",
    "check_ratio",
    "check_scale",
    "check_shape",
    "direction",
    "display_value",
    "estimate_s",
    "list_presets",
    "load_preset",
    "load_reference",
    "matches",
    "parse_preset",
    "parse_where",
    "probes_of",
    "read_probes",
    "render_list",
    "resolve_spec",
    "scale_value",
    "scaled_name",
    "split_scaled_name",
]
