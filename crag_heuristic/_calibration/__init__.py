"""Fitting and recalibrating the gate, and learning from a grader: what ``crag-heuristic
calibrate``, the router's learning cascade and the library run for a user (see
``crag_heuristic.calibration``). scikit-learn and scipy (the ``calibrate`` extra) are
imported when a gate is fitted."""
