"""Issue 21 item 22: a base_url with user:password@ and an api_key_env would send Basic auth and silently drop the
Bearer key (one request has one Authorization header): the combination is refused in one line naming both fields.
(Either alone is sent: the Bearer key, tests/serving/test_openai_requests.py.)
The default tier's commands here run in process (`user_in_process`)."""

from __future__ import annotations


def test_url_credentials_and_a_bearer_key_are_refused_together(user_in_process):
    r = user_in_process.run("ctxbench score --backend openai --suite ruler-quick --backend-arg base_url=http://me:secret@127.0.0.1:9/v1 "
                 "--backend-arg api_key_env=MY_KEY", env={"MY_KEY": "sk-test"})
    assert r.code == 2, r.err[-2000:]
    line = r.last_err_line
    assert "backend_args.base_url" in line and "backend_args.api_key_env" in line and "drop" in line, r.err
    assert len(r.err.strip().splitlines()) == 1 and "secret" not in r.err and "sk-test" not in r.err
    assert user_in_process.files() == set()

