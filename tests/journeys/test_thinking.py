"""Journey: a reasoning model behind an OpenAI-compatible server, scored with `--thinking on` (issue 25, part 1).

The test server is a scripted "model" on loopback: it reads the needle from each RULER niah prompt, reasons about it
in one of the formats reasoning models use (`<think>…</think>`, a block the template opened, gpt-oss channels, the
API's `reasoning_content`, and unfinished blocks of each kind), and then answers right or wrong. The reasoning always
names the right value, so a run that scored the reasoning as the answer would score every sample 1.
The default tier's commands here run in process (`user_in_process`).
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from tests.journeys.conftest import rows as sample_lines
from tests.json_server import json_server

pytestmark = pytest.mark.timeout(900)

FORMATS = ("think", "opened", "channel", "api", "think_unfinished", "channel_unfinished", "api_unfinished")
NEEDLE = re.compile(r"special magic numbers? for ([\w-]+) is: (\d+)")
QUERY = re.compile(r"What is the special magic number for ([\w-]+) mentioned")


class ReasoningServer:
    """Answers chat completions as a thinking model would, in the i-th format for the i-th distinct question."""

    def __init__(self, tokenizer, context: int = 8192):
        self.tokenizer, self.context = tokenizer, context
        self.choices: dict[str, tuple[str, bool, str]] = {}  # key -> (format, right final answer, value)
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.http, self.url = json_server(
            lambda: {"object": "list", "data": [{"id": "smollm2-135m", "max_model_len": self.context}]}, self.answer)

    def answer(self, body: dict) -> dict:
        text = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        query = QUERY.search(text)
        if query is None:  # the backend's start-up probe
            return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "K"}, "finish_reason": "stop"}]}
        self.bodies.append(body)
        key = query.group(1)
        value = dict(NEEDLE.findall(text))[key]
        with self.lock:
            if key not in self.choices:
                i = len(self.choices)
                self.choices[key] = (FORMATS[i % len(FORMATS)], (i // len(FORMATS)) % 2 == 0, value)
        form, right, _ = self.choices[key]
        final = f"The special magic number for {key} is {value}." if right else "I could not find it."
        thought = f"The text says the number for {key} is {value}; let me check that again."
        message: dict = {"role": "assistant"}
        usage = {"prompt_tokens": 100, "completion_tokens": 0}
        if form.startswith("api"):
            message.update(reasoning_content=thought, content=None if form == "api_unfinished" else final)
            usage["completion_tokens_details"] = {"reasoning_tokens": self.count(thought)}
        else:
            message["content"] = {
                "think": f"<think>\n{thought}\n</think>\n\n{final}",
                "opened": f"{thought}\n</think>\n\n{final}",
                "channel": f"<|channel|>analysis<|message|>{thought}<|end|><|start|>assistant<|channel|>final<|message|>{final}<|return|>",
                "think_unfinished": f"<think>\n{thought} And again: {thought}",
                "channel_unfinished": f"<|channel|>analysis<|message|>{thought}",
            }[form]
        usage["completion_tokens"] = self.count((message.get("reasoning_content") or "") + (message.get("content") or ""))
        finish = "length" if form.endswith("unfinished") else "stop"
        return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture()
def reasoning_server(smol_tokenizer):
    """The server counts with the session's SmolLM2 tokenizer (tests/conftest.py), loaded once, not per test."""
    server = ReasoningServer(smol_tokenizer)
    yield server
    server.close()


def test_thinking_run_scores_the_final_answers_in_every_format(user_in_process, reasoning_server):
    """`--thinking on` against a server that reasons in every format: each sample scores what its final answer
    deserves, the reasoning and its exact token count are stored beside it, unfinished blocks are failed samples
    (thinking_unfinished) counted 0; a thinking-off run of the same model is another row on the board, and the board
    shows the mode and the mean reasoning tokens."""
    server = reasoning_server
    score = (f"ctxbench score --model smollm2-135m --backend openai --backend-arg base_url={server.url} "
             "--backend-arg api=chat --tasks ruler/niah_single_1 --lengths 1024 --samples 14 --store runs")
    r = user_in_process.run(f"{score} --thinking on --max-thinking-tokens 256")
    assert r.code == 0, r.err
    assert "6 samples never closed their reasoning (thinking_unfinished)" in r.err
    assert "smollm2-135m [thinking on, 256] on adhoc" in r.out, r.out  # the table says which protocol it scored
    run_dir = next(p for p in (user_in_process.cwd / "runs").iterdir() if (p / "record.json").exists())
    record = json.loads((run_dir / "record.json").read_text())
    assert record["generation"] == {"thinking": "on", "max_thinking_tokens": 256}
    rows = [json.loads(line) for line in sample_lines(run_dir)]
    assert len(rows) == 14 and len(server.choices) == 14
    assert {form for form, _, _ in server.choices.values()} == set(FORMATS)
    tok = server.tokenizer
    by_value = {value: (form, right, value) for form, right, value in server.choices.values()}
    for row in rows:
        form, right, value = by_value[row["answers"][0]]
        assert row["answers"] == [value]
        assert value in row["reasoning"] and value not in row["prediction"] or right, (form, row)
        if form.endswith("unfinished"):
            assert (row["failure"], row["score"], row["prediction"]) == ("thinking_unfinished", 0.0, ""), (form, row)
        else:
            assert "failure" not in row and row["score"] == (1.0 if right else 0.0), (form, row)
            assert "<think>" not in row["prediction"] and "</think>" not in row["prediction"] and "<|" not in row["prediction"]
        counted = server.count(row["reasoning"])
        assert row["reasoning_tokens"] == counted == len(tok(row["reasoning"], add_special_tokens=False)["input_ids"])
    # the request: no answer prefix, the switch passed through, the answer budget plus the thinking budget
    body = server.bodies[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["max_tokens"] == 128 + 256
    assert body["messages"][-1]["role"] == "user" and "The special magic number for" not in body["messages"][-1]["content"][-80:]

    again = user_in_process.run(f"{score} --thinking on --max-thinking-tokens 256")  # unfinished samples are outcomes, not retried
    assert again.code == 0 and "all 14 samples are scored already" in again.err, again.err
    off = user_in_process.run(score)  # the same model without thinking: another run, another row
    assert off.code == 0, off.err
    assert len([p for p in (user_in_process.cwd / "runs").iterdir() if (p / "record.json").exists()]) == 2
    board = user_in_process.run("ctxbench board build --store runs --out board")
    assert board.code == 0, board.err
    table = (user_in_process.cwd / "board" / "leaderboard.md").read_text()
    # two models on the board; the thinking one with its mode beside the name, its reasoning cost per cell
    assert "| smollm2-135m \\[thinking on, 256\\] | ruler/niah\\_single\\_1 | 1K |" in table, table
    mean = sum(row["reasoning_tokens"] for row in rows) / len(rows)
    cost = next(line for line in table.split("## Reasoning cost")[1].splitlines() if "thinking on" in line)
    assert cost.strip(" |").split(" | ")[3:6] == [f"{mean:.0f}", "6", "14"], cost
    main = table.split("## Main results")[1].split("## ")[0]
    assert main.count("smollm2-135m") == 2 * main.count("smollm2-135m \\[thinking on") > 0, main
