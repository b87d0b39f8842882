"""Knowledge refinement: sentence strips that bear on the query, within a token budget.

``Evaluator().refine(query, chunks)`` is the usual door; :func:`refine` is the
same with every part passed in. Both return a :class:`Refinement` of
:class:`Strip`\\ s.
"""

from ._evaluator.refine import Refinement, Strip, refine

__all__ = ["Refinement", "Strip", "refine"]
