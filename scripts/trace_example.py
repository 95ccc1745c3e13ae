"""Print the abridged trace example of docs/trace-format.md (run from the repo root).

python scripts/trace_example.py
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.analyze import analyze
from analysis.export import to_json_object
from inference.checkpoint import load_checkpoint
from training.tiny import make_tiny_checkpoint


def cut(value, depth=0, keep=3):
    """Keep the first `keep` items of every list (more for the short token lists), marking cuts with '…'."""
    if isinstance(value, list):
        head = [cut(v, depth + 1, keep) for v in value[:keep]]
        return head + ["…"] if len(value) > keep else head
    if isinstance(value, dict):
        return {k: cut(v, depth + 1, keep) for k, v in value.items()}
    return round(value, 3) if isinstance(value, float) else value


with tempfile.TemporaryDirectory() as tmp:
    ckpt = load_checkpoint(make_tiny_checkpoint(Path(tmp) / "tiny-ed", "encoder-decoder"))
    obj = to_json_object(analyze(ckpt, "Where is it?", target="Wo?", k=2))
obj["attention"] = obj["attention"][:1] + obj["attention"][2:4]
obj = cut(obj)
lines = []
for key, value in obj.items():
    if key != "attention":
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
        continue
    entries = []
    for entry in value if isinstance(value, list) else []:
        if entry == "…":
            entries.append("    …")
            continue
        fields = ",\n".join(f"      {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in entry.items())
        entries.append("    {\n" + fields + "\n    }")
    lines.append('  "attention": [\n' + ",\n".join(entries) + "\n  ]")
print("{\n" + ",\n".join(lines) + "\n}")
