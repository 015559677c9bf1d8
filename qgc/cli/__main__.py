"""`python -m qgc.cli`, as `python -m qgc`."""

import sys

from qgc.cli import main

sys.exit(main())
