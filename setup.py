"""The build's one step setup.cfg cannot say: the optional C extension.

``crag_heuristic._text._native`` (the analyzer's token counting, see
``crag_heuristic/_text/_native.c``) is built when a C compiler and Python's headers are
there; ``optional=True``: without them the install goes on and the analyzer runs the
same steps in Python, with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "crag_heuristic._text._native",
            sources=["crag_heuristic/_text/_native.c"],
            optional=True,
        )
    ]
)
