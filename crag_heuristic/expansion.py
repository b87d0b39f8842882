"""Query expansion for the PARTIAL route, and the fusion of the rankings.

:class:`SynonymExpander` (the router's default) reads synonym files in the
Solr/Elasticsearch format (:func:`load_synonyms`, :func:`parse_synonyms`,
:class:`SynonymSet`); :class:`PRFExpander` adds terms from the first
retrieval. Both return an :class:`Expansion` and satisfy
:class:`QueryExpander`. The router fuses the rankings of the expanded queries
with :func:`reciprocal_rank_fusion`.
"""

from ._expansion.base import Expansion
from ._expansion.expander import SynonymExpander
from ._expansion.fusion import reciprocal_rank_fusion
from ._expansion.prf import PRFExpander
from ._expansion.synonyms import SynonymSet, load_synonyms, parse_synonyms
from ._protocols import QueryExpander

__all__ = [
    "Expansion",
    "PRFExpander",
    "QueryExpander",
    "SynonymExpander",
    "SynonymSet",
    "load_synonyms",
    "parse_synonyms",
    "reciprocal_rank_fusion",
]
