"""Data synthesis: the one core every data method runs through, corpus ingestion and the packing methods.

Entry point: trainers.data.synthesis.synthesize(method, config) (identity, reuse or refuse, one writer; every
method is registered under kind "synthesis": the packings, hqa, logo, plugins'); model-written data goes through
trainers.data.generator.GeneratorClient. Packing: trainers.data.pipeline.synthesize(SynthesisConfig) -> Manifest
(resumable shard by shard); packing methods register with trainers.data.methods.register_method; trainers stream
the result with trainers.data.shards.iter_sequences; `ctxbench data inspect` reports diagnostics.
"""
