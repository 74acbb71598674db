"""Entry point: ``python -m benchmarks <suite> [options]``."""

from benchmarks.cli import main

raise SystemExit(main())
