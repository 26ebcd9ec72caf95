"""Degenerate answers include identity (issue 22): ReLU on inputs in [0, 1) is the identity, so a copy of the
input passes the task's own inputs. The probe finds it, names the input distributions that separate it, and
the verifier's trials then draw them, so a copy of the input fails."""

from __future__ import annotations

import numpy as np
import pytest

from core.tasks import Task, task_degeneracy
from core.verifying import with_degeneracy
from verifier import VerifyConfig
from verifier.correctness.compare import (
    degenerate_answers,
    describe_degenerate,
    is_pass_through,
    pass_throughs,
)

RELU_01 = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(8, 256)]

def get_init_inputs():
    return []
'''

COPY_TASK = RELU_01.replace("torch.relu(x)", "x.clone()")


def test_a_copy_of_the_input_is_found_only_where_it_passes():
    rng = np.random.default_rng(0)
    pos = [rng.random((4, 8), dtype=np.float32) for _ in range(3)]
    assert pass_throughs([[np.maximum(x, 0)] for x in pos], [[x] for x in pos]) == ["input 0 passed through"]
    mixed = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]
    assert pass_throughs([[np.maximum(x, 0)] for x in mixed], [[x] for x in mixed]) == []
    # another shape is never a pass-through, whatever its values
    assert pass_throughs([[np.maximum(x, 0)[:2]] for x in pos], [[x] for x in pos]) == []
    found = degenerate_answers([[np.maximum(x, 0)] for x in pos], inputs=[[x] for x in pos])
    assert found == ["input 0 passed through"] and is_pass_through(found[0])
    assert describe_degenerate(found) == "degenerate: a copy of input 0 passes"


def test_the_config_adds_the_separating_distributions_but_keeps_a_persons_choice():
    config = with_degeneracy(VerifyConfig(), ["input 0 passed through"], ["normal", "uniform"])
    assert config.input_distributions == ["task", "normal", "uniform"]
    assert config.degenerate == []  # not a tolerance matter: no spread-scaled tolerance
    chosen = with_degeneracy(VerifyConfig(input_distributions=["heavy"]), ["input 0 passed through"], ["normal"])
    assert chosen.input_distributions == ["heavy"]


@pytest.mark.parametrize(("source", "separated"), [(RELU_01, ["normal", "uniform"]), (COPY_TASK, [])])
def test_the_probe_finds_the_identity_and_what_separates_it(source, separated):
    probed = task_degeneracy(Task(name="relu01", level=1, category="activation", description="", source=source,
                                  path=None), use_cache=False)
    assert probed is not None
    assert "input 0 passed through" in probed.found
    assert probed.separating == separated  # a real copy task: nothing separates a copy from the answer

