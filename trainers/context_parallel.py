"""The sequence-parallel layout: DeepSpeed-Ulysses (`ulysses`, up to the head count) or ring attention (`ring`, past it).

`sequence_parallel: N` is Ulysses over N processes (trainers/distributed.py). `sequence_parallel: {ring: N}` is
PyTorch's context parallelism (`torch.distributed.tensor.experimental.context_parallel`, what torchtitan uses), driven
by transformers 5 and accelerate 1.15 (`ParallelismConfig(cp_size=N, cp_backend="torch")`) under FSDP2: each process
keeps S/N tokens and the key/value shards pass round the ring, so the degree is bounded by the sequence length, not
the heads. Nothing here computes attention.

torch 2.13's ring attention dispatches only the CUDA SDPA kernels (flash, efficient, cuDNN); on a CPU (a launched
run over gloo) trainers/ring_cpu.py adds torch's CPU SDPA kernel to the same ring and an accelerate state FSDP2
accepts. Refused with one line rather than worked around: accelerate 1.15 refuses `cp_size > 1` with `sp_size > 1`
(Ulysses and ring do not combine, no USP), and a head run after the forward under FSDP2 (LOGO's chunked rewards;
CPT's and hqa_sft's chunked loss run inside the forward, trainers/chunked_loss.py `loss_in_forward`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError

RING_ATTENTION = ("sdpa",)  # transformers' context parallelism takes SDPA only


class SequenceParallel(BaseModel):
    """How many processes share each sequence, and how: Ulysses (whole heads per process) or ring attention."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ulysses: int = Field(1, ge=1, description="DeepSpeed-Ulysses degree (needs deepspeed; divides the attention heads)")
    ring: int = Field(1, ge=1, description="ring-attention degree (torch context parallelism under FSDP2; GPUs or CPUs; "
                      "2 x ring divides the sequence length)")

    @property
    def degree(self) -> int:
        return self.ulysses * self.ring

    @property
    def spec(self) -> int | dict[str, int]:
        """How the layout is recorded and named: an int when it is Ulysses alone, so older run marks compare equal."""
        return self.ulysses if self.ring == 1 else self.model_dump()


def layout(value: int | SequenceParallel) -> SequenceParallel:
    """The layout of a config's `sequence_parallel` (an int is the Ulysses degree, as before rings existed)."""
    return value if isinstance(value, SequenceParallel) else SequenceParallel(ulysses=value)


def check_ring(sp: SequenceParallel, *, deepspeed: str | None, attn: str, seq_len: int | None, world: int) -> None:
    """Refuse, in one line, a ring degree that cannot run as configured (sp.ring > 1)."""
    where, n = "sequence_parallel.ring", sp.ring
    if sp.ulysses > 1:
        raise ConfigError(f"sequence_parallel: ulysses {sp.ulysses} with ring {n} (USP) does not run: accelerate 1.15 "
                          "runs Ulysses (DeepSpeed) or ring attention (FSDP2), not both; set one of them to 1")
    if deepspeed:
        raise ConfigError(f"{where}: {n} runs under FSDP2 (torch context parallelism), not DeepSpeed; drop deepspeed: "
                          f"{deepspeed} (FSDP2 shards the weights and optimizer as ZeRO-3 does)")
    if attn not in RING_ATTENTION:
        raise ConfigError(f"{where}: {n} needs attn_implementation sdpa (ring attention wraps SDPA), not {attn}")
    if world % n:
        raise ConfigError(f"{where}: {n} does not divide the {world} launched process(es); launch a multiple of {n} "
                          f"(torchrun --nproc_per_node {n})")
    if seq_len is not None and seq_len % (2 * n):
        raise ConfigError(f"{where}: {n} needs a sequence length divisible by {2 * n} (each process takes a head and a "
                          f"tail chunk, balancing causal attention), not {seq_len}")


def check_ring_loss(sp: SequenceParallel, loss_chunk_tokens: int) -> None:
    """LOGO's chunked rewards run the output head after the model's forward; under a ring (FSDP2) accelerate groups the
    head with the final norm and the embedding, and that group's gathered weights are freed before the norm's backward
    reads them (a crash, not an error). Refused in one line."""
    if sp.ring > 1 and loss_chunk_tokens:
        raise ConfigError(f"loss_chunk_tokens: {loss_chunk_tokens} runs the output head after the model's forward, which "
                          f"FSDP2 does not support under sequence_parallel.ring {sp.ring}; set loss_chunk_tokens: 0 (each "
                          "process of the ring holds the logits of its own share of the positions only)")


# Under DeepSpeed-Ulysses (0.19.8) the core attention gets the gathered position ids and no mask: flash attention 2/3
# (transformers' varlen path) masks per document where they restart; SDPA's 4D mask is dropped (plain causal) and
# flex's BlockMask is rebuilt plain causal.
PER_DOCUMENT_ULYSSES_ATTENTION = ("flash_attention_2", "flash_attention_3")


def check_per_document(sp: SequenceParallel, attn: str) -> None:
    """Refuse, in one line, a layout under which a per_document packing would attend across documents."""
    if sp.ring > 1:
        raise ConfigError(f"attention: per_document packing does not run under sequence_parallel.ring {sp.ring}: torch's "
                          "ring attention takes a plain causal mask (SDPA is_causal), so documents would attend across "
                          f"their boundaries; use sequence_parallel: {sp.ring} (Ulysses) with attn_implementation "
                          "flash_attention_2, or attention: cross_document")
    if sp.ulysses > 1 and attn not in PER_DOCUMENT_ULYSSES_ATTENTION:
        raise ConfigError(f"attention: per_document packing under sequence_parallel {sp.ulysses} needs attn_implementation "
                          f"flash_attention_2 or flash_attention_3, not {attn}: DeepSpeed-Ulysses drops the per-document "
                          "mask (sdpa: the 4D mask; flex: rebuilt plain causal), while flash attention masks per document "
                          "from the gathered position ids; set attn_implementation: flash_attention_2 (CUDA)")


def ring_arguments(kw: dict[str, Any], sp: SequenceParallel, world: int) -> dict[str, Any]:
    """TrainingArguments keys for ring attention over sp.ring processes: FSDP2 over all of them, context parallel in
    groups of sp.ring (transformers shards input_ids, labels and position_ids along the sequence per step). The key and
    value shards pass round the ring (torch's `alltoall` rotation; accelerate's default, `allgather`, would gather the
    whole sequence's keys and values on every process). Activation checkpointing is FSDP's own (transformers' would
    add an all-gather in backward)."""
    if sp.ring == 1:
        return kw
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import TorchContextParallelConfig

    if kw.get("use_cpu"):  # a launched CPU run (distributed_arguments); on GPUs torch's own CUDA entries run
        from ctxbench.trainers.ring_cpu import fsdp_on_cpu, install_cpu_ring

        install_cpu_ring()
        kw = {**kw, **fsdp_on_cpu()}
    config = ParallelismConfig(dp_shard_size=world // sp.ring, cp_size=sp.ring, cp_backend="torch",
                               cp_handler=TorchContextParallelConfig(cp_comm_strategy="alltoall"))
    fsdp_config = {"version": 2, "activation_checkpointing": bool(kw.get("activation_checkpointing")),
                   **kw.get("fsdp_config", {})}
    return {**kw, "fsdp": True, "fsdp_config": fsdp_config, "activation_checkpointing": False, "parallelism_config": config}
