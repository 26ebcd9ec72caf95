"""The code both sides of a paired measurement share: refills, plain outputs, rounds, files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verifier.clock.paired_calls import load_args, plain_outputs, refill, save_args, time_round


def test_refill_keeps_the_buffer_and_changes_the_content():
    first = [torch.randn(8, 8), 3]
    buf = refill(torch, None, first)
    ptr = buf[0].data_ptr()
    second = [torch.randn(8, 8), 4]
    buf2 = refill(torch, buf, second)
    assert buf2[0].data_ptr() == ptr and torch.equal(buf2[0], second[0]) and buf2[1] == 4
    assert not torch.equal(buf2[0], first[0])


def test_refill_with_other_shapes_gives_new_tensors():
    buf = refill(torch, None, [torch.randn(4)])
    out = refill(torch, buf, [torch.randn(5)])
    assert out[0].shape == (5,)


def test_plain_outputs_accepts_tensors_and_tuples():
    t = torch.ones(2)
    assert plain_outputs(torch, t)[0] is t
    assert len(plain_outputs(torch, (t, t))) == 2


class Lazy(torch.Tensor):
    pass


@pytest.mark.parametrize("bad", [
    lambda: torch.ones(2).as_subclass(Lazy),
    lambda: torch.empty(2, device="meta"),
    lambda: [1.0],
    lambda: None,
    lambda: torch.ones(4).to_sparse(),
])
def test_plain_outputs_refuses_everything_else(bad):
    with pytest.raises(TypeError):
        plain_outputs(torch, bad())


def test_time_round_gives_one_time_and_one_fresh_output_per_set():
    calls = []

    def model(x):
        calls.append(x.data_ptr())
        return x * 2

    sets = [[torch.full((4,), float(k))] for k in range(5)]
    times, kept = time_round(torch, model, sets, "cpu")
    assert len(times) == 5 and all(t >= 0 for t in times)
    assert len(set(calls)) == 1  # the same buffer every call
    assert [float(k[0][0]) for k in kept] == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_stale_output_buffer_is_visible_in_kept_outputs():
    """A model returning the same buffer every call: the kept copies still show what each call gave."""
    out = torch.zeros(4)

    def model(x):
        out.copy_(x)
        return out

    _, kept = time_round(torch, model, [[torch.full((4,), float(k))] for k in range(3)], "cpu")
    assert [float(k[0][0]) for k in kept] == [0.0, 1.0, 2.0]


def test_args_round_trip_through_files(tmp_path):
    args = [torch.randn(3, 2), torch.arange(4), 7, [1, 2], torch.randn(2).half()]
    save_args(torch, np, tmp_path, args)
    back = load_args(torch, np, tmp_path, "cpu")
    assert torch.equal(back[0], args[0]) and torch.equal(back[1], args[1])
    assert back[2] == 7 and back[3] == [1, 2]
    assert back[4].dtype == torch.float16 and torch.equal(back[4], args[4])


def test_saving_refuses_to_follow_a_planted_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "in0.npy").symlink_to(victim)
    with pytest.raises(OSError):
        save_args(torch, np, tmp_path / "d", [torch.ones(2)])
    assert victim.read_text() == "keep"


def test_trial_inputs_can_come_from_other_distributions():
    """Besides get_inputs()'s own distribution, trials can redraw floating inputs (same shapes and
    dtypes) so a closed-form shortcut for one distribution fails; integer inputs stay as written."""
    from types import SimpleNamespace

    from verifier.workers.reference_worker import draw_inputs

    task = SimpleNamespace(get_inputs=lambda: [torch.rand(64, 64) + 5.0, torch.arange(4)])
    own = draw_inputs(torch, task, 1, "task", "cpu")
    assert float(own[0].min()) >= 5.0
    uniform = draw_inputs(torch, task, 1, "uniform", "cpu")
    assert float(uniform[0].min()) >= -1.0 and float(uniform[0].max()) <= 1.0 and float(uniform[0].min()) < 0
    heavy = draw_inputs(torch, task, 1, "heavy", "cpu")
    assert float(heavy[0].abs().max()) > 4.0 and heavy[0].shape == (64, 64)
    assert torch.equal(uniform[1], torch.arange(4))
    assert torch.equal(draw_inputs(torch, task, 2, "normal", "cpu")[0], draw_inputs(torch, task, 2, "normal", "cpu")[0])


def test_an_output_that_views_its_input_shows_other_data():
    """The candidate's rounds copy a call's outputs only after its inputs were overwritten (the next set,
    or scrambled after the last call): a view of the input cannot pass for a computed output, whatever
    the view is called. A real output is unaffected, and the trusted side (detach_inputs=False) keeps
    the old order."""
    sets = [[torch.arange(4, dtype=torch.float32) + 10 * k] for k in range(3)]
    _, viewed = time_round(torch, lambda x: x.as_strided((4,), (1,)), sets, "cpu")
    assert float(viewed[0][0][0]) == 10.0  # call 0's view shows set 1's content
    assert float(viewed[1][0][0]) == 20.0
    assert torch.isnan(viewed[2][0]).all()  # the last call's inputs were scrambled
    _, real = time_round(torch, lambda x: x + 1, sets, "cpu")
    assert [float(k[0][0]) for k in real] == [1.0, 11.0, 21.0]
    _, trusted = time_round(torch, lambda x: x.as_strided((4,), (1,)), sets, "cpu", detach_inputs=False)
    assert [float(k[0][0]) for k in trusted] == [0.0, 10.0, 20.0]


def test_scramble_changes_every_element_of_every_dtype():
    from verifier.clock.paired_calls import scramble

    xs = [torch.zeros(3), torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.bool), 7]
    scramble(torch, xs)
    assert torch.isnan(xs[0]).all() and (xs[1] == -1).all() and xs[2].all() and xs[3] == 7
