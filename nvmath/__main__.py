"""``python -m nvmath``: print the environment report, then run the self-test.

``python -m nvmath --help`` lists the options (``--json``, ``--no-selftest``, ``--version``) and the
exit statuses: 0 when every check passed or was skipped, 1 when a check failed, 2 on a usage error.
"""

from __future__ import annotations

import sys

from nvmath._diagnostics.cli import main

if __name__ == "__main__":
    sys.exit(main())
