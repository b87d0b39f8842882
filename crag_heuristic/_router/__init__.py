"""The CRAG router: retrieve, grade, correct."""
