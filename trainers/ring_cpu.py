"""Ring attention on a CPU: torch's own ring algorithm run with torch's CPU SDPA kernel.

torch 2.13's context parallelism (`torch.distributed.tensor.experimental._context_parallel._attention`) maps only the
CUDA SDPA ops (flash, efficient, cuDNN) to its ring; the CPU op `_scaled_dot_product_flash_attention_for_cpu` has no
entry, so `sequence_parallel: {ring: N}` could not run (nor be tested) without GPUs. The ring itself,
`_templated_ring_attention` and `_templated_ring_attention_backward` (key/value rotation, head-tail load balance,
log-sum-exp merge, gradient rotation), takes the kernel as an argument, and the CPU kernel returns what it needs (the
output and its log-sum-exp; the backward takes them back). This adapter adds the two CPU ops to torch's CP op table
(`custom_ops`, which `context_parallel` swaps into the DTensor dispatcher on entry and out on exit), so nothing here
computes attention. It leans on private torch API, pinned to torch 2.13 by tests/trainers/test_ring_cpu.py
(`test_the_private_torch_api_the_adapter_uses_is_still_there`), which fails loudly if torch moves it.
"""

from __future__ import annotations

from typing import Any

SEQ_DIM = 2  # (batch, heads, sequence, head_dim), as torch's CP hardcodes


def _ring_forward(group: Any, query: Any, key: Any, value: Any, dropout_p: float = 0.0, is_causal: bool = False, *,
                  attn_mask: Any = None, scale: float | None = None) -> tuple[Any, ...]:
    """`_scaled_dot_product_flash_attention_for_cpu` over the ring: (output, logsumexp) of the local queries."""
    import torch
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    if attn_mask is not None:  # accelerate's CP hooks drop the mask for is_causal; a mask here would be ignored
        raise NotImplementedError("ring attention on a CPU takes is_causal, not an attention mask")
    return cp._templated_ring_attention(group, SEQ_DIM, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu,
                                        query=query, key=key, value=value, is_causal=is_causal, dropout_p=dropout_p,
                                        scale=scale)


def _ring_backward(group: Any, grad_out: Any, query: Any, key: Any, value: Any, out: Any, logsumexp: Any,
                   dropout_p: float, is_causal: bool, *, attn_mask: Any = None, scale: float | None = None) -> tuple[Any, ...]:
    """`_scaled_dot_product_flash_attention_for_cpu_backward` over the ring: the local (grad q, grad k, grad v)."""
    import torch
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    return cp._templated_ring_attention_backward(
        group, SEQ_DIM, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default, grad_out=grad_out,
        grad_out_name="grad_out", query=query, key=key, value=value, out=out, logsumexp=logsumexp, is_causal=is_causal,
        dropout_p=dropout_p, attn_mask=attn_mask, scale=scale)


def _ring_ops() -> dict[Any, Any]:
    import torch

    aten = torch.ops.aten
    return {aten._scaled_dot_product_flash_attention_for_cpu.default: _ring_forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward.default: _ring_backward}


def _cpu_ring_handler(op_call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The DTensor handler for the two CPU ops: unwrap the sequence shards, run the ring over the mesh's process group,
    wrap the local results as sequence shards again (what torch's `_sdpa_handler` does for the CUDA ops; the
    placements are fixed, so no sharding rule is registered)."""
    import torch
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta

    shards = [a for a in (*args, *kwargs.values()) if isinstance(a, DTensor)]
    mesh, placement = shards[0].device_mesh, (Shard(SEQ_DIM),)
    if mesh.ndim != 1 or any(t.device_mesh != mesh or tuple(t.placements) != placement for t in shards):
        raise NotImplementedError("ring attention on a CPU takes query, key and value sharded on the sequence (dim 2) "
                                  "over a one-dimensional mesh")

    def local(a: Any) -> Any:
        return a._local_tensor if isinstance(a, DTensor) else a

    results = _ring_ops()[op_call](mesh.get_group(), *map(local, args), **{k: local(v) for k, v in kwargs.items()})

    def spec(r: Any) -> Any:  # the local stride: the CP wrapper hands local tensors on at once, backward reads them
        shape = list(r.shape)
        shape[SEQ_DIM] *= mesh.size()
        return DTensorSpec(mesh, placement, TensorMeta(torch.Size(shape), r.stride(), r.dtype))

    return DTensor._op_dispatcher.wrap(tuple(results), tuple(spec(r) for r in results))


def install_cpu_ring() -> None:
    """Add the CPU SDPA ops to torch's context-parallel op table (idempotent; CUDA ops keep torch's own handler)."""
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    cp.custom_ops.update(dict.fromkeys(_ring_ops(), _cpu_ring_handler))


def fsdp_on_cpu() -> dict[str, Any]:
    """accelerate (1.15) turns FSDP (and so context parallelism) on only for a multi-GPU state: a launched CPU run is
    MULTI_CPU and its ParallelismConfig is refused. Start the state of all the processes over gloo on the CPU and mark
    it multi-device, so that AcceleratorState takes its FSDP branch (which makes it FSDP, with the Trainer's plugin),
    and have TrainingArguments use that state (its `use_configured_state`), as deepspeed_on_cpu does for DeepSpeed."""
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType

    AcceleratorState._reset_state(reset_partial_state=True)  # as TrainingArguments does; else a former stage's is kept
    state = PartialState(cpu=True, backend="gloo")
    state.distributed_type = DistributedType.MULTI_GPU  # AcceleratorState turns it into FSDP at once
    return {"accelerator_config": {"use_configured_state": True}}
