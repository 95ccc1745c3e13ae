"""Data preparation, one module per task: `python -m training.data prepare {reverse,translate,lm,all}`."""
