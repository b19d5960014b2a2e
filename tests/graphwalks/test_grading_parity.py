"""GraphWalks graders against the official code as it runs, on adversarial responses.

The expected numbers are literals computed by running the official functions outside the repository (never copied
in), on the same inputs:
- `card`: the extraction and grading of the openai/graphwalks dataset card (README "Extraction and Grading") at the
  pinned dataset revision be6cc6ecf9b4d495b07d1ff53d2a16598e90fed7 (tasks/graphwalks/items.py REVISION): the last line
  by split("\\n"), "Final Answer:" on it, the greedy [...] span, unparsed 0, both sets empty 1, else set F1;
- `lmeval` and `lmeval-flexible`: `process_results` of EleutherAI/lm-evaluation-harness
  lm_eval/tasks/graphwalks/utils.py at commit 4e7e0d47f33bc71070c1d38394bafbb52b117163 (added in 0563daa, #3377),
  its `f1` and `flexible_f1`.
Each case is one a plausible re-implementation gets wrong, or where the graders part.
"""

from __future__ import annotations

import pytest

from ctxbench.tasks.graphwalks.grading import GRADERS, grade

G3 = ["c81e728d9d", "cfcd208495", "a87ff679a2"]

# (response, gold, card, lm-eval f1, lm-eval flexible_f1)
PARITY = [
    ("Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]", G3, 1.0, 1.0, 1.0),
    ("Final Answer: [a87ff679a2, c81e728d9d]", G3, 0.8, 0.8, 0.8),  # order does not matter; a missing node costs recall
    ("Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]\n", G3, 0.0, 1.0, 1.0),  # card: the last line is then empty
    ("Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]  ", G3, 1.0, 1.0, 1.0),
    ("final answer: [c81e728d9d, cfcd208495, a87ff679a2]", G3, 0.0, 0.0, 0.0),  # the marker is case-sensitive
    ("Final Answer: c81e728d9d, cfcd208495, a87ff679a2", G3, 0.0, 0.0, 0.0),  # no brackets: unparsed
    ("Final Answer: ['c81e728d9d', 'cfcd208495', 'a87ff679a2']", G3, 0.0, 1.0, 1.0),  # quotes: kept by the card
    ('Final Answer: ["c81e728d9d", "cfcd208495"]', G3, 0.0, 0.8, 0.8),
    ("Final Answer: [c81e728d9d, c81e728d9d, c81e728d9d, zzz]", G3, 0.4, 0.4, 0.4),  # sets: a repeat counts once
    ("Final Answer: [c81e728d9d, cfcd208495, a87ff679a2, 1679091c5a, eccbc87e4b, e4da3b7fbb]", G3,
     0.6666666666666666, 0.6666666666666666, 0.6666666666666666),  # extra nodes cost precision
    ("Final Answer: []", [], 1.0, 0.0, 0.0),  # an empty gold set: the card scores the right empty answer 1, lm-eval 0
    ("Final Answer: []", G3, 0.0, 0.0, 0.0),
    ("Final Answer: [c81e728d9d]", [], 0.0, 0.0, 0.0),
    ("Final Answer: [ , ,]", [], 1.0, 0.0, 0.0),  # empty items are dropped: an empty list
    ("", [], 0.0, 0.0, 0.0),  # nothing said is unparsed, even on an empty gold set
    ("I think the answer is [c81e728d9d]", G3, 0.0, 0.0, 0.0),
    ("Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]\nHope this helps.", G3, 0.0, 0.0, 1.0),  # only flexible looks up
    ("Final Answer: [c81e728d9d] (also see [cfcd208495])", G3, 0.0, 0.0, 0.0),  # greedy: to the LAST "]"
    ("[note] Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]", G3, 0.6666666666666666, 1.0, 1.0),  # card: FIRST "["
    ("Final Answer:[c81e728d9d,cfcd208495,a87ff679a2]", G3, 1.0, 1.0, 1.0),
    ("Final Answer: [[c81e728d9d, cfcd208495], a87ff679a2]", G3, 0.6666666666666666, 0.3333333333333333, 0.3333333333333333),
    ("So: Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]", G3, 1.0, 1.0, 1.0),
    ("Final Answer: [c81e728d9d, cfcd208495, a87ff679a2]\r", G3, 1.0, 1.0, 1.0),
    ("Final Answer: [C81E728D9D, cfcd208495, a87ff679a2]", G3,
     0.6666666666666666, 0.6666666666666666, 0.6666666666666666),  # node ids are case-sensitive
]


@pytest.mark.parametrize("response,gold,card,lmeval,flexible", PARITY)
def test_graders_match_the_official_code(response, gold, card, lmeval, flexible):
    assert grade(response, gold, "card") == pytest.approx(card, abs=1e-12)
    assert grade(response, gold, "lmeval") == pytest.approx(lmeval, abs=1e-12)
    assert grade(response, gold, "lmeval-flexible") == pytest.approx(flexible, abs=1e-12)


def test_graders_are_the_task_argument_values():
    from typing import get_args

    from ctxbench.tasks.graphwalks.task import GraphwalksArgs

    assert get_args(GraphwalksArgs.model_fields["grader"].annotation) == GRADERS
    with pytest.raises(ValueError, match="grader: unknown"):
        grade("Final Answer: []", [], "strict")
