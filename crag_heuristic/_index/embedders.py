"""An index directory's embedder: how its documents and its queries become vectors.

Two kinds, named by a spec:

``"lsa"``
    latent semantic analysis fitted on the corpus when the index is built
    (:class:`~crag_heuristic.sample.LsaEmbedder`: TF-IDF over the analyzer's
    terms and a truncated SVD; scikit-learn, the ``calibrate`` extra), the
    documents embedded with it, and the fitted projection saved
    (``embedder.npz``, :meth:`LsaProjection.arrays`): a query is then embedded
    with numpy alone (:class:`LsaProjection`), nothing refitted, scikit-learn
    never imported.
``"package.module:attribute"``
    a model of yours, imported where the index is built and again where it is
    loaded (the manifest keeps the spec). An attribute that is a class is
    made with no arguments (a model wrapper); the object embeds one text when
    called (or by its ``embed_query``, as a LangChain ``Embeddings``), and a
    batch by its ``embed_many``, ``embed_documents`` or ``encode`` when it has
    one (else one text at a time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError
from .._sample import LsaEmbedder, LsaProjection
from .._text.analyzer import Analyzer
from .._text.corpus import write_npz
from .._text.npz import read_npz

LSA = "lsa"
LSA_FILE = "embedder.npz"
_BATCH_METHODS = ("embed_many", "embed_documents", "encode")

Batch = Callable[[Sequence[str]], Any]


def import_embedder(spec: str) -> Any:
    """The object a ``package.module:attribute`` spec names (a class made with no
    arguments).

    Raises:
        InputError: not such a spec, an import or attribute that fails, a class
            that cannot be made, or an object that embeds nothing (neither
            callable nor with ``embed_query``).
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise InputError(f"an embedder is 'lsa' or 'package.module:attribute', got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot load embedder {spec!r}: {exc}") from exc
    if isinstance(target, type):
        try:
            target = target()
        except Exception as exc:
            raise InputError(f"cannot make embedder {spec!r}: {exc!r}") from exc
    if not callable(target) and not hasattr(target, "embed_query"):
        raise InputError(f"embedder {spec!r} is neither callable nor has embed_query")
    return target


def batch_embedder(embedder: Any) -> Batch:
    """How ``embedder`` embeds many texts: its batch method, else one call a text."""
    for name in _BATCH_METHODS:
        method = getattr(embedder, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    one = getattr(embedder, "embed_query", embedder)
    return lambda texts: [one(text) for text in texts]


def as_rows(vectors: Any, expected: int, where: str) -> npt.NDArray[np.float32]:
    """An embedder's answer for ``expected`` texts as a float32 matrix, checked.

    Raises:
        InputError: not a matrix of ``expected`` rows, or NaN / inf values.
    """
    try:
        rows = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: the embedder returned no vectors ({exc})") from None
    if rows.ndim != 2 or rows.shape[0] != expected or rows.shape[1] < 1:
        raise InputError(
            f"{where}: the embedder returned an array of shape {rows.shape} for {expected} texts"
        )
    if not np.all(np.isfinite(rows)):
        raise InputError(f"{where}: the embedder returned NaN or inf values")
    return np.ascontiguousarray(rows)


def fit(
    spec: str, texts: Sequence[str], analyzer: Analyzer, *, n_components: int
) -> tuple[Any, Batch, dict[str, Any]]:
    """The embedder a spec names, fitted on ``texts`` for ``"lsa"``: the object (what
    embeds a query), how it embeds a batch, and the manifest's entry (without the
    dimension)."""
    if spec == LSA:
        lsa = LsaEmbedder(texts, n_components=n_components, analyzer=analyzer)
        return lsa, lsa.embed_many, {"kind": LSA, "file": LSA_FILE}
    embedder = import_embedder(spec)
    return embedder, batch_embedder(embedder), {"kind": "spec", "spec": spec}


def save(embedder: Any, entry: Mapping[str, Any], folder: Path) -> list[str]:
    """Write what a loader needs of ``embedder`` into ``folder`` (the LSA projection);
    returns the files written."""
    if entry["kind"] != LSA:
        return []
    write_npz(folder / LSA_FILE, LsaProjection.from_embedder(embedder).arrays())
    return [LSA_FILE]


def load(entry: Mapping[str, Any], folder: Path, analyzer: Analyzer) -> Any:
    """The query embedder a manifest's entry names.

    Raises:
        InputError: an unknown kind, an unreadable projection, or a spec that
            does not load (see :func:`import_embedder`).
    """
    if entry.get("kind") == LSA:
        try:
            return LsaProjection.from_arrays(read_npz(folder / LSA_FILE), analyzer)
        except (OSError, KeyError, ValueError, TypeError, IndexError) as exc:
            raise InputError(f"cannot read the LSA projection: {exc}") from None
    if entry.get("kind") == "spec" and isinstance(entry.get("spec"), str):
        return import_embedder(entry["spec"])
    raise InputError(f"unknown embedder {dict(entry)!r}")
