"""Published models' parts beside the paper's (model.transformer), one small module each, as TransformerLens
keeps its components/: model.factory.parts_for chooses them from a config's `published` switches.

- embeddings.py: token embeddings without the paper's √d_model scale (BERT, GPT-2, Llama).
- no_bias.py: projections without biases (Llama).
- grouped_query.py: grouped-query attention, key/value heads shared by groups of query heads (Llama).
- rotary.py: rotary positions, which turn queries and keys instead of being added (RoFormer, Llama), on all of
  each head's features or its first share (GPT-NeoX).
- feed_forward.py: GELU and its tanh approximation (BERT, GPT-2), and the gated SwiGLU unit (Llama).
- parallel.py: GPT-NeoX's parallel layer, attention and feed-forward both reading the layer's input.
- bert.py: BERT's input (token types, a norm over the embedding sum) and its masked-LM head.
RMSNorm (Llama) is torch.nn.RMSNorm.
"""
