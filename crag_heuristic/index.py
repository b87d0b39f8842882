"""Index directories: a corpus made ready for the gate once, loaded in milliseconds.

``crag-heuristic index --docs FILE --out DIR`` or :meth:`IndexDirectory.build`
writes the FAISS index, the documents, the corpus statistics with each
document's analysis, the BM25 side and the embedder (a fitted LSA projection,
or the spec of yours) with a manifest; ``crag-heuristic retrieve --index DIR``
and ``CRAG.from_index_dir(DIR)`` load them, nothing refitted or recounted. A
directory that does not match its manifest (another format version, a file
missing or changed, another analyzer), a part that is not what the build
wrote, or a manifest whose signature does not hold (``secret=``) is an
:class:`IndexDirectoryError`. A directory is data: an embedder spec it names
is imported only when the loader names it too (``embedder=``) or trusts the
directory (``trust_embedder=True``).
"""

from ._exceptions import IndexDirectoryError
from ._index.directory import IndexDirectory
from ._index.docstore import DocStore
from ._index.manifest import IndexManifest

__all__ = ["DocStore", "IndexDirectory", "IndexDirectoryError", "IndexManifest"]
