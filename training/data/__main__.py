"""`python -m training.data prepare TASK`: see training/data/prepare.py."""

from training.data.prepare import main

main()
