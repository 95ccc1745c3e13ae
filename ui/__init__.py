"""The Streamlit glue between the pages (views/) and the work they show (inference/, analysis/, viz/), one module a
concern.

- `state`: widget values kept in the URL and across pages; each page declares its own keys.
- `cache`: the checkpoints, their model workers and the analyses, shared by every session.
- `charts`: figures and tables built from an analysis, cached.
- `sidebar`: the model and text pickers, and what a page reads of them.
- `reference`: how sure the model was of its tokens, and a reference read by forced decoding (Explore, Generate).
- `widgets`: the shared pickers (attention, layer, head, token) and drawing a chart.
- `errors`: a message in place of a traceback.
- `markdown`: text from a person, a link, a file or a tokenizer shown as typed, never read as Markdown.

Each page imports the modules it uses; nothing is re-exported here.
"""
