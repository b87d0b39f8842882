"""The LLM-free evaluator: signals, their weighted combination, and refinement."""

from .evaluator import Evaluator, verdict_for
from .refine import Refinement, Strip, refine

__all__ = ["Evaluator", "Refinement", "Strip", "refine", "verdict_for"]
