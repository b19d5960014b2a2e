"""HELMET's summarisation judge (`judge/summary`; princeton-nlp/HELMET at 4526dfb, scripts/eval_gpt4_summ.py): three
calls per sample with its prompts (tasks/judge/prompts.py) for fluency, key points recalled and supported sentences;
the score is fluency x F1 of recall (found / key points) and precision (supported / sentences), uncapped as HELMET
computes it (tasks/judge/verdicts.py), flagged where a count lies outside its range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.judge import prompts, verdicts
from ctxbench.tasks.judge.task import JudgeArgs, Judged, within_budget


class SummaryJudgeArgs(JudgeArgs):
    task: str = Field("infinitebench/longbook_sum_eng", description="the judged summarisation task (its answers[0] is the "
                      "expert summary)")
    keypoints_file: str | None = Field(None, description="HELMET's key points of each item, JSON lines {id, keypoints} "
                                       "(data/infbench/longbook_sum_eng_keypoints.jsonl of HELMET's data)")
    book: bool = Field(True, description="HELMET's prompts for novels (InfiniteBench); false: its legal-case prompts (Multi-LexSum)")
    max_tokens: int = Field(4096, ge=1, description="tokens the judge may write, its reasoning and verdict (HELMET's "
                            "summary judge: 4096)")


class JudgedSummary(Judged):
    """HELMET's summarisation judge: fluency x F1 of key-point recall and sentence precision."""

    Args = SummaryJudgeArgs
    metric = "judge/summary"
    protocol = "helmet-summary"
    calls_per_sample = 3
    reference_tokens = 1024  # an expert summary or a list of key points
    rubric_chars = len(prompts.FLUENCY_BOOK) + len(prompts.RECALL_BOOK) + len(prompts.PRECISION_BOOK)
    summary = "{name}: {task}'s summaries scored by the LLM judge {model} with HELMET's rubric (fluency x F1 of key points)"
    data_source = "the judged task's data and HELMET's key points (keypoints_file); paid calls (--judge-budget)"

    def keypoints(self) -> dict[str, list[str]]:
        if self.args.keypoints_file is None:
            raise ConfigError("keypoints_file: HELMET's summary judge needs each item's key points; give HELMET's "
                              "data/infbench/longbook_sum_eng_keypoints.jsonl (or the Multi-LexSum file)")
        if not hasattr(self, "_keypoints"):
            from ctxbench.tasks.realdata import read_records

            rows = read_records(Path(self.args.keypoints_file).expanduser())
            self._keypoints = {str(r.get("id")): list(r.get("keypoints") or r.get("summary/short_keypoints") or []) for r in rows}
        return self._keypoints

    def data_files(self, ctx: GenContext) -> list[Path]:
        own = [Path(self.args.keypoints_file).expanduser()] if self.args.keypoints_file else []
        return [*self.inner.data_files(ctx), *(p for p in own if p.is_file())]

    def prepare(self, ctx: GenContext) -> None:
        self.keypoints()
        super().prepare(ctx)

    def sample_meta(self, s: Sample, index: int, ctx: GenContext) -> dict[str, Any]:
        item = str(s.meta.get("id", index))
        if item not in self.keypoints():
            raise ConfigError(f"keypoints_file: no key points for item {item!r} of {self.args.task}; give HELMET's key points file")
        return {"keypoints": self.keypoints()[item]}

    def judge_prompts(self, prediction: str, sample: Sample) -> tuple[list[str], list[str]]:
        text, flags = within_budget(prediction.strip(), sample.max_new_tokens)
        book = self.args.book
        points = "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(sample.meta["keypoints"]))
        return [(prompts.FLUENCY_BOOK if book else prompts.FLUENCY).format(text=text),
                (prompts.RECALL_BOOK if book else prompts.RECALL).format(keypoints=points, summary=text),
                (prompts.PRECISION_BOOK if book else prompts.PRECISION).format(expert_summary=sample.answers[0], summary=text)], flags

    def accept(self, call: int, text: str, sample: Sample) -> dict[str, Any]:
        return verdicts.summary_values(call, text, len(sample.meta["keypoints"]))

    def combine(self, values: list[dict[str, Any]], sample: Sample) -> tuple[float, dict[str, Any], list[str]]:
        score, parts, flags = verdicts.summary_score(values, len(sample.meta["keypoints"]))
        return score, parts, flags


@register("task", "judge/summary", args=SummaryJudgeArgs, version=1)
def judge_summary(**args):
    return JudgedSummary("judge/summary", SummaryJudgeArgs(**args))
