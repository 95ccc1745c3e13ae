"""`python -m atlas train --task lm --text FILE` runs on the README's install (requirements.txt alone): every
package that only requirements-train/dev/pretrained install is made unimportable in a child process."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def names(requirements: str) -> set[str]:
    """Import names of the packages a requirements file pins (its -r includes followed)."""
    found = set()
    for line in (ROOT / requirements).read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found |= names(line[3:].strip())
        elif line:
            found.add(re.split(r"[=<>~!\[ ]", line)[0].lower().replace("-", "_"))
    return found


@pytest.mark.slow  # the everyday tier (-m "not slow and not browser") stays within 2 minutes
def test_train_on_a_text_needs_only_the_runtime_packages(tmp_path: Path) -> None:
    extra = (names("requirements-dev.txt") | names("requirements-pretrained.txt")) - names("requirements.txt")
    assert {"rdata", "sacrebleu", "psutil"} <= extra
    words = "the cat sat on a mat and then it ran to the big red house where old men sing songs of the sea".split()
    text = tmp_path / "small.txt"
    rng = random.Random(0)
    lines = (" ".join(rng.choice(words) for _ in range(12)).capitalize() + "." for _ in range(1500))
    text.write_text("\n".join(lines), encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import runpy, sys
        BLOCKED = {sorted(extra)!r}
        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0].lower() in BLOCKED:
                    raise ImportError(f"{{name}} is not in requirements.txt")
        sys.meta_path.insert(0, Blocker())
        sys.argv = ["atlas", "train", "--task", "lm", "--text", {str(text)!r}, "--max-steps", "2",
                    "--out", {str(tmp_path / "out")!r}]
        runpy.run_module("atlas", run_name="__main__")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "model.safetensors").is_file()
