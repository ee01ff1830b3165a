"""Replay determinism: the same seed and the same operations give the same documents.

The service journals the commands it applied and rebuilds the platform from them after a
restart; what a VM was shown before the restart must be what it is shown after, byte for byte,
or DocumentIncarnation would stop meaning "the same information" (SPEC 2 [doc]; SPEC 2 [ours]:
it never goes backwards, not even across a service restart). EventIds come from a seeded
generator so that a run replays exactly (README, ``--seed``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forewarn.domain.timing import TimingProfile

# pytest's importlib mode leaves test folders off sys.path; the shared model sits beside us.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from platform_model import (
    PROFILES,
    REPLAY_FLEET,
    Fleet,
    Step,
    apply_step,
    encoded_documents,
    fleets,
    steps,
)

MODEL = Path(__file__).resolve().parent / "platform_model.py"


@settings(max_examples=40, deadline=None, database=None)
@given(
    fleet=fleets(),
    timing=st.sampled_from(PROFILES),
    seed=st.integers(0, 2**64 - 1),
    script=st.lists(steps(), max_size=40),
)
def test_same_seed_and_operations_give_byte_identical_documents(
    fleet: Fleet, timing: TimingProfile, seed: int, script: list[Step]
) -> None:
    """Two fresh platforms, one seed, one script: after every step both give the same
    outcome and every VM's document encodes to the same bytes in every api-version."""
    first, second = fleet.build(timing, seed), fleet.build(timing, seed)
    assert encoded_documents(first) == encoded_documents(second)
    for step in script:
        assert apply_step(first, step) == apply_step(second, step)
        assert encoded_documents(first) == encoded_documents(second)
        assert first.events() == second.events()


@given(seed=st.integers(0, 2**64 - 1))
@settings(max_examples=10, deadline=None, database=None)
def test_different_seeds_give_different_event_ids(seed: int) -> None:
    """The seed is what the replay depends on: another seed gives other EventIds (so the
    test above would notice if the ids did not come from the seed at all)."""
    script = [Step("maintain_host", 0, 0)]
    first, second = REPLAY_FLEET.build(PROFILES[0], seed), REPLAY_FLEET.build(PROFILES[0], seed + 1)
    assert apply_step(first, script[0]) != apply_step(second, script[0])


@pytest.mark.parametrize("seed", [3, 20220411])
def test_replay_is_the_same_in_processes_with_different_hash_seeds(seed: int) -> None:
    """A restarted service is a new process with a new string-hash seed: nothing the
    platform shows may depend on set or dict iteration order of hashed names."""
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, str(MODEL), str(seed), "80"],
            capture_output=True,
            check=True,
            env=env,
            timeout=60,
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    lines = outputs[0].decode().splitlines()
    assert len(lines) == 80 * len(PROFILES)
    assert len({line.rsplit("| ", 1)[1] for line in lines}) > 10, "the script changed little"
