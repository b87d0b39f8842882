"""Text analysis and corpus statistics (the public face is ``crag_heuristic.text``).

* :mod:`.analyzer`: :class:`Analyzer` (tokens, stop words, Snowball stems,
  sentences) and a text's :class:`TextStats`; the C extension
  ``_native`` (``_native.c``, optional) counts ASCII text when it is built.
* :mod:`.terms`: the term table (term -> count, in compact arrays) and 64-bit term keys.
* :mod:`.analyses`: :class:`ChunkAnalyses`, each document's stored analysis.
* :mod:`.counting`: counting a corpus's terms in batches (what an engine runs).
* :mod:`.corpus`: :class:`CorpusStats`, document frequencies and IDF weights, and
  their file format.
* :mod:`.engines`: :class:`LocalEngine` and :class:`DaskEngine`, where the counts run.
* :mod:`.sentences`: :class:`SentenceVectors`, each document's sentence vectors.

Nothing here imports the evaluator, the router or a retriever; the package
imports nothing itself: import from the defining module.
"""
