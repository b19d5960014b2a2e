"""Journey: a thinking run on the HF backend, with a tiny checkpoint whose chat template has a thinking switch
(issue 25, part 1). The 2-layer model never closes its reasoning, so the thinking budget ends it: the closing tag is
forced and the answer follows within the answer budget; the run is recorded as a thinking run, apart from the
non-thinking one. The commands run in process (`user_in_process`)."""

from __future__ import annotations

import json

import pytest

from .conftest import rows

pytestmark = pytest.mark.timeout(1200)

SWITCH_TEMPLATE = (  # Qwen3's switch, reduced: thinking opens <think> in the prompt, off closes an empty block
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}"
    "{% endif %}"
)


def test_hf_thinking_auto_uses_the_switch_and_its_budget(user_in_process, tiny_copy):
    (tiny_copy / "chat_template.jinja").write_text(SWITCH_TEMPLATE)
    config = tiny_copy / "tokenizer_config.json"
    cfg = json.loads(config.read_text())
    cfg.pop("chat_template", None)
    config.write_text(json.dumps(cfg))
    score = (f"ctxbench score --model {tiny_copy} --backend hf --device cpu --tasks ruler/niah_single_1 --lengths 384 "
             "--samples 2 --store runs --template chat --backend-arg threads=1")  # threads: no half-second core probe
    r = user_in_process.run(f"{score} --thinking auto --max-thinking-tokens 16")
    assert r.code == 0, r.err[-3000:]
    run_dir = next(p for p in (user_in_process.cwd / "runs").iterdir() if (p / "record.json").exists())
    record = json.loads((run_dir / "record.json").read_text())
    assert record["generation"] == {"thinking": "on", "max_thinking_tokens": 16}  # auto: the template has a switch
    got = [json.loads(line) for line in rows(run_dir)]
    assert len(got) == 2
    for row in got:
        # the prompt ends inside <think> (the template opened it); the budget closed it after 16 tokens
        assert row["reasoning_format"] == "opened" and row["reasoning"].endswith("</think>"), row
        assert row["reasoning_tokens"] <= 16 and row["generated_tokens"] <= 128 + 16, row  # the budgets hold
        assert row.get("failure") is None and row["score"] in (0.0, 1.0) and "</think>" not in row["prediction"]
    r_fits = user_in_process.run(f"{score} --thinking on --max-thinking-tokens 200")
    assert r_fits.code == 2 and "thinking budget of 200 exceed the model's context of 512" in r_fits.err, r_fits.err
