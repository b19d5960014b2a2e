"""Corpus ingestion and packing methods that turn documents into training sequences.

Entry point: trainers.data.pipeline.synthesize(SynthesisConfig) -> Manifest (resumable); methods live in
trainers.data.methods.METHODS (standard, within_domain, splice, quest, knn, iclm); trainers stream the
result with trainers.data.shards.iter_sequences; `ctxbench data inspect` reports diagnostics.
"""
