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


def _visible_names(command: click.Command) -> set[str]:
    """The option names `--help` shows (a renamed option shows only its new name)."""
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            shown = param.opts[:1] if isinstance(param, options.Renamed) else param.opts
            names.update(shown + param.secondary_opts)
    return names


def test_one_name_one_meaning_for_steps_and_timeouts():
    """Issue 34: `--steps/--refine` in draft were `--draft-steps/--refine-steps` elsewhere, and `--timeout`
    was the candidate's run time in verify but one model call's time in draft and bench."""
    shown = {name: _visible_names(_command(name)) for name in COMMANDS}
    for name in ("draft", "tui", "bench"):
        assert {"--draft-steps", "--refine-steps"} <= shown[name], name
    assert not any({"--steps", "--refine", "--timeout"} & names for names in shown.values()), shown
    assert "--model-timeout" in shown["draft"] and "--model-timeout" in shown["bench"]
    assert "--run-timeout" in shown["verify"] and "--model-timeout" not in shown["verify"]
    from click.testing import CliRunner

    helps = {name: CliRunner().invoke(cli, [name, "--help"]).output for name in ("draft", "verify", "bench")}
    assert all("--timeout" not in text and "--steps " not in text for text in helps.values())


@pytest.mark.parametrize("name, argv, expected", [
    ("draft", ["--steps", "2", "--refine", "1", "--timeout", "7"], {"draft_steps": 2, "refine_steps": 1, "model_timeout": 7.0}),
    ("draft", ["--draft-steps", "3", "--refine-steps", "2", "--model-timeout", "9"],
     {"draft_steps": 3, "refine_steps": 2, "model_timeout": 9.0}),
    ("bench", ["--timeout", "5"], {"model_timeout": 5.0}),
    ("verify", ["--timeout", "30", "relu", "k.py"], {"run_timeout": 30.0}),
    ("verify", ["--run-timeout", "31", "relu", "k.py"], {"run_timeout": 31.0}),
])
def test_old_names_still_work_as_hidden_aliases(name, argv, expected):
    ctx = _command(name).make_context(name, list(argv), resilient_parsing=True)
    assert {k: ctx.params[k] for k in expected} == expected
