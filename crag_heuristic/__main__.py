"""``python -m crag_heuristic`` runs the command line."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
