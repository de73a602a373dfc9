"""The soak run (scripts/soak) with a small N: churning senders and receivers, zero loss, no
duplicates beyond redelivery, RSS flat after warm-up (not checked under a sanitizer)."""

import os
import subprocess

import pytest

from conftest import junctiond_path

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
@pytest.mark.deadline(300)
def test_soak_small():
    env = dict(os.environ, JUNCTIOND=str(junctiond_path()))
    p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "soak.py"), "-n", "8000",
                        "--kill-every", "1", "--churn", "500", "--timeout", "240"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=290)
    print(p.stdout)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "soak: OK" in p.stdout
    assert "lost 0," in p.stdout
