"""The CRAG router: retrieve, grade, correct."""

from .result import CRAGResult, Strategy, WebOutcome
from .rewrite import keyword_query
from .router import CRAG

__all__ = ["CRAG", "CRAGResult", "Strategy", "WebOutcome", "keyword_query"]
