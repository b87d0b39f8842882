"""Text analysis and corpus statistics, shared by the evaluator, BM25 and expansion.

:class:`Analyzer` turns text into terms (tokens, stop words, Snowball stems,
sentences; ``Analyzer.analyze`` gives a text's :class:`TextStats`);
:class:`CorpusStats` holds document frequencies for IDF weights (a retriever may
hand them to the router through ``corpus_stats()``) and, if built with
``analyses=True``, each document's analysis (:class:`ChunkAnalyses`), which the
evaluator looks chunks up in before it tokenises them; :class:`LocalEngine` and
:class:`DaskEngine` are where the statistics are counted (the same, bit for bit,
on either); :class:`CorpusStatsFileError` (an ``InputError``) refuses a
statistics file built with another analyzer, written in another format version,
or damaged, and :class:`StatsEngineError` says the engine failed;
:class:`SentenceVectors` holds each document's sentence vectors, made at index
time with the index's embedder, for the opt-in ``sentence_similarity`` evidence
(``FaissRetriever(..., sentences=...)``), from the sentences :func:`split_sentences`
cuts a text into.
"""

from ._exceptions import CorpusStatsFileError, StatsEngineError
from ._text.analyses import ChunkAnalyses
from ._text.analyzer import Analyzer, TextStats, split_sentences
from ._text.corpus import CorpusStats
from ._text.engines import DaskEngine, LocalEngine
from ._text.sentences import SentenceVectors

__all__ = [
    "Analyzer",
    "ChunkAnalyses",
    "CorpusStats",
    "CorpusStatsFileError",
    "DaskEngine",
    "LocalEngine",
    "SentenceVectors",
    "StatsEngineError",
    "TextStats",
    "split_sentences",
]
