"""Write each bundled profile's shipped JSON (crag_heuristic/profiles/shipped/NAME.json).

    python tools/ship_profiles.py [--check]

The TOML files of crag_heuristic/profiles/ are the profiles' source (``crag-heuristic
calibrate`` writes them; tools/fit_profiles.sh runs this after it). Parsing one and checking
its fields costs about 3 ms, more than ten evaluations, so the package also ships each as JSON
with its fingerprint, which ``EvaluatorConfig.from_profile`` builds in a fraction of a
millisecond (crag_heuristic._config). Run this after changing a profile file; tests/test_config.py
fails while the two differ. ``--check`` writes nothing and exits 1 when a file is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crag_heuristic._config import (
    _SHIPPED,
    _bundled_profile_files,
    _definition,
    _read_file,
    shipped_text,
)


def expected() -> dict[Path, str]:
    """Each shipped file's path and the text it should hold."""
    files = _bundled_profile_files()
    return {
        _SHIPPED / f"{name}.json": shipped_text(_definition(name, _read_file(path)))
        for name, path in sorted(files.items())
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args()
    wanted = expected()
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    extra = sorted(set(_SHIPPED.glob("*.json")) - set(wanted))
    if args.check:
        for path in [*stale, *extra]:
            print(f"{path} is stale: python tools/ship_profiles.py")
        return 1 if stale or extra else 0
    _SHIPPED.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path}")
    for path in extra:
        path.unlink()
        print(f"removed {path} (no profile file)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
