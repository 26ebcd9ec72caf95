"""Input recipes (issue 22): a task's `get_inputs()` read once on the meta device, then drawn anew from a seed
on either side, bit-identical, with nothing full-size drawn on the CPU or written to a file."""

from __future__ import annotations

import torch

from verifier.correctness.input_recipe import capture, describe, draw, input_bytes


def test_factories_are_recorded_without_allocating():
    # a 6.4 GB input (KernelBench head's ReLU) is read as a recipe in no time and no memory
    recipe = capture(torch, lambda: [torch.rand(4096, 393216)])
    assert recipe == [{"kind": "rand", "shape": [4096, 393216], "dtype": "float32"}]
    assert input_bytes(torch, recipe) == 4096 * 393216 * 4
    assert describe(recipe, ["x"]) == "x: rand 4096x393216 f32"


def test_mixed_arguments():
    recipe = capture(torch, lambda: [torch.randn(8, 16, dtype=torch.float16), torch.randint(0, 10, (8,)), 3,
                                     torch.randint(5, (4,)), torch.ones(2)])
    assert [e["kind"] for e in recipe] == ["randn", "randint", "value", "randint", "ones"]
    assert recipe[0]["dtype"] == "float16" and (recipe[1]["low"], recipe[1]["high"]) == (0, 10)
    assert (recipe[3]["low"], recipe[3]["high"]) == (0, 5) and recipe[2]["value"] == 3


def test_transformed_or_data_built_inputs_keep_the_file_path():
    assert capture(torch, lambda: [torch.rand(4, 4) * 2 - 1]) is None
    assert capture(torch, lambda: [torch.tensor([1.0, 2.0])]) is None
    assert capture(torch, lambda: [torch.rand(4, 4).numpy()]) is None
    assert capture(torch, lambda: [object()]) is None


def test_both_sides_draw_the_same_tensors_and_other_seeds_differ():
    recipe = capture(torch, lambda: [torch.rand(64, 32), torch.randint(0, 7, (64,)), 2.5])
    a, b = draw(torch, recipe, 123, "task", "cpu"), draw(torch, recipe, 123, "task", "cpu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[2] == 2.5
    assert float(a[0].min()) >= 0 and float(a[0].max()) < 1 and int(a[1].max()) < 7
    c = draw(torch, recipe, 124, "task", "cpu")
    assert not torch.equal(a[0], c[0])


def test_other_distributions_separate_what_the_task_distribution_hides():
    recipe = capture(torch, lambda: [torch.rand(256, 64)])
    normal = draw(torch, recipe, 5, "normal", "cpu")[0]
    uniform = draw(torch, recipe, 5, "uniform", "cpu")[0]
    heavy = draw(torch, recipe, 5, "heavy", "cpu")[0]
    assert float(normal.min()) < 0 and float(uniform.min()) < 0 and float(uniform.max()) < 1
    assert float(heavy.abs().max()) <= 40 and float(heavy.abs().max()) > 5
    assert normal.dtype == uniform.dtype == heavy.dtype == torch.float32


def test_a_draw_from_the_reused_generator_is_a_fresh_generators_draw_whatever_ran_between():
    """Each process keeps one generator per device and reseeds it per draw (no generator made per set inside
    the clock): the bits must be those a generator made afresh from the seed gives, draw after draw, even
    when something advanced or reseeded the kept generator in between (a candidate's forward that found it)."""
    from verifier.correctness import input_recipe

    recipe = capture(torch, lambda: [torch.randn(33, 17), torch.rand(5), torch.randint(0, 9, (7,))])

    def fresh(seed: int) -> list:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        return [torch.randn(33, 17, generator=gen), torch.rand(5, generator=gen), torch.randint(0, 9, (7,), generator=gen)]

    for seed in (11, 12, 11, 987654321):
        got = draw(torch, recipe, seed, "task", "cpu")
        assert all(torch.equal(g, w) for g, w in zip(got, fresh(seed), strict=True)), seed
        kept = input_recipe._GENERATORS[str(torch.device("cpu"))]
        torch.rand(1000, generator=kept)  # advanced between draws
        kept.manual_seed(5)  # and reseeded
    heavy = draw(torch, recipe, 11, "heavy", "cpu")
    torch.rand(10, generator=input_recipe._GENERATORS[str(torch.device("cpu"))])
    assert all(torch.equal(a, b) for a, b in zip(heavy, draw(torch, recipe, 11, "heavy", "cpu"), strict=True))


def test_a_generator_planted_in_the_cache_is_not_used():
    from verifier.correctness import input_recipe

    class Stuck(torch.Generator):
        def manual_seed(self, seed):  # never reseeds
            return self

    recipe = capture(torch, lambda: [torch.rand(16)])
    want = draw(torch, recipe, 77, "task", "cpu")[0]
    input_recipe._GENERATORS[str(torch.device("cpu"))] = Stuck()
    assert torch.equal(draw(torch, recipe, 77, "task", "cpu")[0], want)
    assert type(input_recipe._GENERATORS[str(torch.device("cpu"))]) is torch.Generator


def test_a_round_is_drawn_at_once_the_same_on_both_sides_and_one_seed_is_a_plain_draw():
    """A round's sets come from one generator call per argument (row k is set k): the same bits for the
    same seeds (the harness and the reference worker both draw them), other bits for other seeds, sets
    unlike each other; a round of one set is exactly `draw` of its seed (the big CPU rounds unchanged)."""
    from verifier.correctness.input_recipe import draw_round

    recipe = capture(torch, lambda: [torch.randn(6, 5), torch.randint(0, 4, (3,)), 7, torch.rand(())])
    seeds = [101, 202, 303, 404]
    a, b = draw_round(torch, recipe, seeds, "task", "cpu"), draw_round(torch, recipe, seeds, "task", "cpu")
    assert len(a) == 4 and all(len(s) == 4 for s in a)
    for sa, sb in zip(a, b, strict=True):
        assert tuple(sa[0].shape) == (6, 5) and tuple(sa[1].shape) == (3,) and sa[2] == 7 and sa[3].dim() == 0
        assert torch.equal(sa[0], sb[0]) and torch.equal(sa[1], sb[1]) and torch.equal(sa[3], sb[3])
        assert float(sa[3]) >= 0 and float(sa[3]) < 1 and int(sa[1].max()) < 4
    assert not torch.equal(a[0][0], a[1][0])  # the sets differ from each other
    assert not torch.equal(draw_round(torch, recipe, [101, 202, 303, 405], "task", "cpu")[0][0], a[0][0])
    one = draw_round(torch, recipe, [555], "x100", "cpu")[0]
    assert all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
               for x, y in zip(one, draw(torch, recipe, 555, "x100", "cpu"), strict=True))
