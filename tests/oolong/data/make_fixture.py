"""Writes the hand-made Oolong-shaped fixture (the official columns, invented content): 3 synth windows of 5 questions
and 2 real windows of 3, sized for the 1K, 2K and 4K bins under SmolLM2's chat template. Run it to regenerate."""
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent / "oolong"
rng = random.Random(7)
QUESTIONS = ["How far is it from Denver to Aspen ?", "What is a caldera ?", "Who wrote Hamlet ?", "What does NASA stand for ?",
             "Where is the Eiffel Tower ?", "How many legs does a spider have ?", "What is the capital of Peru ?",
             "Which river runs through Cairo ?", "What is the boiling point of water ?", "Who painted the Mona Lisa ?"]
LABELS = {0: "numeric value", 1: "description and abstract concept", 2: "human being", 3: "abbreviation", 4: "location",
          5: "numeric value", 6: "location", 7: "location", 8: "numeric value", 9: "human being"}
synth = []
rid = 0
for wid, lines in ((101, 12), (102, 45), (103, 100)):
    picks = [rng.randrange(10) for _ in range(lines)]
    users = [rng.choice([44362, 81203, 55190]) for _ in range(lines)]
    days = [rng.randrange(1, 28) for _ in range(lines)]
    plain = "\n".join(f"Date: Jan {d:02d}, 2023 || User: {u} || Instance: {QUESTIONS[p]}" for d, u, p in zip(days, users, picks))
    labeled = "\n".join(f"Date: Jan {d:02d}, 2023 || User: {u} || Instance: {QUESTIONS[p]} || Label: {LABELS[p]}"
                        for d, u, p in zip(days, users, picks))
    counts = {}
    for p in picks:
        counts[LABELS[p]] = counts.get(LABELS[p], 0) + 1
    top = max(counts, key=counts.get)
    loc, hum = counts.get("location", 0), counts.get("human being", 0)
    rel = "more common than" if loc > hum else "less common than" if loc < hum else "same frequency as"
    qs = [
        ("In the above data, which of the labels is the most common? Give your final answer in the form 'Label: answer'.",
         repr([top]), "ANSWER_TYPE.LABEL", "MOST_FREQ", "counting"),
        ("In the above data, how many data points should be classified as label 'location'? Give your final answer in the form 'Answer: number'.",
         repr([loc]), "ANSWER_TYPE.NUMERIC", "RELATIVE_FREQ", "counting"),
        ("In the above data, is label 'location' more common, less common, or the same frequency as label 'human being'? Give your final answer in the form 'Answer: location is [X] human being'.",
         repr([rel]), "ANSWER_TYPE.COMPARISON", "SECOND_MOST_FREQ", "comparison"),
        ("In the above data, on which date does the first instance with label 'abbreviation' appear? Give your final answer in the form 'Date: answer'.",
         f"[datetime.date(2023, 1, {min([d for d, p in zip(days, picks) if LABELS[p] == 'abbreviation'] or [1])})]",
         "ANSWER_TYPE.DATE", "TIMELINE", "timeline"),
        ("In the above data, which user has the most instances with label 'location'? Give your final answer in the form 'User: answer'.",
         repr([str(max({44362, 81203, 55190}, key=lambda u: (sum(1 for x, p in zip(users, picks) if x == u and LABELS[p] == 'location'), u)))]),
         "ANSWER_TYPE.USER", "USER", "user"),
    ]
    for q, a, t, task, group in qs:
        synth.append({"id": rid, "context_len": 1024 * (1 if lines < 40 else 2 if lines < 80 else 4), "dataset": "trec_coarse",
                      "context_window_text": plain, "context_window_text_with_labels": labeled, "question": q,
                      "task_group": group, "task": f"TASK_TYPE.{task}", "answer": a, "answer_type": t,
                      "input_subset": "False", "num_labels": 6, "context_window_id": wid})
        rid += 1
with (HERE / "synth" / "test.jsonl").open("w") as f:
    for r in synth:
        f.write(json.dumps(r) + "\n")

NAMES = ["VEX", "PERCY", "GROG", "KEYLETH", "SCANLAN"]
ACTS = ["rolls a natural 20 on perception.", "casts Fireball at the goblins.", "rolls a 7 on stealth.",
        "casts Cure Wounds on the party.", "asks what is behind the door.", "rolls a 15 to hit."]
real = []
for wid, lines in ((7, 30), (8, 100)):
    turns = [(rng.choice(NAMES), rng.randrange(len(ACTS))) for _ in range(lines)]
    text = "Episode transcript.\n" + "\n".join(f"{n}: I {ACTS[a]}" for n, a in turns)
    fireball = sum(1 for _, a in turns if a == 1)
    casters = sorted({n.title() for n, a in turns if a in (1, 3)})
    qs = [("Total number of Fireball spells cast in this episode? Return your answer as \\boxed{number}.", str(fireball), "count"),
          ("Which characters cast a spell in this episode? Return a comma-separated list as \\boxed{names}.", ", ".join(casters), "list"),
          ("What spell is cast most often in this episode? Return your answer as \\boxed{spell}.",
           "Fireball" if fireball >= sum(1 for _, a in turns if a == 3) else "Cure Wounds", "name")]
    for q, a, kind in qs:
        real.append({"id": f"{wid}-{kind}", "context_window_id": wid, "context_window_text": text, "question": q,
                     "answer": a, "question_type": kind, "campaign": "campaign1", "episodes": [wid]})
with (HERE / "real" / "test.jsonl").open("w") as f:
    for r in real:
        f.write(json.dumps(r) + "\n")
