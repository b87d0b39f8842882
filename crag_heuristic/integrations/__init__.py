"""crag-heuristic inside the frameworks RAG users already run.

Each module needs its extra and is imported on its own; importing this package
imports none of them (``import crag_heuristic`` never loads a framework):

``crag_heuristic.integrations.langchain`` (``pip install 'crag-heuristic[langchain]'``)
    :class:`~crag_heuristic.integrations.langchain.CRAGRetriever`, the router as
    a LangChain ``BaseRetriever`` over any vector store or retriever (sync and
    async, usable in LCEL chains);
    :class:`~crag_heuristic.integrations.langchain.CRAGGradeNode`, a LangGraph
    node that replaces the LLM "grade documents" step of the usual CRAG graph;
    :class:`~crag_heuristic.integrations.langchain.LangChainRetriever`, any
    store or retriever as a crag-heuristic retriever, scores converted.

``crag_heuristic.integrations.llamaindex`` (``pip install 'crag-heuristic[llamaindex]'``)
    :class:`~crag_heuristic.integrations.llamaindex.CRAGPostprocessor`, a
    ``BaseNodePostprocessor`` that grades, filters and annotates nodes.

``crag_heuristic.integrations.qdrant`` (``pip install 'crag-heuristic[qdrant]'``)
    :class:`~crag_heuristic.integrations.qdrant.QdrantRetriever`, a
    crag-heuristic retriever over a Qdrant collection, scores converted per
    the collection's distance.

Score semantics are explicit everywhere: each adapter says which conversion
it applies (``score_semantics``), and scores whose meaning is not known are
kept as ``ScoreKind.UNKNOWN`` (the gate then has no similarity evidence and
its reasoning says so), never guessed.
"""

__all__: list[str] = []
