"""A corpus folder (analysis.corpus.run) read back: every head's profile as tables, and SQL over the shards.

Layers, heads, text numbers and positions count from 1, as everywhere a person reads.

SQL runs in DuckDB (embedded: no server), over these views of the folder's Parquet files:
- `heads`: a row a head, its corpus scores (attention, layer, head, previous_token, first_token, current_token,
  same_token, induction, entropy);
- `text_heads`: a row a text and head, that text's own scores (text, layer, head, the same score columns);
- `texts`: a row a text (text, source: its file and line, tokens, skipped: why the model could not read it,
  else null; content: the text);
- `contexts`: each head's top contexts (layer, head, rank, text, query, key, weight, snippet, query_piece,
  key_piece);
- `offsets`: each head's mean attention by offset query − key (layer, head, offset, weight);
- `sample`: the sampled query and key vectors (layer, head, text, position, piece, context: its snippet with the
  position in [], query_vector, key_vector).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.corpus.reduce import SUBLAYERS_KEY
from analysis.corpus.run import FINAL, read_manifest
from analysis.corpus.texts import CorpusError

SHIPPED = Path(__file__).resolve().parents[2] / "corpora"  # each shipped profile: corpora/NAME/profile
# More corpus folders for the Corpus page: `python -m atlas corpus`'s --out folders, or folders of them, joined by
# os.pathsep (`python -m atlas app --corpus DIR` sets it).
CORPORA_VAR = "ATLAS_CORPORA"


@dataclass(frozen=True)
class Corpus:
    """An open corpus folder; `manifest` as the run wrote it."""

    path: Path
    manifest: dict

    @property
    def heads(self) -> pd.DataFrame:
        """A row per head (layer and head from 1), a column per score: its mean over the corpus's texts."""
        return pd.read_parquet(self.path / "heads.parquet")

    @property
    def offsets(self) -> pd.DataFrame:
        """Each head's mean attention by offset (query − key; the end offsets hold everything farther)."""
        return pd.read_parquet(self.path / "offsets.parquet")

    def top_contexts(self, layer: int, head: int, k: int | None = None) -> pd.DataFrame:
        """Head `head` of layer `layer`'s strongest contexts, strongest first: text (its number, from 1), query
        and key (positions from 1, the start token 1), weight and a snippet (the key in «», the query in [])."""
        frame = self._head_rows("contexts", layer, head)
        frame = frame.sort_values("rank", kind="stable").reset_index(drop=True)
        columns = ["text", "query", "key", "weight", "snippet", "query_piece", "key_piece"]
        return frame[columns].head(k) if k is not None else frame[columns]

    def sample(self, layer: int, head: int) -> pd.DataFrame:
        """The sampled positions of head `head` of layer `layer`: text, position, piece, query and key vectors."""
        return self._head_rows("sample", layer, head).reset_index(drop=True)

    def sql(self, query: str) -> pd.DataFrame:
        """The result of `query` (DuckDB's SQL) over this folder's views (see the module's docstring)."""
        import duckdb  # only SQL needs it

        connection = duckdb.connect()
        try:
            for name in FINAL:
                connection.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_quoted(self.path / name)})")
            for name, glob in (("texts", "texts-*.parquet"), ("text_heads", "heads-*.parquet")):
                source = _quoted(self.path / "shards" / glob)
                connection.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({source})")
            try:
                return connection.execute(query).df()
            except duckdb.Error as exc:
                raise ValueError(f"the query failed: {str(exc).splitlines()[0]}") from None
        finally:
            connection.close()

    def _head_rows(self, table: str, layer: int, head: int) -> pd.DataFrame:
        heads = self.manifest["heads"]
        layers = len(self.manifest[SUBLAYERS_KEY])
        for what, value, most in (("layer", layer, layers), ("head", head, heads)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ValueError(f"{what} is 1 to {most} in this corpus, not {value!r}")
        return pd.read_parquet(self.path / f"{table}.parquet", filters=[("layer", "=", layer), ("head", "=", head)])


def _quoted(path: Path) -> str:
    """`path` as an SQL string literal (a quote doubled)."""
    name = str(path) + (".parquet" if "*" not in path.name else "")
    return "'" + name.replace("'", "''") + "'"


def open_corpus(path: str | Path) -> Corpus:
    """The corpus in folder `path`, as `python -m atlas corpus` or atlas.corpus left it; CorpusError when it holds
    none, or one not finished (run the command again: it continues)."""
    folder = Path(path)
    manifest = read_manifest(folder) if folder.is_dir() else None
    if manifest is None:
        raise CorpusError(f"{folder}: holds no corpus: make one with `python -m atlas corpus MODEL TEXTS --out DIR`")
    if not manifest.get("complete"):
        done = sum(s["texts"][1] - s["texts"][0] + 1 for s in manifest["shards"])
        raise CorpusError(
            f"{folder}: the run stopped after {done} of {manifest['texts']} texts: run the same command again to "
            "finish it"
        )
    return Corpus(folder, manifest)


def is_corpus(folder: Path) -> bool:
    return (folder / "manifest.json").is_file()


def profile_folders(shipped: Path = SHIPPED) -> dict[str, Path]:
    """The Corpus page's profiles by name: each shipped one (`shipped`/NAME/profile, by NAME), then each corpus
    folder `$ATLAS_CORPORA` names, or holds one level down, by its folder's name (a name taken already: the
    folder's path). A folder that is missing or holds no corpus is left out (`python -m atlas app --corpus`
    refuses it at the start)."""
    found = {p.parent.parent.name: p.parent for p in sorted(shipped.glob("*/profile/manifest.json"))}
    for entry in filter(None, (e.strip() for e in os.environ.get(CORPORA_VAR, "").split(os.pathsep))):
        root = Path(entry).expanduser()
        try:
            folders = [root] if is_corpus(root) else sorted(p for p in root.iterdir() if is_corpus(p))
        except OSError:
            continue
        for folder in folders:
            name = folder.name if folder.name not in found else str(folder)
            found.setdefault(name, folder)
    return found
