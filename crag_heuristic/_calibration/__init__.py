"""Fitting and recalibrating the gate: what ``crag-heuristic calibrate`` and the library run
for a user (see ``crag_heuristic.calibration``). scikit-learn and scipy (the ``calibrate``
extra) are imported when a gate is fitted."""
