"""Multi-process training (torchrun, accelerate launch, deepspeed): one data-parallel training, or a refusal.

A launcher starts N processes with WORLD_SIZE/RANK/LOCAL_RANK set. transformers runs them as one DDP training on a
GPU (nccl), but on a CPU only with `use_cpu=True` (gloo): without it every rank trains its own replica and writes the
same files. So a launched run without a GPU gets use_cpu (and gloo) here, and a configuration under which
transformers would still not run the N processes as one training is refused with one line before anything is written.
Rank 0 decides what the run does (train, skip as finished, refuse) and tells the other ranks, so all act alike.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ctxbench.harness.core.errors import ConfigError


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_world_size() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))


def is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def launched() -> bool:
    """Whether a launcher started this process as one of several."""
    return world_size() > 1


def distributed_arguments(kw: dict[str, Any], *, has_cuda: bool) -> dict[str, Any]:
    """TrainingArguments keys that make a launched run data parallel: use_cpu and gloo where no GPU is used."""
    if not launched():
        return kw
    n = world_size()
    if kw.get("deepspeed"):
        import importlib.util

        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError("deepspeed: the deepspeed package is not installed; install it (pip install 'ctxbench[train]', "
                              "which pins deepspeed==0.19.8) "
                              "or drop deepspeed from the config to train with plain DDP")
        return {**kw, **deepspeed_on_cpu()} if not has_cuda else kw  # on GPUs DeepSpeed sets up its own group
    if not has_cuda or kw.get("use_cpu"):
        if kw.get("use_cpu") is False:
            raise ConfigError(f"extra_args.use_cpu: false with {n} processes and no GPU would train {n} independent "
                              "replicas; remove it (ctxbench sets use_cpu for a launched CPU run)")
        kw = {**kw, "use_cpu": True, "ddp_backend": kw.get("ddp_backend") or "gloo"}
    else:
        import torch

        if local_world_size() > torch.cuda.device_count():
            raise ConfigError(f"--nproc_per_node: {local_world_size()} processes on a machine with "
                              f"{torch.cuda.device_count()} GPU(s); launch at most one process per GPU")
    return {"ddp_find_unused_parameters": False, **kw}  # every trained weight takes part in every step


SP_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3")  # what DeepSpeed-Ulysses wraps (not eager: its 4D mask)


def check_sequence_parallel(value: int | Any, *, deepspeed: str | None, attn: str, seq_len: int | None, trainer: str,
                            supported: bool = True, heads: tuple[int, int] | None = None, has_cuda: bool = False) -> None:
    """Refuse, in one line and before anything is written, a sequence-parallel layout that cannot run as configured
    (`value`: the Ulysses degree, or a trainers.context_parallel.SequenceParallel). `has_cuda` no longer decides
    anything (rings run on a CPU too, trainers/ring_cpu.py); callers still pass it."""
    from ctxbench.trainers.context_parallel import check_ring, layout

    sp = layout(value)
    if sp.degree == 1:
        return
    where, degree = "sequence_parallel", sp.ulysses
    if not supported:
        raise ConfigError(f"{where}: trainer {trainer} has no sequence parallelism (its sequences fit one GPU, see "
                          "`ctxbench train ... --plan`); set sequence_parallel: 1")
    if sp.ring > 1:
        return check_ring(sp, deepspeed=deepspeed, attn=attn, seq_len=seq_len, world=world_size())
    if not deepspeed:
        raise ConfigError(f"{where}: {degree} needs DeepSpeed (DeepSpeed-Ulysses shards the sequence inside it); "
                          "set deepspeed: zero3 (or a ZeRO-2 JSON)")
    if attn not in SP_ATTENTION:
        raise ConfigError(f"{where}: {degree} needs attn_implementation sdpa or flash_attention_2/3, not {attn}")
    if world_size() % degree:
        raise ConfigError(f"{where}: {degree} does not divide the {world_size()} launched process(es); launch a multiple of "
                          f"{degree} (torchrun --nproc_per_node {degree})")
    if seq_len is not None and seq_len % degree:
        raise ConfigError(f"{where}: {degree} does not divide the sequence length {seq_len}; use a seq_len divisible by it")
    if heads is not None and (heads[0] % degree or (heads[1] % degree and degree % heads[1])):
        raise ConfigError(f"{where}: {degree} must divide the model's {heads[0]} attention heads, and divide or be a "
                          f"multiple of its {heads[1]} key/value heads (Ulysses gives each process whole heads; past "
                          "the heads use sequence_parallel: {ring: N})")


def model_heads(base: Any) -> tuple[int, int] | None:
    """(attention heads, key/value heads) of a scratch, known or local model; None where only a download would tell."""
    from ctxbench.trainers.memory_plan import shape_of

    try:
        shape = shape_of(base)
    except ConfigError:
        return None
    return shape.heads, shape.kv_heads


def sequence_parallel_arguments(kw: dict[str, Any], value: int | Any, attn: str) -> dict[str, Any]:
    """TrainingArguments keys for the layout: DeepSpeed-Ulysses over `ulysses` processes, or ring attention over `ring`
    (transformers and accelerate drive both)."""
    from ctxbench.trainers.context_parallel import layout, ring_arguments

    sp = layout(value)
    if sp.ring > 1:
        return ring_arguments(kw, sp, world_size())
    if sp.ulysses == 1:
        return kw
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import DeepSpeedSequenceParallelConfig

    handler = DeepSpeedSequenceParallelConfig(sp_attn_implementation=attn)
    return {**kw, "parallelism_config": ParallelismConfig(sp_backend="deepspeed", sp_size=sp.ulysses, sp_handler=handler)}


def deepspeed_on_cpu() -> dict[str, Any]:
    """accelerate (1.15) starts DeepSpeed's CPU accelerator as a world of one process, so every rank would train a
    replica. Start DeepSpeed's process group over gloo and an accelerate state of all the processes first, and have
    TrainingArguments use that state (its `use_configured_state`)."""
    import deepspeed
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    state = PartialState(cpu=True, backend="gloo")
    state.distributed_type = DistributedType.DEEPSPEED
    return {"accelerator_config": {"use_configured_state": True}}


def use_threads(threads: int) -> None:
    """torch CPU threads: `threads` if set; on a CPU, the cores other work leaves free (harness/core/cores.py), shared by
    the processes a launcher started on this machine; on a GPU, torch's default."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    elif not torch.cuda.is_available():
        from ctxbench.harness.core.cores import default_threads

        torch.set_num_threads(max(1, default_threads() // local_world_size()))


def refuse_other_world_size(out: Any, before: int, per_process_batch: int, *, sp_before: Any = 1, sp_now: Any = 1) -> None:
    """Checkpoints resumed by another number of processes (or sequence-parallel degree) would take another global batch:
    their step count and data order would no longer be the run's. Refused, naming the layout that resumes them."""
    now = world_size()
    if sp_before != sp_now:
        raise ConfigError(f"output_dir: {out} holds checkpoints trained with sequence_parallel {sp_before}, this config has "
                          f"{sp_now}; resume with sequence_parallel: {sp_before} or pass --fresh to start over")
    if before != now:
        raise ConfigError(f"output_dir: {out} holds checkpoints trained by {before} process(es) (global batch "
                          f"{per_process_batch * before}), this launch has {now} (global batch {per_process_batch * now}); "
                          f"resume with {before} process(es) (torchrun --nproc_per_node {before}) or pass --fresh to start over")


def check_data_parallel(args: Any) -> None:
    """Refuse a launched run that transformers would not train as one model over all processes."""
    if launched() and args.world_size != world_size():
        raise ConfigError(f"launcher: {world_size()} processes were started, but transformers would train "
                          f"{world_size()} independent replicas (parallel mode {args.parallel_mode.value}); "
                          "drop extra_args that select a device, or launch one process")


def from_rank0(value: Any = None) -> Any:
    """Rank 0's `value` on every rank (a no-op in one process): what the run does, decided once."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def outlive_rank0() -> bool:
    """Wait until rank 0 has gone (it prints a refusal and exits; the launcher then stops this rank), so the one line
    is printed before the launcher stops the ranks. False where no process group exists (each rank says it itself)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return False
    with contextlib.suppress(Exception):  # rank 0 never joins: its exit breaks the barrier
        dist.barrier()
    return True


@contextlib.contextmanager
def whole_model_init():
    """Build a whole model in this process even during a ZeRO-3 training (whose init would partition it over the
    processes): LOGO merges its gathered adapter into a whole base model on rank 0."""
    from transformers.integrations import deepspeed as hf_deepspeed

    ref = hf_deepspeed._hf_deepspeed_config_weak_ref
    hf_deepspeed._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = ref
