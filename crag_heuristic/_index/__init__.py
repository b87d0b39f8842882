"""An index directory: everything ``crag-heuristic retrieve`` needs for a corpus, built once.

``directory.py`` (IndexDirectory: build, load, the parts), ``manifest.py``
(what the directory holds, checked on load), ``docstore.py`` (the documents,
read when asked for), ``embedders.py`` (the embedder: a fitted LSA projection
saved, or the spec of one to import); public face: ``crag_heuristic.index``.
"""
