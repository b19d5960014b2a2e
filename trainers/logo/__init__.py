"""LOGO (Long cOntext aliGnment via efficient preference Optimization): data, positions, objective, trainer.

chunks: QA samples, token chunks and importance scorers (§3.2.2); positions: Eq. 4 synthetic position ids
(App. D); generation: the policy as its own generator through a ctxbench backend, with a call cache;
data: the `logo` synthesis method (`synthesize("logo", config) -> manifest`) (shards of chosen + M rejected responses); loss: Eq. 2-3;
lora: PEFT LoRA with trainable embeddings and norms; trainer: the registered `logo` trainer.
"""
