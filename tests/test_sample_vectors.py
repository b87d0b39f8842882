"""The shipped LSA projection of the sample: a refit gives the same vectors, numpy alone applies it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from crag_heuristic._sample import (
    LsaEmbedder,
    LsaProjection,
    load_sample_corpus,
    load_sample_lsa,
    sample_retriever,
)


def test_a_refit_gives_the_shipped_projection_and_vectors() -> None:
    corpus = load_sample_corpus()
    texts = [c.text for c in corpus]
    projection, vectors, ids = load_sample_lsa()
    assert ids == [c.id for c in corpus]
    refit = LsaEmbedder(texts, n_components=64, seed=0)
    assert np.allclose(refit.embed_many(texts), vectors, atol=1e-5)
    fitted = LsaProjection.from_embedder(refit)
    assert fitted.columns == projection.columns
    assert np.allclose(fitted.idf, projection.idf)
    assert np.allclose(fitted.components, projection.components, atol=1e-6)


def test_the_numpy_projection_equals_scikit_learn_on_new_text() -> None:
    corpus = load_sample_corpus()
    texts = [c.text for c in corpus]
    refit = LsaEmbedder(texts, n_components=64, seed=0)
    projection, vectors, _ = load_sample_lsa()
    queries = [
        "How do honeybees tell each other where food is?",
        "bees bees bees dance",  # repeated terms: sublinear tf
        "zzz qqq",  # no known term: a zero vector
        "Ünïcödé ﬁnance",
        "",
    ]
    assert np.allclose(projection.embed_many(queries), refit.embed_many(queries), atol=1e-5)
    assert np.allclose(projection.embed_many(texts), vectors, atol=1e-5)
    assert not projection("zzz qqq").any()
    assert projection(queries[0]).shape == (projection.dimension,) == (63,)  # at most n - 1


def test_sample_retriever_and_the_cli_do_not_import_scikit_learn() -> None:
    code = (
        "import sys; from crag_heuristic._sample import sample_retriever; "
        "r = sample_retriever(); r.search('honeybee dance', 3); "
        "from crag_heuristic._cli import main; "
        "print('sklearn' in sys.modules)"
    )
    # the package's __init__ may import the benchmark harness; the sample path itself must not
    # need scikit-learn: block it and run the path
    blocked = "import sys; sys.modules['sklearn'] = None; " + code
    result = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert sample_retriever().search("honeybee dance", 1)
