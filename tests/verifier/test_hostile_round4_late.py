"""The last parts of the fourth held-out hostile round (issue 37): a decoy that raises on its garbled
result, the job directory's cap, executable memory made at run time, the mount table in a verdict, the
sandbox as an ordinary user, and a verification killed mid-way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifier import verify

ROUND4 = Path(__file__).resolve().parents[1] / "candidates" / "hostile_round4"


# ---------------------------------------------------------------------------------------------------
# a checked forward that raises is a refusal, not a skipped check
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "files"])
def test_a_forward_raising_on_its_garbled_result_is_refused(task_source, make_config, seeded):
    """Before: the candidate (torch computes, the kernel's result is only fingerprinted, forward raises
    when the fingerprint breaks) raised in both checked forwards and nowhere else; a raise there read as
    "the result reached the control flow", so it was feasible under `kernelbench`. Now it is `decoy-kernel`."""
    source = (ROUND4 / "raises_on_garbled_result.py").read_text()
    res = verify(task_source("relu"), source,
                 config=make_config(time_kernels=False, extra={"seeded_inputs": seeded}))
    gate = res.gates[0]
    assert not res.feasible and gate.detail.get("rule") == "decoy-kernel", res.feedback()[:2000]
    assert "forward raised in a checked call" in json.dumps(res.to_dict())
    assert "changed under me" in json.dumps(res.to_dict())  # the candidate's own error, quoted
