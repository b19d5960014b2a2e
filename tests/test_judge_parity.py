"""The LLM judge at parity with HELMET's judge scripts as they run (princeton-nlp/HELMET at commit
4526dfbdc512bd9ff721da336bff4e3e75ecfd27: scripts/eval_gpt4_longqa.py, scripts/eval_gpt4_summ.py, model_utils.py).

The expected numbers are literals: each script's check_metrics was run in /tmp on these verdicts with a stand-in
model returning them (QA: beside one sample judged {"fluency": 1, "correctness": 3}, reading the second sample's
fluency x correctness back from the average; summary: one InfiniteBench sample with 3 key points), and its outcome
pasted here: a number, "skipped" (no readable JSON: the script leaves the sample out) or the exception it crashed
with. ctxbench scores what the script scores, on its 0..1 scale (QA / 3), and refuses the rest. One deliberate
difference: NaN (which Python's json reads) is refused, where the official mean becomes NaN. No network."""

from __future__ import annotations

import pytest

from ctxbench.tasks.judge.verdicts import Refused, qa_score, qa_values, summary_score, summary_values

# verdict -> HELMET's fluency x correctness (a number), or why it does not score it
QA_OFFICIAL = [
    ('{"fluency": 1, "correctness": 4}', 4.0),
    ('{"fluency": 0.5, "correctness": 2.5}', 1.25),
    ('{"fluency": 1, "correctness": -1}', -1.0),
    ('{"fluency": true, "correctness": 2}', 2.0),
    ('{"correctness": 3, "fluency": 1, "extra": [1]}', 3.0),
    ('```json\n{"fluency": 1, "correctness": 3}\n```', 3.0),
    ('{"fluency": 1}', "KeyError"),
    ('{"fluency": "1", "correctness": 3}', "TypeError"),
    ('{"fluency": null, "correctness": 3}', "TypeError"),
    ("nothing", "skipped"),
    ('{"fluency": 1, "correctness": 2} and {bad}', "skipped"),  # the last {...} only
    ('{"scores": {"fluency": 1, "correctness": 3}}', "skipped"),  # non-greedy: the first } ends it
    ('{"fluency": 1, "correctness": NaN}', "nan"),  # official: NaN in the mean; ctxbench refuses
]


@pytest.mark.parametrize("verdict,official", QA_OFFICIAL)
def test_qa_verdicts_scored_as_helmet_scores_them(verdict, official):
    if isinstance(official, str):
        with pytest.raises(Refused):
            qa_values(verdict)
        return
    score, flags = qa_score(qa_values(verdict))
    assert score == pytest.approx(official / 3)
    in_rubric = official in (0, 1, 2, 3) and "0.5" not in verdict
    assert bool(flags) == (not in_rubric)  # out of the rubric: flagged, never refused


def test_qa_flags_name_the_value():
    assert qa_score(qa_values('{"fluency": 1, "correctness": 4}')) == (4 / 3, ["correctness 4 outside the rubric (0, 1, 2, 3)"])
    assert qa_score(qa_values('{"fluency": 1.0, "correctness": 3}')) == (1.0, [])  # 1.0 in (0, 1), as in Python


KP = 3  # key points of the summary sample
# (fluency, recall, precision outputs) -> HELMET's f1, or why it does not score it
SUMMARY_OFFICIAL = [
    (('{"fluency": 1}', '{"recall": 5}', '{"precision": 3, "sentence_count": 4}'), 1.0344827586206895),
    (('{"fluency": 1}', '{"recall": 2}', '{"precision": 1, "sentence_count": 2}'), 0.5714285714285715),
    (('{"fluency": 0.5}', '{"recall": 2.5}', '{"precision": 1.5, "sentence_count": 2}'), 0.3947368421052631),
    (('{"fluency": true}', '{"recall": true}', '{"precision": true, "sentence_count": true}'), 0.5),
    (('{"fluency": 1}', '{"recall": -1}', '{"precision": 1, "sentence_count": 2}'), -1.9999999999999998),
    (('{"fluency": 1}', '{"recall": -2}', '{"precision": 1, "sentence_count": 1}'), -3.9999999999999996),
    (('{"fluency": 1}', '{"recall": 2}', '{"precision": "many", "sentence_count": 0}'), 0.0),
    (('{"fluency": 1}', '{"recall": 2}', '{"precision": 3, "sentence_count": -1}'), 0.0),
    (('{"fluency": 2}', '{"recall": 3}', '{"precision": 4, "sentence_count": 4}'), 2.0),
    (('{bad} ```json\n{"fluency": 1}\n```', '{"recall": 3}', '{"precision": 4, "sentence_count": 4}'), 1.0),
    (('{"fluency": 1}', '{"recall": 3}', '{"precision": 7, "sentence_count": 5}'), 1.1666666666666667),
    (('{"fluency": 1}', '{"recall": 2, "supported_key_points": [1, 3]}', 'Output: {"precision": 5, "sentence_count": 15}'),
     0.4444444444444444),
    (('{"fluency": 1}', '{"recall": "two"}', '{"precision": 1, "sentence_count": 2}'), "TypeError"),
    (('{"fluency": 1}', '{"recall": 2}', '{"precision": 1}'), "KeyError"),
    (('{"fluency": "yes"}', '{"recall": 0}', '{"precision": 0, "sentence_count": 2}'), "TypeError"),  # np.mean
    (("no json", '{"recall": 3}', '{"precision": 4, "sentence_count": 4}'), "skipped"),
    (('{"fluency": 1}', "[1, 2]", '{"precision": 1, "sentence_count": 2}'), "skipped"),
    (('{"fluency": 1}', '{bad} ```json\n[1]\n```', '{"precision": 1, "sentence_count": 2}'), "TypeError"),
]


def summary(outputs, keypoints=KP):
    values = [summary_values(call, text, keypoints) for call, text in enumerate(outputs)]
    return summary_score(values, keypoints)


@pytest.mark.parametrize("outputs,official", SUMMARY_OFFICIAL)
def test_summary_verdicts_scored_as_helmet_scores_them(outputs, official):
    if isinstance(official, str):
        with pytest.raises(Refused):
            summary(outputs)
        return
    assert summary(outputs)[0] == pytest.approx(official, abs=1e-12)


def test_recall_above_the_key_points_is_not_capped_but_flagged():
    """Issue 31: 5 of 3 key points, 3 of 4 sentences: HELMET 1.034 (ctxbench capped recall at 1 and gave 0.857)."""
    score, parts, flags = summary(('{"fluency": 1}', '{"recall": 5}', '{"precision": 3, "sentence_count": 4}'))
    assert score == pytest.approx(1.0344827586206895) and parts == {"recall": pytest.approx(5 / 3), "precision": 0.75}
    assert flags == ["recall 5 outside 0..3 key points"]


def test_without_key_points_recall_is_zero_whatever_the_judge_wrote():
    # official: rec = 0 when there are no key points, so the recall value is never divided (f1 0.0, precision 0.5)
    assert summary(('{"fluency": 1}', '{"recall": "n/a"}', '{"precision": 1, "sentence_count": 2}'), keypoints=0)[0] == 0.0
