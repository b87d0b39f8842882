"""Text analysis and corpus statistics, shared by the evaluator, BM25 and expansion.

:class:`Analyzer` turns text into terms (tokens, stop words, Snowball stems,
sentences); :class:`CorpusStats` holds document frequencies for IDF weights
(a retriever may hand them to the router through ``corpus_stats()``);
:class:`CorpusStatsFileError` (an ``InputError``) refuses a statistics file
built with another analyzer, written in another format version, or damaged;
:class:`SentenceVectors` holds each document's sentence vectors, made at index
time with the index's embedder, for the opt-in ``sentence_similarity``
evidence (``FaissRetriever(..., sentences=...)``).
"""

from ._corpus import CorpusStats
from ._exceptions import CorpusStatsFileError
from ._retrievers.sentences import SentenceVectors
from ._text import Analyzer

__all__ = ["Analyzer", "CorpusStats", "CorpusStatsFileError", "SentenceVectors"]
