"""docs/architecture.md's table of each method's loop against its listing is what
tests/helpers/loop_lines.py measures on this tree, and every method above twice its listing is
named (`NAME`), with its reason, in the list after the table."""

from tests.helpers.launch import ROOT
from tests.helpers.loop_lines import markdown, table

DOC = f"{ROOT}/docs/architecture.md"


def _section():
    text = open(DOC).read()
    return text[text.index("## Loops against listings"):]


def test_the_table_is_the_measured_one():
    assert markdown() in _section(), ("docs/architecture.md's table of loops against listings is not what "
                                      "`python -m tests.helpers.loop_lines` prints: paste its output there")


def test_every_loop_above_twice_its_listing_says_why():
    reasons = _section().split(markdown())[1]
    reasons = reasons[:reasons.index("\n## ")] if "\n## " in reasons else reasons
    above = [name for name, (code, _, _, cited) in table().items() if code > 2 * cited]
    unnamed = [n for n in above if f"`{n}`" not in reasons]
    assert not unnamed, f"above twice their listing with no reason after the table: {', '.join(unnamed)}"
