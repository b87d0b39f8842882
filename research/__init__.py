"""How the shipped default was chosen: the model-selection research, beside the library.

Not part of the wheel: run from a checkout of the repository, with the ``bench`` extra
installed (``pip install -e '.[bench]'``), as ``python -m research.<module>``:

* :mod:`research.loco`: nested leave one collection out, the gate's evidence and bands
  chosen among the variants of :mod:`research.variants` by the rules of
  :mod:`research.selection` (``benchmarks/results/loco/``: the report and the ledger);
* :mod:`research.self_calibration`: how to self-calibrate, chosen the same nested way
  (``benchmarks/results/self_calibration/``);
* :mod:`research.evidence_probe`: every candidate evidence, alone and what it adds
  nested (``benchmarks/results/evidence_probe/``);
* :mod:`research.corrections`: which correction pays, route variants
  (:mod:`research.route_variants`) chosen on training data
  (``benchmarks/results/corrections/``).

It is a user of the library: it imports public names only (``crag_heuristic``,
``crag_heuristic.bench``, ``crag_heuristic.calibration`` ...; tests/test_layers.py checks).
"""
