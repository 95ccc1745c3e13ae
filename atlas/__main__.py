"""Entry point of `python -m atlas`."""

import sys

from atlas.cli import main

sys.exit(main())
