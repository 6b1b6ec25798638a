"""``python -m qclm.commands`` (the workflow's rules call the commands this way)."""

import sys

from qclm.commands import main

sys.exit(main())
