"""The PARTIAL route's corrections: query expansion and the fusion of rankings.

* :mod:`.synonyms`: the Solr/Elasticsearch synonym file format, the shipped
  sets (``crag_heuristic.synonyms``) and :class:`SynonymSet`;
* :mod:`.expander`: :class:`SynonymExpander`, extra queries from synonyms;
* :mod:`.prf`: :class:`PRFExpander`, extra terms from the first retrieval;
* :mod:`.base`: the :class:`Expansion` result and the :class:`QueryExpander`
  protocol the router calls;
* :mod:`.fusion`: :func:`reciprocal_rank_fusion`, the rankings of the first
  retrieval, the lexical one and the expanded queries made one.

Nothing is imported here: :mod:`crag_heuristic.expansion` lists the public names
and the package's own code imports from the module that defines each (so the
router loads the fusion without the expanders).
"""
