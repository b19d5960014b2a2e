"""Data-synthesis and training methods that produce checkpoints the harness scores (see the trainer issues)."""
