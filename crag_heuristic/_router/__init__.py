"""The CRAG router: retrieve, grade, correct."""

from .result import CRAGResult, Strategy, WebOutcome
from .router import CRAG

__all__ = ["CRAG", "CRAGResult", "Strategy", "WebOutcome"]
