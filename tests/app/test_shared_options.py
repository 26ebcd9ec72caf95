"""Issue 15: options that several commands take are defined once (evokernel_tui/options.py), so they mean
the same choices, default and help everywhere; the one-line error helpers are one function."""

from __future__ import annotations

import click
import pytest

from evokernel_tui import options
from evokernel_tui.cli import cli

SHARED = ("backend", "model", "api_base", "sessions_dir", "threads", "memory_path", "no_memory", "kernelbench",
          "level", "problem", "tolerance", "atol", "rtol", "unsafe")
COMMANDS = ("verify", "compare", "draft", "resume", "replay", "sessions", "tui", "bench")


def _command(name: str) -> click.Command:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return command


# bench's bank is shared by all its tasks, --no-memory is its ablation and --kernelbench takes --levels:
# resume's --model replaces the session's own: the same names with their own meaning, said in their help
OWN_MEANING = {("bench", "memory_path"), ("bench", "no_memory"), ("bench", "kernelbench"), ("resume", "model")}


def _shape(param: click.Parameter) -> str:
    import json

    return json.dumps(param.to_info_dict(), sort_keys=True, default=str)


def test_a_shared_option_means_the_same_in_every_command():
    seen: dict[str, dict[str, tuple]] = {}
    for name in COMMANDS:
        for param in _command(name).params:
            if param.name in SHARED and (name, param.name) not in OWN_MEANING:
                seen.setdefault(param.name, {})[name] = _shape(param)
    different = {opt: by_cmd for opt, by_cmd in seen.items() if len(set(by_cmd.values())) > 1}
    assert not different, different
    # the options the issue names reach every command that runs kernels or sessions
    assert set(seen["backend"]) == {"verify", "draft", "tui", "bench"}
    assert {"draft", "tui", "resume"} <= set(seen["memory_path"]) and {"draft", "tui", "resume"} <= set(seen["no_memory"])
    assert {"verify", "draft", "tui"} <= set(seen["kernelbench"])
    assert {"verify", "draft", "tui", "bench"} <= set(seen["tolerance"]) <= set(seen["atol"])
    assert {"verify", "compare", "draft", "tui"} <= set(seen["threads"])
    assert {"compare", "draft", "resume", "replay", "sessions", "tui"} <= set(seen["sessions_dir"])


def test_every_json_flag_is_the_same_flag():
    for name in (*COMMANDS, "tasks"):
        flags = [p for p in _command(name).params if p.name == "as_json"]
        assert all(p.opts == ["--json"] and p.is_flag for p in flags), name


def test_the_option_defaults_match_the_layers_they_configure():
    from verifier.config import VerifyConfig
    from verifier.correctness.compare import TOLERANCE_PRESETS

    assert VerifyConfig().memory_gb == options.DEFAULT_MEMORY_GB
    assert options.TOLERANCE_PRESETS == TOLERANCE_PRESETS


@pytest.mark.parametrize("exc, line", [
    (ValueError("first\nsecond"), "first"),
    (ValueError(""), "ValueError"),
    (OSError("  padded  "), "padded"),
])
def test_one_line_of_an_error_is_one_function(exc, line):
    from core.fsutil import first_line, one_line
    from evokernel_tui.cli import one_line as cli_line

    assert cli_line(exc) == first_line(exc) == line
    assert one_line(exc) == f"{type(exc).__name__}: {line}"
    assert first_line(ValueError("x" * 500), 200) == "x" * 200


def test_one_line_errors_turns_user_errors_into_one_line_and_leaves_bugs_alone():
    from core.tasks import TaskError
    from evokernel_tui.cli import one_line_errors

    with pytest.raises(click.ClickException) as info, one_line_errors(TaskError):
        raise TaskError("no task named 'nope'; see `evokernel tasks`\nmore detail")
    assert info.value.message == "no task named 'nope'; see `evokernel tasks`"
    with pytest.raises(click.ClickException), one_line_errors():  # default: the group's USER_ERRORS
        raise TaskError("bad task")
    with pytest.raises(KeyError), one_line_errors(TaskError):       # a bug keeps its traceback
        raise KeyError("x")
