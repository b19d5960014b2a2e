"""Log-likelihood scoring of the hf backend, for lm-evaluation-harness tasks (tasks/lmeval/adapter.py) and perplexity.

Tokenization follows lm-eval's HFLM with add_bos_token unset, so scores match `lm_eval --model hf`. A mixin of
HFBackend (hf.py), which holds the model, tokenizer, device, context length and batch sizes; apart from generation so
that each module stays readable.
"""

from __future__ import annotations

import time

from ctxbench.harness.core.backend import check_window
from ctxbench.harness.core.types import LogprobRequest, TokenLogprobs


class LogLikelihood:
    """loglikelihood, loglikelihood_rolling and token_logprobs over the backend's model."""

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context (and a rolling window's first token) is conditioned on: BOS, else EOS."""
        tok = self.tokenizer
        return tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id

    def tok_encode(self, text: str, add_special_tokens: bool | None = None) -> list[int]:
        """Token ids as lm-eval's HFLM encodes them: the tokenizer's default special tokens, none if text starts with BOS."""
        if add_special_tokens is None:
            add_special_tokens = not text.startswith(self.tokenizer.decode(self.prefix_token_id))
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(context ids, continuation ids): encode context and context+continuation, the continuation is the tail.

        Trailing spaces of the context move to the continuation, and an empty context becomes the prefix
        token, as in lm-eval's TemplateLM.loglikelihood.
        """
        if context == "":
            cont = self.tok_encode(continuation, add_special_tokens=False)
            if not cont:
                raise ValueError("loglikelihood: empty context and empty continuation")
            return ([self.prefix_token_id], cont) if cont[0] != self.prefix_token_id else (cont[:1], cont[1:])
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        whole = self.tok_encode(context + continuation)
        ctx = self.tok_encode(context)
        return ctx, whole[len(ctx):]

    def loglikelihood(self, requests: list[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log P(continuation | context), whether greedy decoding yields exactly the continuation), per pair."""
        return self.loglikelihood_tokens([self.encode_pair(c, x) for c, x in requests])

    def loglikelihood_rolling(self, texts: list[str]) -> list[float]:
        """Log-likelihood of each whole text (for perplexity), in disjoint windows of the context length.

        The first window is conditioned on the prefix token; later windows on the tokens before them, so
        every token is predicted exactly once (lm-eval's get_rolling_token_windows with context_len=1).
        """
        windows, owner = [], []
        for i, text in enumerate(texts):
            for w in rolling_windows(self.tok_encode(text), self.prefix_token_id, self.context_length):
                windows.append(w)
                owner.append(i)
        totals = [0.0] * len(texts)
        for i, (ll, _) in zip(owner, self.loglikelihood_tokens(windows)):
            totals[i] += ll
        return totals

    def loglikelihood_tokens(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """Score token-level (context, continuation) pairs in batches of inputs.

        Each pair's input is (context + continuation)[:-1], left-truncated to the context length; pairs with the
        same input (the choices of a multiple-choice question with one-token answers) share one forward pass.
        Inputs are right-padded, so positions are those of an unpadded pass. Log-softmax is taken in float32,
        only at the scored positions.
        """
        torch = self._torch
        L = self.context_length
        inputs: dict[tuple[int, ...], list[int]] = {}
        conts = []
        for j, (ctx, cont) in enumerate(pairs):
            if not ctx or not cont:
                raise ValueError("loglikelihood: context and continuation must each have at least one token")
            if len(cont) > L:
                raise ValueError(f"loglikelihood: continuation of {len(cont)} tokens > context length {L}")
            inputs.setdefault(tuple((ctx + cont)[-(L + 1):][:-1]), []).append(j)
            conts.append(cont)
        order = sorted(inputs, key=lambda k: (-len(k), k))  # longest first: less padding, memory errors early
        out: list[tuple[float, bool] | None] = [None] * len(pairs)
        pad = self.tokenizer.pad_token_id
        for b in range(0, len(order), self.score_batch_size):
            batch = order[b : b + self.score_batch_size]
            width = len(batch[0])
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, inp in enumerate(batch):
                ids[r, : len(inp)] = torch.tensor(inp, dtype=torch.long)
                mask[r, : len(inp)] = 1
            spans = [(len(inp) - max(len(conts[j]) for j in inputs[inp]), len(inp)) for inp in batch]
            keep = sorted(set().union(*(range(s, e) for s, e in spans)))
            logits, col = self._logits_at(ids.to(self.device), mask.to(self.device), keep)
            for r, inp in enumerate(batch):
                for j in inputs[inp]:
                    cont = conts[j]
                    cols = [col[p] for p in range(len(inp) - len(cont), len(inp))]
                    lp = torch.log_softmax(logits[r, cols].float(), dim=-1)
                    target = torch.tensor(cont, device=lp.device)
                    greedy = bool((lp.argmax(dim=-1) == target).all())
                    out[j] = (float(lp.gather(1, target[:, None]).sum()), greedy)
        return out  # type: ignore[return-value]

    def token_logprobs(self, requests: list[LogprobRequest]) -> list[TokenLogprobs]:
        """log P(ids[i] | ids[:i]) of each window's scored tokens (perplexity), batched as loglikelihood_tokens batches:
        right-padded windows, longest first, logits only at the positions that predict a scored token, log-softmax
        in float32 a block of positions at a time."""
        torch = self._torch
        for r in requests:
            check_window(r, self.context_length)
        order = sorted(range(len(requests)), key=lambda j: -len(requests[j].token_ids))
        out: list[TokenLogprobs | None] = [None] * len(requests)
        pad = self.tokenizer.pad_token_id
        for b in range(0, len(order), self.batch_size):
            batch = [requests[j] for j in order[b: b + self.batch_size]]
            width = len(batch[0].token_ids)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, r in enumerate(batch):
                ids[row, : len(r.token_ids)] = torch.tensor(r.token_ids, dtype=torch.long)
                mask[row, : len(r.token_ids)] = 1
            keep = sorted(set().union(*(range(r.score_from - 1, len(r.token_ids) - 1) for r in batch)))
            start = time.perf_counter()
            logits, col = self._logits_at(ids.to(self.device), mask.to(self.device), keep)
            rows = []
            for row, r in enumerate(batch):
                cols = [col[p] for p in range(r.score_from - 1, len(r.token_ids) - 1)]
                target = torch.tensor(r.token_ids[r.score_from:], device=logits.device)
                values: list[float] = []
                for at in range(0, len(cols), 1024):
                    lp = torch.log_softmax(logits[row, cols[at: at + 1024]].float(), dim=-1)
                    values += lp.gather(1, target[at: at + 1024, None]).squeeze(1).tolist()
                rows.append(values)
            seconds = (time.perf_counter() - start) / len(batch)
            for j, r, values in zip(order[b: b + self.batch_size], batch, rows):
                out[j] = TokenLogprobs(r.sample_id, tuple(values), seconds)
        return out  # type: ignore[return-value]

    def _logits_at(self, ids, mask, positions: list[int]):
        """Logits at the given sequence positions only (logits_to_keep), and a position -> column map."""
        torch = self._torch
        with torch.inference_mode():
            try:
                logits = self.model(input_ids=ids, attention_mask=mask,
                                    logits_to_keep=torch.tensor(positions, device=ids.device)).logits
                if logits.shape[1] == len(positions):
                    return logits, {p: c for c, p in enumerate(positions)}
            except TypeError:  # a model without logits_to_keep
                pass
            logits = self.model(input_ids=ids, attention_mask=mask).logits
        return logits, {p: p for p in positions}


def rolling_windows(tokens: list[int], prefix_token: int, max_len: int) -> list[tuple[list[int], list[int]]]:
    """Disjoint (context, continuation) windows covering tokens, each input at most max_len tokens (as lm-eval)."""
    out: list[tuple[list[int], list[int]]] = []
    if not tokens:
        return out
    first = min(max_len, len(tokens))
    out.append(([prefix_token], tokens[:first]))
    done = first
    while done < len(tokens):
        n = min(len(tokens) - done, max_len)
        end = done + n
        window = tokens[max(end - max_len - 1, 0) : end - 1]
        out.append((window[: len(window) - (n - 1)], tokens[end - n : end]))
        done = end
    return out
