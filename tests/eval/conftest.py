"""Synthetic vectors with planted analogies, so that accuracies are far from 0 and from 1.

Each section relates pairs (x_i, y_i) with y_i = x_i + r_section + noise. Some words come in
several case variants (one with >= 5 variants sitting right next to a question word, which
exercises gensim's "skip case variants among the top 5" rule), and filler words surround them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest


@dataclass
class Planted:
    words: list[str]
    matrix: np.ndarray
    questions: Path
    pairs: Path
    w2v: Path


def make_planted(tmp: Path, seed: int = 0, dim: int = 24, n_pairs: int = 12,
                 noise: float = 0.55, filler: int = 400) -> Planted:
    rng = np.random.default_rng(seed)
    vecs: dict[str, np.ndarray] = {}
    sections: dict[str, list[tuple[str, str]]] = {}
    for s, name in enumerate(("capital", "plural", "gender")):
        offset = rng.standard_normal(dim)
        pairs = []
        for i in range(n_pairs):
            x, y = f"{name[:3]}x{i}", f"{name[:3]}y{i}"
            vecs[x] = rng.standard_normal(dim)
            vecs[y] = vecs[x] + offset + noise * rng.standard_normal(dim) * (1 + s)
            pairs.append((x, y))
        sections[name] = pairs
    # case variants: a few words get an upper-case twin; 'capx0' gets many close variants
    for w in list(vecs)[::5]:
        vecs[w.upper()] = rng.standard_normal(dim)
    for v in ("Capx0", "CApx0", "CAPx0", "CAPX0", "cAPX0", "caPX0", "capX0"):
        vecs[v] = vecs["capx0"] + 0.05 * rng.standard_normal(dim)
    for i in range(filler):
        vecs[f"fill{i}"] = rng.standard_normal(dim)
    # question words mixed with some filler first, the rest of the filler after them, so that
    # small restrict_vocab values cut through the questions
    head = list(vecs)[:-filler + 100]
    head = [head[i] for i in rng.permutation(len(head))]
    words = head + list(vecs)[-filler + 100:]
    matrix = np.stack([vecs[w] for w in words]).astype(np.float32)

    lines = []
    for name, pairs in sections.items():
        lines.append(f": {name}")
        for i, (a, b) in enumerate(pairs):
            for j, (c, d) in enumerate(pairs):
                if i != j:
                    q = [a, b, c, d]
                    if rng.random() < 0.3:  # the file's case must not matter
                        q = [w.upper() if rng.random() < 0.5 else w.capitalize() for w in q]
                    lines.append(" ".join(q))
        lines.append(f"{pairs[0][0]} {pairs[0][1]} notaword {pairs[1][1]}")  # OOV -> skipped
        lines.append("only three words")  # malformed -> skipped
    lines.append(": empty-section")
    questions = tmp / "questions.txt"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")

    plines = ["# word1\tword2\tscore"]
    flat = [w for w in words if not w.startswith("fill")]
    for _ in range(60):
        a, b = rng.choice(flat, 2)
        plines.append(f"{a}\t{b.upper()}\t{rng.uniform(0, 10):.2f}")
    plines += ["unknown\tcapx1\t5.0", "bad line without tabs", "capx1\tcapy1\tnot-a-number"]
    pairs_path = tmp / "pairs.tsv"
    pairs_path.write_text("\n".join(plines) + "\n", encoding="utf-8")

    w2v = tmp / "vectors.txt"
    with w2v.open("w", encoding="utf-8") as fh:
        fh.write(f"{len(words)} {dim}\n")
        for w, row in zip(words, matrix, strict=True):
            fh.write(w + " " + " ".join(repr(float(x)) for x in row) + "\n")
    return Planted(words, matrix, questions, pairs_path, w2v)


@pytest.fixture
def planted(tmp_path: Path) -> Planted:
    return make_planted(tmp_path)
