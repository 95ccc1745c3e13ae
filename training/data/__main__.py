"""`python -m training.data prepare TASK`: see training/data/prepare.py."""

import sys

from training.data.prepare import main

sys.exit(main())
