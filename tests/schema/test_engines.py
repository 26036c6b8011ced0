"""The two ECMA-262 engines give one answer: wherever the linear engine takes a pattern, it
matches what the budgeted (translated ``regex``) engine matches, on generated patterns and texts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from glovebox.schema._ecmaregex import PatternError, compile_pattern, linear

ATOMS = [
    "a", "b", "é", "1", "٣", " ", "\u00a0", "\u2028", "\n", "_", "-", ".", "\\d", "\\D", "\\w", "\\W", "\\s",
    "\\S", "[a-c]", "[^a]", "[\\d_]", "[\\s\\S]", "\\p{Letter}", "\\P{L}", "\\p{Nd}", "\\u00e9", "\\x41",
    "\\cJ", "\\t", "\\.", "\\-", "[\\b]", "\\b", "\\B", "(?:a|b)", "(?<n>a)", "\\/",
]  # fmt: skip
QUANTIFIERS = ["", "", "*", "+", "?", "{2}", "{1,3}", "*?", "+?"]
ALPHABET = "ab é1٣ \u00a0\u2028\n_-.AJ\t/ß"


@st.composite
def patterns(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.tuples(st.sampled_from(ATOMS), st.sampled_from(QUANTIFIERS)), min_size=1, max_size=5))
    body = "".join(atom + quantifier for atom, quantifier in pieces)
    if draw(st.booleans()):
        body = f"({body})|{draw(st.sampled_from(ATOMS))}"
    return draw(st.sampled_from(["", "^"])) + body + draw(st.sampled_from(["", "$"]))


@settings(max_examples=400, deadline=None)
@given(patterns(), st.lists(st.text(alphabet=ALPHABET, max_size=8), min_size=1, max_size=6))
def test_the_linear_engine_answers_as_the_budgeted_one(pattern: str, texts: list[str]) -> None:
    try:
        budgeted = compile_pattern(pattern)
    except PatternError:
        return
    matches = linear(pattern)
    if matches is None:
        return
    for text in texts:
        assert matches(text) == (budgeted.search(text) is not None), (pattern, text)


def test_the_linear_engine_leaves_what_it_reads_otherwise_to_the_budgeted_one() -> None:
    for pattern in [
        "\\bb",
        "a\\B",
        "(?<=a)b",
        "a(?=b)",
        "(a)\\1",
        "(?<n>a)\\k<n>",
        "[]",
        "[^]",
        "\\0",
        "\\uD83D\\uDE00",
    ]:
        assert linear(pattern) is None, pattern
        compile_pattern(pattern)
