"""The LLM-free evaluator: signals, their weighted combination, and refinement."""
