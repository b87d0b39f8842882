"""A seeded fuzz of the service's routes: the code of ``python benchmarks/http_fuzz.py``
(20,000 requests, committed in benchmarks/results/http_fuzz), 400 requests here.

Lone surrogates, huge numbers, broken framing, bodies that never end, other routes
and methods: no server fault, no 503, a 504 only for a body that never ends, every
error answer a JSON error naming its type, every request answered or closed.
"""

from __future__ import annotations

from types import ModuleType


def test_the_routes_answer_every_fuzzed_request_without_a_fault(http_fuzz: ModuleType) -> None:
    result = http_fuzz.run_fuzz(400, seed=7, concurrency=16)
    assert result["checks"] == dict.fromkeys(result["checks"], True), result
    assert result["server_faults"] == 0 and result["not_json_errors"] == 0
    statuses = result["statuses"]
    assert statuses.get("400", 0) > 100 and statuses.get("200", 0) > 0  # both sides walked
    surrogates = [
        case for case in result["by_case"] if "surrogate" in case
    ]  # every one refused as a client error
    assert surrogates and all(set(result["by_case"][c]) == {"400"} for c in surrogates)
