"""Every head over a corpus: texts streamed through a model and reduced per head as they go (reduce), sharded and
resumable (run), and the profile read back as tables and SQL (store)."""
