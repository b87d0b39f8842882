"""Fit the bundled sample's LSA projection once and ship it: ``crag_heuristic/data/sample_lsa.npz``.

    python tools/build_sample_vectors.py [--check]

Fits :class:`crag_heuristic._sample.LsaEmbedder` (TF-IDF over the default
analyzer's terms, ``TruncatedSVD(n_components=64, random_state=0)``, with
scikit-learn) on the 64 sample documents and writes the vocabulary, the IDF,
the SVD components and the documents' unit vectors, so that
``sample_retriever()`` and the command line apply the projection with numpy
alone. ``--check`` writes nothing and fails if the shipped arrays differ from
a refit's (``tests/test_sample_vectors.py`` checks the same).
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np

from crag_heuristic._sample import (
    SAMPLE_LSA,
    LsaEmbedder,
    LsaProjection,
    load_sample_corpus,
    save_sample_lsa,
)

TARGET = Path(__file__).resolve().parent.parent / "crag_heuristic" / "data" / SAMPLE_LSA


def build() -> bytes:
    corpus = load_sample_corpus()
    texts = [c.text for c in corpus]
    embedder = LsaEmbedder(texts, n_components=64, seed=0)
    projection = LsaProjection.from_embedder(embedder)
    return save_sample_lsa(projection, embedder.embed_many(texts), [c.id for c in corpus])


def same_arrays(a: bytes, b: bytes) -> bool:
    """Equal arrays (the zip's timestamps aside)."""
    with np.load(io.BytesIO(a)) as x, np.load(io.BytesIO(b)) as y:
        return sorted(x.files) == sorted(y.files) and all(
            np.array_equal(x[k], y[k]) for k in x.files
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    data = build()
    if args.check:
        same = TARGET.exists() and same_arrays(TARGET.read_bytes(), data)
        print(f"{TARGET}: {'up to date' if same else 'DIFFERS from a refit'}")
        return 0 if same else 1
    TARGET.write_bytes(data)
    print(f"wrote {TARGET} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
