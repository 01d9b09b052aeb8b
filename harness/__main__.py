"""``python -m harness`` is the same as the ``diskbench`` command."""

from harness.cli import main

raise SystemExit(main())
