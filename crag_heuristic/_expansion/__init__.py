"""Query expansion for the PARTIAL route: synonym sets and pseudo-relevance feedback.

* :mod:`.synonyms`: the Solr/Elasticsearch synonym file format, the shipped
  sets (``crag_heuristic.synonyms``) and :class:`SynonymSet`;
* :mod:`.expander`: :class:`SynonymExpander`, extra queries from synonyms;
* :mod:`.prf`: :class:`PRFExpander`, extra terms from the first retrieval;
* :mod:`.base`: the :class:`Expansion` result and the :class:`QueryExpander`
  protocol the router calls.
"""

from .base import Expansion, QueryExpander
from .expander import SynonymExpander
from .prf import PRFExpander
from .synonyms import SynonymMatch, SynonymRule, SynonymSet, load_synonyms, parse_synonyms

__all__ = [
    "Expansion",
    "PRFExpander",
    "QueryExpander",
    "SynonymExpander",
    "SynonymMatch",
    "SynonymRule",
    "SynonymSet",
    "load_synonyms",
    "parse_synonyms",
]
