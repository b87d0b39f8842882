"""Evidence the gate might read, tried one by one: what each predicts alone and what it adds.

    pip install '.[bench]' && python benchmarks/evidence_probe.py [--data-root ../shared/data]
        [--sentences]

On the failure benchmark's retrievals of every collection (natural test
retrievals + leave-relevant-out probes, k = 10), each candidate below is
computed per retrieval and scored by failure ROC-AUC (natural + probes, and
natural alone). Then the question that matters for the gate: does it add
anything, honestly? A logistic regression on every subset of at most three
of the base candidates is chosen by an inner leave-one-collection-
out on the other collections and scored on the one left out (nested, as
``crag-heuristic bench --loco`` chooses the gate), once without a family of
evidence and once with it.

Every candidate that reads the corpus beyond the list (centroids, the
neighbours of a document, the deeper ranking) is computed, for a probe, on the
corpus WITHOUT the query's relevant documents: a probe is a corpus gap, and a
feature computed on the whole corpus gives away what the probe lacks (the
local density of a document, ``cos - mean cos to its 10 nearest documents``,
looked like +0.04 AUC until it was computed this way, and then lost).

The probe itself is :func:`crag_heuristic.bench.run_evidence_probe`.
``--sentences`` adds the sentence-level cosine (the best sentence of a chunk
against the query, MiniLM; the harness's sentence vectors, encoded on first use
and cached under ``--out``/cache): slow on two cores the first time.

Writes ``evidence_probe.md`` and ``evidence_probe.json`` to ``--out``
(default benchmarks/results/evidence_probe). Its findings are kept in the
ledger (``benchmarks/results/loco/ledger.md`` links here), kept or not.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from crag_heuristic.bench import run_evidence_probe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--out", default="benchmarks/results/evidence_probe")
    parser.add_argument("--sentences", action="store_true", help="add the sentence-level cosine")
    args = parser.parse_args(argv)
    command = (
        "python benchmarks/evidence_probe.py"
        + "".join(
            f" {flag} {shlex.quote(value)}"
            for flag, value in (("--data-root", args.data_root), ("--out", args.out))
        )
        + (" --sentences" if args.sentences else "")
    )
    run_evidence_probe(args.data_root, args.out, sentences=args.sentences, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
