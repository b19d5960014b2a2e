"""The other half of a resume (issue 33's Done-when audit): a run is found by its id, then the store's identity check
compares the record's `identity_args` with the new plan's (harness/core/store.py check_identity). Speed-only arguments
must stay out of both for every registered backend, or a resume with another batch size finds the run and is then
refused; a result-changing argument must be in them."""

from __future__ import annotations

import pytest

from tests.test_identity_rule import RESULT_ARG, SPEED, args_of, plan, registered_backends


@pytest.mark.parametrize("backend", registered_backends())
def test_speed_arguments_stay_out_of_the_recorded_identity(backend):
    fields = args_of(backend).model_fields
    base = plan(backend, {}).identity_args()
    for key in [k for k in SPEED if k in fields] or ["batch_size", "device"]:
        a, b = (plan(backend, {key: v}) for v in SPEED[key])
        assert a.identity_args() == b.identity_args() == base, key
        assert key in a.execution_args(), key  # recorded per session instead


@pytest.mark.parametrize("backend", registered_backends())
def test_a_result_changing_argument_is_in_the_recorded_identity(backend):
    key, value = RESULT_ARG[backend.split(":", 1)[0]]
    changed = plan(backend, {key: value})
    assert changed.identity_args().get(key) == value and key not in changed.execution_args()
