"""The stream packing methods, "standard" and "within_domain" (packing.py's packers, registered as methods).

Registered here, not in packing.py: the pipeline imports packing.py's packers, and methods.py binds every method to the
pipeline, so a packing.py that registered methods would close an import cycle (tests/test_no_import_cycles.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.trainers.data.methods import register_method
from ctxbench.trainers.data.packing import StreamPacker, WithinDomainPacker


class StreamArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    carry_over: bool = Field(True, description="start the next sequence with the rest of a cut-off document "
                                               "(concatenate-and-chunk); false drops it")


@register_method("standard", StreamArgs)
def build_standard(*, framer, args: StreamArgs, seed: int, **_):
    """Example packing (Brown et al. 2020): random documents, concatenated and chunked."""
    return StreamPacker(framer, seed, args.carry_over)


@register_method("within_domain", StreamArgs)
def build_within_domain(*, framer, args: StreamArgs, seed: int, **_):
    """Within-domain example packing: random documents of a single domain per sequence."""
    return WithinDomainPacker(framer, seed, args.carry_over)
