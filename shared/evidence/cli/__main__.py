"""`python -m evidence.cli …`, the same as the `evidence` script."""

import sys

from evidence.cli import main

sys.exit(main())
