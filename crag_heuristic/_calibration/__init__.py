"""The runtime calibration room: fitting the gate, its bands, and learning from a grader."""
