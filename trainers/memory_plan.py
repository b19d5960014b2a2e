"""`ctxbench train ... --plan`: per-GPU memory of a training config and the smallest cluster it fits on.

Four parts per GPU, in bytes (docs/training-at-scale.md derives and checks them):
- weights: the 16-bit working copy (2 B/param; under ZeRO-3 a 1/N partition plus the largest layer gathered at 4 B/param,
  as DeepSpeed's estimator counts it); without DeepSpeed, the fp32 weights autocast trains (4 B/param);
- gradients and optimiser states of the trainable parameters: DeepSpeed's 18 B/param (16-bit and fp32 gradients 2+4,
  fp32 master weights 4, Adam moments 8), split 6 + 12 and divided by N from ZeRO-2 on (optimiser states from ZeRO-1 on);
  ZeRO-3 with offload keeps them in CPU memory; without DeepSpeed, fp32 gradients 4 and Adam moments 8;
- activations of the per-GPU micro-batch: with activation checkpointing, every layer's input (2h B/token) plus one layer's
  working set; without, every layer's working set; divided by the sequence-parallel degree; plus the logits where the loss
  reads them (all positions for CPT, answers only for hqa_sft and LOGO).
The model states with ZeRO-3 equal DeepSpeed's `estimate_zero3_model_states_mem_needs` plus the 16-bit partition 2P/N,
which that estimator leaves out (tests/trainers/test_memory_plan.py checks both).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.context_parallel import layout
from ctxbench.trainers.plan_margin import margin_lines, margin_of

GIB = 1024**3
CLUSTERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
HEADROOM = 0.9  # of a GPU's memory: the CUDA context, the allocator's fragmentation and communication buffers


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer's sizes (what the plan needs of a model)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool = False
    gated_mlp: bool = True  # SwiGLU (Llama, Mistral, SmolLM2): 3 MLP matrices; GPT-NeoX (Pythia): 2

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.hidden // self.heads

    def layer_params(self) -> int:
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim
        return attn + (3 if self.gated_mlp else 2) * self.hidden * self.intermediate + 2 * self.hidden

    def params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return embeddings + self.layers * self.layer_params() + self.hidden

    def largest_layer(self) -> int:
        """Parameters of the largest module (DeepSpeed's model_to_params: the embedding, in these models)."""
        return max(self.vocab * self.hidden, (3 if self.gated_mlp else 2) * self.hidden * self.intermediate)

    def mlp_bytes(self) -> int:
        """Of activation_bytes: what the MLP saves beyond its input (up, gate, activation, product; 2 for GPT-NeoX)."""
        return 2 * self.intermediate * (4 if self.gated_mlp else 2)

    def activation_bytes(self) -> int:
        """16-bit bytes saved for backward per token by one layer with flash/SDPA attention: the norm inputs (kept in
        fp32 by RMSNorm), q/k/v and attention output, the MLP's up/gate/activation/product."""
        h, kv, inter = self.hidden, self.kv_dim, self.intermediate
        return 2 * (6 * h + 2 * kv) + 8 * h + 2 * inter * (4 if self.gated_mlp else 2)


# The paper configs' base models (their config.json), so a plan needs no download.
KNOWN: dict[str, Shape] = {
    "EleutherAI/pythia-1.4b": Shape(2048, 24, 16, 16, 8192, 50304, gated_mlp=False),
    "openlm-research/open_llama_3b_v2": Shape(3200, 26, 32, 32, 8640, 32000),
    "meta-llama/Llama-3.1-8B-Instruct": Shape(4096, 32, 32, 8, 14336, 128256),
    "meta-llama/Meta-Llama-3-8B-Instruct": Shape(4096, 32, 32, 8, 14336, 128256),
    "namespace-Pt/Llama-3-8B-Instruct-80K-QLoRA-Merged": Shape(4096, 32, 32, 8, 14336, 128256),
    "meta-llama/Llama-2-7b-chat-hf": Shape(4096, 32, 32, 32, 11008, 32000),
    "mistralai/Mistral-7B-Instruct-v0.2": Shape(4096, 32, 32, 8, 14336, 32000),
    "smollm2-135m": Shape(576, 30, 9, 3, 1536, 49152, tied=True),
}


def shape_of(base: Any) -> Shape:
    """The Shape of a config's base_model: a scratch config, a known paper model, or a local HF directory."""
    cfg = getattr(base, "config", None)
    if cfg is None and isinstance(base, str) and base in KNOWN:
        return KNOWN[base]
    if cfg is None and isinstance(base, str) and (Path(base) / "config.json").is_file():
        cfg = json.loads((Path(base) / "config.json").read_text())
    if cfg is None:
        raise ConfigError(f"base_model: no shape known for {base!r} without downloading it; give a local model directory "
                          f"or one of {', '.join(sorted(KNOWN))}")
    heads = int(cfg.get("num_attention_heads", 4))
    return Shape(int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), heads, int(cfg.get("num_key_value_heads", heads)),
                 int(cfg.get("intermediate_size", 4 * cfg["hidden_size"])), int(cfg.get("vocab_size", 49152)),
                 bool(cfg.get("tie_word_embeddings", False)), cfg.get("model_type", "llama") != "gpt_neox")


@dataclass(frozen=True)
class Workload:
    """One training (one hqa_sft stage) as the plan sees it."""

    name: str
    shape: Shape
    seq_len: int  # tokens per sequence
    sequences: int  # sequences per GPU micro-batch (LOGO: samples x (1 + M) responses)
    trainable: int  # parameters with gradients and optimiser states
    logit_positions: float  # fraction of positions whose logits the loss computes
    zero: int = 0  # ZeRO stage; 0: no DeepSpeed (DDP)
    offload: bool = False  # ZeRO-3 optimiser and parameters in CPU memory
    sequence_parallel: int = 1  # processes sharing each sequence (Ulysses x ring)
    ring: int = 1  # of which ring attention (past the head count)
    checkpointing: bool = False
    eager: bool = False  # eager attention keeps the S x S scores
    loss_chunk_tokens: int = 0  # chunked loss: the logits of at most this many positions exist at once; 0: all
    tiled_mlp: int = 0  # MLP tiles (DeepSpeed's TiledMLP): the MLP saves only its input; 0: off
    activation_offload: bool = False  # what autograd saves (checkpointed: the layer inputs) kept in CPU memory


@dataclass(frozen=True)
class Plan:
    workload: Workload
    gpus: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    cpu_per_node: float  # DeepSpeed's CPU estimate with offload (8 GPUs a node), else 0
    logits: float = 0.0  # of the activations: the loss's logits term
    offloaded: float = 0.0  # activation_offload: the bytes per GPU kept in CPU memory instead

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def bound(self) -> float:
        """The peak a GPU may measure: the total and its margin (trainers/plan_margin.py)."""
        return self.total + margin_of(self).total


def per_gpu(w: Workload, gpus: int) -> Plan:
    """Bytes per GPU of `w` trained data parallel over `gpus` GPUs (ZeRO partitions over all of them)."""
    s, p, t = w.shape, w.shape.params(), w.trainable
    if w.zero == 0:
        weights, grads, optim, cpu = 4.0 * p, 4.0 * t, 8.0 * t, 0.0
    else:
        weights = 2.0 * p / gpus + 4.0 * s.largest_layer() if w.zero == 3 else 2.0 * p
        grads = 6.0 * t / (gpus if w.zero >= 2 else 1)
        optim = 12.0 * t / gpus
        cpu = 0.0
        if w.offload:
            weights, grads, optim = 4.0 * s.largest_layer(), 0.0, 0.0
            cpu = 18.0 * p * 1.5  # DeepSpeed: zero_init, offloaded parameters and optimiser, per node
    local = w.seq_len / w.sequence_parallel
    tokens = local * w.sequences
    acts, offloaded = layer_activations(w, tokens)
    if w.eager:
        kept = s.layers if not w.checkpointing else 1
        acts += kept * w.sequences * (s.heads / w.sequence_parallel) * w.seq_len**2 * 4.0
    logit_rows = tokens * w.logit_positions
    if w.loss_chunk_tokens:
        logit_rows = min(logit_rows, w.loss_chunk_tokens)  # one chunk's logits at a time, forward and recomputed backward
    logits = logit_rows * s.vocab * 10.0  # 16-bit logits, their fp32 copy, the fp32 gradient
    return Plan(w, gpus, weights, grads, optim, acts + logits, cpu, logits, offloaded)


def layer_activations(w: Workload, tokens: float) -> tuple[float, float]:
    """(bytes the layers keep on the GPU for backward, bytes activation offload keeps in CPU memory instead)."""
    s = w.shape
    layer = s.activation_bytes() - (s.mlp_bytes() if w.tiled_mlp else 0)  # tiled: the MLP keeps its input alone
    kept = s.layers if not w.checkpointing else 1  # layers whose working set is alive at once
    inputs = tokens * 2 * s.hidden * s.layers if w.checkpointing else 0.0
    offloaded = 0.0
    if w.activation_offload:  # back to the GPU one layer at a time in backward
        offloaded = inputs if w.checkpointing else tokens * layer * (s.layers - 1)
    tile = tokens / w.tiled_mlp * s.mlp_bytes() if w.tiled_mlp else 0.0  # one tile's intermediates, while it runs
    return tokens * layer * kept + inputs - offloaded + tile, offloaded


def smallest_cluster(w: Workload, gpu_bytes: float) -> Plan | None:
    """The plan on the fewest GPUs (a multiple of the sequence-parallel degree) that fits; None: none does."""
    for n in CLUSTERS:
        if n % w.sequence_parallel == 0 and (plan := per_gpu(w, n)).bound <= HEADROOM * gpu_bytes:
            return plan
    return None


def longest_seq_len(w: Workload, gpus: int, gpu_bytes: float, step: int = 1024, most: int = 1 << 24) -> int:
    """The longest sequence (a multiple of `step`, at most `most`) whose plan and margin fit `gpus` GPUs as `w` is laid
    out; 0: not even `step` tokens. Activations grow with the length, so the search halves."""
    fits = lambda n: per_gpu(replace(w, seq_len=n * step), gpus).bound <= HEADROOM * gpu_bytes  # noqa: E731
    lo, hi = 0, most // step
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo * step


def needed_sequence_parallel(w: Workload, gpu_bytes: float) -> int | None:
    """The smallest sequence-parallel degree with which `w` fits somewhere (None: not even at the largest cluster);
    past the head count it is ring attention's."""
    for sp in CLUSTERS:
        if smallest_cluster(replace(w, sequence_parallel=sp), gpu_bytes) is not None:
            return sp
    return None


def needed_layout(sp: int, heads: int) -> str:
    """The config line that gives degree `sp`: Ulysses up to the heads, ring attention past them."""
    return f"sequence_parallel >= {sp}" if sp <= heads else f"sequence_parallel: {{ring: {sp}}} (past the {heads} heads)"


def zero_of(spec: str | None) -> tuple[int, bool]:
    """(ZeRO stage, offloaded) of a config's deepspeed preset or JSON; (0, False) without DeepSpeed."""
    if not spec:
        return 0, False
    from ctxbench.trainers.base import deepspeed_path

    z = json.loads(deepspeed_path(spec).read_text()).get("zero_optimization", {})
    offload = any((z.get(key) or {}).get("device") in ("cpu", "nvme") for key in ("offload_optimizer", "offload_param"))
    return int(z.get("stage", 0)), offload


def workload(config: Any, name: str, *, seq_len: int, sequences: int, trainable: int | None = None,
             logit_positions: float = 1.0, sequence_parallel: int | None = None) -> Workload:
    """A Workload from a TrainerConfig's shared settings (model, DeepSpeed, sequence parallelism, checkpointing,
    attention)."""
    shape = shape_of(config.base_model)
    zero, offload = zero_of(config.deepspeed)
    sp = layout(sequence_parallel or getattr(config, "sequence_parallel", 1))
    zero = 3 if sp.ring > 1 else zero  # ring attention runs under FSDP2 full_shard: ZeRO-3's partitioning
    return Workload(name, shape, seq_len, sequences, shape.params() if trainable is None else trainable, logit_positions,
                    zero, offload, sp.degree, sp.ring, config.gradient_checkpointing, config.attn_implementation == "eager",
                    getattr(config, "loss_chunk_tokens", 0), getattr(config, "tiled_mlp", 0),
                    getattr(config, "activation_offload", False))


def lora_trainable(shape: Shape, lora: Any) -> int:
    """LoRA adapter parameters plus the modules trained in full (embeddings, norms) of a LoraSpec."""
    h, kv = shape.hidden, shape.kv_dim
    dims = {"q_proj": (h, h), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (h, h), "gate_proj": (h, shape.intermediate),
            "up_proj": (h, shape.intermediate), "down_proj": (shape.intermediate, h)}
    adapters = shape.layers * sum(lora.r * sum(dims[m]) for m in lora.target_modules if m in dims)
    full = shape.vocab * h if any("embed" in t for t in lora.trainable) else 0
    norms = (2 * shape.layers + 1) * h if any("norm" in t for t in lora.trainable) else 0
    return adapters + full + norms


def gib(x: float) -> str:
    return f"{x / GIB:,.1f} GiB"


def render(workloads: list[Workload], gpu_gib: float) -> list[str]:
    """The plan's lines: each workload's per-GPU parts on the smallest cluster it fits, or what it would need."""
    gpu = gpu_gib * GIB
    lines = []
    for w in workloads:
        z = f"ZeRO-{w.zero}{' offload' if w.offload else ''}" if w.zero else "DDP (no DeepSpeed)"
        lines.append(f"{w.name}: {w.shape.params() / 1e9:.3g}B parameters ({w.trainable / 1e9:.3g}B trained), "
                     f"{w.sequences} x {w.seq_len:,} tokens per GPU, {z}, sequence parallel {w.sequence_parallel}"
                     f"{f' (ring {w.ring})' if w.ring > 1 else ''}, "
                     f"activation checkpointing {'on' if w.checkpointing else 'off'}"
                     f"{f', loss in chunks of {w.loss_chunk_tokens:,} tokens' if w.loss_chunk_tokens else ''}"
                     f"{f', tiled MLP in {w.tiled_mlp} tiles' if w.tiled_mlp else ''}"
                     f"{', activation offload' if w.activation_offload else ''}")
        plan = smallest_cluster(w, gpu)
        shown = plan or per_gpu(w, max(CLUSTERS))
        cpu = f", CPU {gib(shown.cpu_per_node)} per node" if shown.cpu_per_node else ""
        lines.append(f"  per GPU on {shown.gpus} GPU(s): weights {gib(shown.weights)}, gradients {gib(shown.gradients)}, "
                     f"optimizer {gib(shown.optimizer)}, activations {gib(shown.activations)}; total {gib(shown.total)}{cpu}")
        if shown.offloaded:
            lines.append(f"  activations offloaded to CPU: {gib(shown.offloaded)} per GPU (CPU memory, not in the total)")
        lines += margin_lines(shown, gib)
        if plan is not None:
            lines.append(f"  fits: {plan.gpus} x {gpu_gib:g} GiB GPU(s) (total and margin at most {HEADROOM:.0%} of each)")
        else:
            sp = needed_sequence_parallel(w, gpu)
            need = needed_layout(sp, w.shape.heads) if sp else "more than sequence parallelism (a smaller micro-batch or model)"
            lines.append(f"  does not fit on up to {max(CLUSTERS)} x {gpu_gib:g} GiB GPUs as configured: needs {need}")
    return lines
