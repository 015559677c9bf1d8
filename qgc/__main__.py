"""`python -m qgc`: the `qgc` command."""

import sys

from qgc.cli import main

sys.exit(main())
