"""Prefix reuse on the hf backend: prefill tokens and wall time with the reuse on and off, side by side, from one run.

    python benchmarks/prefix_reuse.py [--length 4096] [--data-dir ../shared/data] [--threads 2] [--json OUT] [--tiny]

Two workloads, each scheduled as a run schedules a chunk (harness/run/prefix.py: prompt order, shared prefix declared)
and sent through one HFBackend (SmolLM2-135M, fp32, CPU) in batches of 8, first with `prefix_reuse` on, then off:
  grid:  niah/single, 11 depths x 4 haystacks at --length (44 samples; a needle at depth d shares the haystack
         before it with its neighbour, so about 11 / 6.5 = 1.7x fewer tokens is the bound for one haystack);
  docqa: --docs SQuAD 2.0 dev articles (../shared/data/squad), each the article's first paragraphs up to --length
         tokens, asked 10 of their questions after the document (40 samples; scored as any gold answer in the
         prediction, case-folded).
Printed per workload and way: prompt tokens prefilled (computed) and reused, the ratio of computed tokens, wall
seconds of the generate() calls, and whether every answer and score equals the reuse-off run's.
--tiny swaps the weights for a random two-layer model with SmolLM2's tokenizer: the same prompts and token counts in
seconds (the counts depend on the tokens, not the weights), where SmolLM2 at 4K takes hours on a loaded 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

QUESTIONS = 10
TEMPLATE = "Answer the question from the document.\n\nDocument:\n{doc}\n\nQuestion: {question}"


def grid(length: int, data_dir: Path, tokenizer) -> tuple[list, object]:
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    task = registry.get("task", "niah/single")(depths=11, samples_per_cell=4)
    ctx = GenContext(tokenizer, PromptRenderer(tokenizer, "chat"), data_dir=data_dir)
    return [task.generate(length=length, index=i, seed=42, ctx=ctx) for i in range(44)], task.score_row


def docqa(length: int, data_dir: Path, tokenizer, docs: int) -> tuple[list, object]:
    """SQuAD articles as documents of about `length` tokens (less the answer budget), 10 answerable questions each."""
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.core.types import Sample

    renderer = PromptRenderer(tokenizer, "chat")
    articles = json.loads((data_dir / "squad" / "dev-v2.0.json").read_text(encoding="utf-8"))["data"][:docs]
    out = []
    for d, article in enumerate(articles):
        paragraphs, doc, qas = article["paragraphs"], "", []
        for p in paragraphs:
            longer = (doc + "\n\n" + p["context"]).strip()
            if len(tokenizer(longer)["input_ids"]) > length - 200:
                break
            doc = longer
            qas += [q for q in p["qas"] if q["answers"]]
        for q, qa in enumerate(qas[:QUESTIONS]):
            r = renderer.render(TEMPLATE.format(doc=doc, question=qa["question"]), "Answer:")
            out.append(Sample(task="docqa", length=length, index=d * QUESTIONS + q, prompt=r.text,
                              answers=tuple(a["text"] for a in qa["answers"]), prompt_tokens=len(tokenizer(r.text)["input_ids"]),
                              max_new_tokens=16, add_special_tokens=r.add_special_tokens, user_span=r.user_span,
                              answer_prefix=r.prefix))

    def score(prediction: str, sample) -> tuple[float, dict, None]:
        return float(any(a.lower() in prediction.lower() for a in sample.answers)), {}, None

    return out, score


def measure(backend, samples: list, score, reuse: bool) -> dict:
    """One way through the samples: counts, seconds, answers and scores."""
    from ctxbench.harness.run.batch import request
    from ctxbench.harness.run.prefix import share_prefixes

    ordered = share_prefixes(samples)
    requests = [request(s) for s in ordered]
    backend.prefix_reuse = reuse
    backend.prefix.clear()
    backend.prefill_tokens = {"computed": 0, "reused": 0}
    preds, start = [], time.perf_counter()
    for at in range(0, len(requests), backend.batch_size):
        preds += backend.generate(requests[at: at + backend.batch_size])
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 1), "prefill_seconds": round(sum(p.prefill_seconds or 0 for p in preds), 1),
            **backend.prefill_tokens, "answers": [p.text for p in preds],
            "scores": [score(p.text, s)[0] for p, s in zip(preds, ordered)]}


def tiny_model(where: Path) -> str:
    """A random two-layer Llama with SmolLM2's tokenizer, saved under `where`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from ctxbench.harness.core.models import load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    config = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=8192, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(where)
    tok.save_pretrained(where)
    return str(where)


def main(argv=None) -> int:
    import tempfile

    from ctxbench.harness.backends.hf import HFBackend

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--tiny", action="store_true", help="a random two-layer model: token counts only")
    args = ap.parse_args(argv)
    model = tiny_model(Path(tempfile.mkdtemp())) if args.tiny else "smollm2-135m"
    backend = HFBackend(model=model, device="cpu", dtype="float32", threads=args.threads)
    results = {}
    for name, (samples, score) in {"grid": grid(args.length, args.data_dir, backend.tokenizer),
                                   "docqa": docqa(args.length, args.data_dir, backend.tokenizer, args.docs)}.items():
        on, off = measure(backend, samples, score, reuse=True), measure(backend, samples, score, reuse=False)
        same = on["answers"] == off["answers"] and on["scores"] == off["scores"]
        results[name] = {"samples": len(samples), "on": on, "off": off, "identical": same,
                         "token_ratio": round(off["computed"] / on["computed"], 2),
                         "time_ratio": round(off["seconds"] / on["seconds"], 2)}
        for way, r in (("reuse off", off), ("reuse on", on)):
            print(f"{name:6} {way:9} {len(samples)} samples: computed {r['computed']:7} reused {r['reused']:7} tokens; "
                  f"{r['seconds']:6.1f} s (prefill {r['prefill_seconds']:.1f} s); mean score {sum(r['scores']) / len(samples):.3f}")
        print(f"{name:6} computed tokens {results[name]['token_ratio']}x fewer, wall {results[name]['time_ratio']}x; "
              f"answers and scores identical: {same}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
