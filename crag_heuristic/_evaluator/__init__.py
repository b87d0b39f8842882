"""The LLM-free evaluator: signals, their weighted combination, and refinement."""

from .evaluator import Evaluator, check_k, check_query, verdict_for
from .refine import Refinement, Strip, refine

__all__ = ["Evaluator", "Refinement", "Strip", "check_k", "check_query", "refine", "verdict_for"]
