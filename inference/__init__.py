"""Running a checkpoint: loading it (ours, published ones, GGUF), text to tokens, decoding, scoring, the memory
budgets. Returns what the model returns; what it means is analysis/'s work."""
