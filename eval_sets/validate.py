"""Check a labeled domain and print its counts: ``python -m eval_sets.validate [NAME ...]``.

NAME is a domain of ``eval_sets.domains`` (``adversarial``, ``kubernetes``, ``handbook``); all of
them when none is given. The rules are the help centre's (``eval_sets/adversarial/validate.py``),
with each domain's own bounds: every label is checked against the documents (a chunk id that does
not exist, a gold answer that no relevant chunk states, a strip or evidence not copied from the
knowledge base). Exits 1 listing every problem found, 2 for an unknown domain.
"""

from __future__ import annotations

import sys

from eval_sets.adversarial.validate import format_counts, validate
from eval_sets.domains import DOMAINS, domain


def main(argv: list[str] | None = None) -> int:
    names = (sys.argv[1:] if argv is None else argv) or sorted(DOMAINS)
    if any(n in ("-h", "--help") for n in names):
        print(__doc__)
        return 0
    code = 0
    for name in names:
        try:
            d = domain(name)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        report = validate(d.directory, domain=d)
        print(f"## {name} ({d.title})\n{format_counts(report)}")
        if report.ok:
            print(f"\nOK: {name} is valid.\n")
        else:
            code = 1
            print(f"\nINVALID: {len(report.problems)} problem(s) in {d.directory}:", file=sys.stderr)
            for problem in report.problems:
                print(f"  - {problem}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
