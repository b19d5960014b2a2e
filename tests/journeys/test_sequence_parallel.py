"""Journey (issue 27 item 3): a user asks for sequence parallelism that cannot run as launched, and reads one line
before anything is made: no packed data, no run directory. The trainings themselves are checked in
tests/trainers/test_sequence_parallel.py (2 processes sharing each sequence equal 1 process).
The default tier's commands here run in process (`user_in_process`)."""

from __future__ import annotations

import yaml

from .conftest import User


def test_a_degree_the_launch_cannot_run_is_refused_before_the_data_is_packed(user_in_process: User):
    cfg = {"base_model": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2}, "tokenizer": "smollm2-135m"},
           "max_steps": 2, "deepspeed": "zero3", "sequence_parallel": 2,
           "data": {"synthesis": {"corpus": {"path": "stdlib:json", "format": "repo"}, "method": "standard",
                                  "seq_len": 256, "budget_tokens": 5000, "tokenizer": "smollm2-135m",
                                  "out_dir": "packed/sp"}}}
    (user_in_process.cwd / "sp.yaml").write_text(yaml.safe_dump(cfg))
    r = user_in_process.run("ctxbench train cpt --config sp.yaml")
    assert r.code == 2, r.err
    assert r.err.strip() == ("error: sequence_parallel: 2 does not divide the 1 launched process(es); launch a multiple "
                             "of 2 (torchrun --nproc_per_node 2)")
    assert user_in_process.files() == {"sp.yaml"}

    cfg["deepspeed"] = None  # Ulysses runs inside DeepSpeed
    (user_in_process.cwd / "sp.yaml").write_text(yaml.safe_dump(cfg))
    r = user_in_process.run("ctxbench train cpt --config sp.yaml")
    assert r.code == 2 and r.err.strip().startswith("error: sequence_parallel: 2 needs DeepSpeed"), r.err
    assert user_in_process.files() == {"sp.yaml"}
