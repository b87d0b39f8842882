"""The tokeniser against the analyzer of a past commit and the definition, on real text.

    python benchmarks/tokens_check.py [--data-root ../shared/data] [--against cab6cc6]
                                      [--out benchmarks/results/tokens_check]

For every collection under ``--data-root`` (BEIR layout) and every text in it
(each document's title, its text, title + " " + text as the benchmarks index
it, and every query), :meth:`Analyzer.tokens` and :meth:`Analyzer.analyze`
must give what the analyzer of commit ``--against`` gives (its analyzer
module, read with ``git show`` and loaded as a module of its own) and what the definition gives,
``re.findall(r"[^\\W_]+", unicodedata.normalize("NFKC", text).casefold())``.
When the C extension (``crag_heuristic._text._native``) is built, the analyses it
makes (terms in order, counts, stop words and token counts) must equal the
Python path's (``Analyzer(native=False)``, what an install without it runs).
Any difference is printed and the script exits 1.

It also times both tokenisers on the same texts, ASCII and non-ASCII apart,
in alternation (best of ``--repeats`` passes each, microseconds per text):
the ratios are of one run on a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
import types
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from crag_heuristic.text import Analyzer

ROOT = Path(__file__).resolve().parents[1]
_DEFINITION = re.compile(r"[^\W_]+")


def definition(text: str) -> list[str]:
    """The tokens by their definition (the regular expression on the folded text)."""
    return _DEFINITION.findall(unicodedata.normalize("NFKC", text).casefold())


def past_text_module(commit: str) -> types.ModuleType:
    """The analyzer's module as it was at ``commit`` (``crag_heuristic/_text/analyzer.py``,
    ``crag_heuristic/_text.py`` before the text package), loaded as its own module whose
    relative imports read the installed package."""
    layouts = {
        "crag_heuristic/_text/analyzer.py": "crag_heuristic._text",
        "crag_heuristic/_text.py": "crag_heuristic",  # before the text package
    }
    shown = {
        path: subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True
        )
        for path in layouts
    }
    found = [path for path, done in shown.items() if done.returncode == 0]
    if not found:
        raise SystemExit(f"no analyzer module at {commit}")
    path = found[0]
    module = types.ModuleType(f"crag_text_at_{commit}")
    module.__package__ = layouts[path]
    sys.modules[module.__name__] = module  # dataclasses look their module up by name
    exec(compile(shown[path].stdout, f"{commit}:{path}", "exec"), module.__dict__)
    return module


def collection_texts(folder: Path) -> Iterator[str]:
    """Every title, text, title + " " + text and query of one collection."""
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            title, text = row.get("title") or "", row.get("text") or ""
            yield from (title, text, f"{title} {text}".strip() if title else text)
    queries = folder / "queries.jsonl"
    if queries.exists():
        with queries.open(encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line).get("text") or ""


def best_per_text(fn: Callable[[str], Any], texts: list[str], passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        for text in texts:
            fn(text)
        best = min(best, time.perf_counter() - started)
    return best * 1e6 / max(1, len(texts))


def best_of_two(
    first: Callable[[str], object], second: Callable[[str], object], texts: list[str], repeats: int
) -> tuple[float, float]:
    """Best pass of each function, alternated pass by pass (load drift hits both)."""
    first_best, second_best = float("inf"), float("inf")
    for _ in range(repeats):
        first_best = min(first_best, best_per_text(first, texts, 1))
        second_best = min(second_best, best_per_text(second, texts, 1))
    return first_best, second_best


def timings(past: Any, texts: list[str], repeats: int) -> dict[str, float]:
    """Best pass of each tokeniser, this one's and the past commit's."""
    now_best, past_best = best_of_two(Analyzer.tokens, past.tokens, texts, repeats)
    return {"now_us": now_best, "past_us": past_best, "past_over_now": past_best / now_best}


def analyze_ratio(now: Analyzer, python: Analyzer, texts: list[str], repeats: int) -> float | None:
    """The extension's analysis time over the Python path's; ``None`` when it is not built."""
    if not now.native:
        return None
    fast, slow = best_of_two(now.analyze_lazily, python.analyze_lazily, texts, repeats)
    return fast / slow


def _fields(stats: Any) -> tuple[Any, ...]:
    """An analysis as plain values (the past commit's TextStats is another class)."""
    return (
        stats.term_set,
        stats.stop_set,
        stats.n_tokens,
        dict(stats.term_counts),
        stats.n_terms,
    )


def native_differs(fast: Any, python: Analyzer, text: str) -> bool:
    """Whether ``fast`` (the extension's analysis of ``text``) differs from the Python
    path's: its terms (in order), counts, stop words and token count."""
    slow = python.analyze(text)
    return _fields(fast) != _fields(slow) or list(fast.term_counts.items()) != list(
        slow.term_counts.items()
    )


def check_collection(folder: Path, past_module: types.ModuleType, repeats: int) -> dict[str, Any]:
    texts = list(collection_texts(folder))
    now, past, python = Analyzer(), past_module.Analyzer(), Analyzer(native=False)
    differences, native_differences = [], []
    for text in texts:
        tokens = Analyzer.tokens(text)
        same = tokens == past.tokens(text) == definition(text)
        analysis = now.analyze(text)
        if not same or _fields(analysis) != _fields(past.analyze(text)):
            differences.append(text[:80])
        if now.native and native_differs(analysis, python, text):
            native_differences.append(text[:80])
    wide = [t for t in texts if not t.isascii()]
    narrow = [t for t in texts if t.isascii()]
    return {
        "texts": len(texts),
        "non_ascii": len(wide),
        "chars": sum(map(len, texts)),
        "differences": len(differences) + len(native_differences),
        "first_differences": (differences + native_differences)[:5],
        "native_checked": now.native,
        "native_differences": len(native_differences),
        "analyze_native_over_python": analyze_ratio(now, python, texts, repeats),
        "ascii": timings(past, narrow, repeats),
        "non_ascii_timing": timings(past, wide, repeats) if wide else None,
    }


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Tokens: this analyzer against commit {report['against']} and the definition",
        "",
        f"Every title, text, title + text and query of each collection; Python "
        f"{report['python']}, a shared and loaded machine (best of {report['repeats']} "
        "alternated passes; microseconds per text).",
        "",
        "| collection | texts | non-ASCII | differences | ASCII now / before | "
        "non-ASCII now / before | non-ASCII before / now | C extension | analyses C / Python |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for name, row in report["collections"].items():
        a, w = row["ascii"], row["non_ascii_timing"]
        wide = (
            f"{w['now_us']:.1f} / {w['past_us']:.1f} | {w['past_over_now']:.2f}x" if w else "- | -"
        )
        native = (
            f"{row['native_differences']} differences" if row["native_checked"] else "not built"
        )
        ratio = row["analyze_native_over_python"]
        lines.append(
            f"| {name} | {row['texts']:,} | {row['non_ascii']:,} | {row['differences']} | "
            f"{a['now_us']:.1f} / {a['past_us']:.1f} | {wide} | {native} | "
            f"{'-' if ratio is None else f'{ratio:.2f}x'} |"
        )
    lines += ["", f"Differences in all: **{report['differences']}**."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--against", default="cab6cc6")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write OUT.md and OUT.json")
    args = parser.parse_args()
    past = past_text_module(args.against)
    folders = sorted(p for p in args.data_root.iterdir() if (p / "corpus.jsonl").exists())
    collections = {p.name: check_collection(p, past, args.repeats) for p in folders}
    report = {
        "benchmark": "tokens_check",
        "against": args.against,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "repeats": args.repeats,
        "collections": collections,
        "differences": sum(row["differences"] for row in collections.values()),
    }
    markdown = to_markdown(report)
    print(markdown)
    for name, row in collections.items():
        for text in row["first_differences"]:
            print(f"DIFFERENT ({name}): {text!r}", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown)
    return 1 if report["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
