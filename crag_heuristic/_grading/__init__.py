"""The cascade's expensive graders and its escalation policy (see ``crag_heuristic.grading``)."""
