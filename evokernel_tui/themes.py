"""The app's three themes and the small JSON file that remembers the person's choice.

Colours for Textual's design system live in the `Theme` objects below; layout and the per-theme
accents (gate lights, the highlighted Q column) live in `themes/*.tcss`, scoped by the class Textual
puts on the app for the active theme (`-theme-evokernel-dark` …), so switching at run time is one assignment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from textual.theme import Theme

THEME_NAMES = ("dark", "light", "high-contrast")
DEFAULT_THEME = "dark"
SETTINGS_FILE = "tui.json"

TEXTUAL_THEMES = {
    "dark": Theme(
        name="evokernel-dark",
        primary="#5FA8D3",
        secondary="#8E7DBE",
        accent="#F2A541",
        warning="#F2C14E",
        error="#E5534B",
        success="#57AB5A",
        foreground="#D8DEE9",
        background="#15191F",
        surface="#1C2129",
        panel="#252B35",
        dark=True,
    ),
    "light": Theme(
        name="evokernel-light",
        primary="#1F6FB2",
        secondary="#6A4FA3",
        accent="#B8620B",
        warning="#9A6700",
        error="#C62828",
        success="#2E7D32",
        foreground="#1E2329",
        background="#F7F7F4",
        surface="#FFFFFF",
        panel="#E6E8EB",
        dark=False,
    ),
    "high-contrast": Theme(
        name="evokernel-high-contrast",
        primary="#FFFF00",
        secondary="#00FFFF",
        accent="#FF00FF",
        warning="#FFFF00",
        error="#FF3030",
        success="#00FF00",
        foreground="#FFFFFF",
        background="#000000",
        surface="#000000",
        panel="#202020",
        dark=True,
        luminosity_spread=0.0,
    ),
}


def config_dir() -> Path:
    """EVOKERNEL_CONFIG_DIR when set (tests), else the platform's user config dir for evokernel."""
    override = os.environ.get("EVOKERNEL_CONFIG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("evokernel"))


def short_name(textual_name: str) -> str:
    """`evokernel-light` → `light`; any other Textual theme keeps its own name (`nord`)."""
    return textual_name.removeprefix("evokernel-") if textual_name.removeprefix("evokernel-") in THEME_NAMES else textual_name


def textual_name(name: str) -> str:
    """The Textual theme name for one of ours (`light` → `evokernel-light`); other names pass through."""
    return TEXTUAL_THEMES[name].name if name in TEXTUAL_THEMES else name


def load_theme_name(directory: Path | None = None) -> str:
    """The remembered theme: one of ours, or a Textual theme picked in the palette (the app falls back
    to the default when that theme no longer exists); the default when none is saved or unreadable."""
    path = (directory or config_dir()) / SETTINGS_FILE
    try:
        name = json.loads(path.read_text()).get("theme", DEFAULT_THEME)
    except (OSError, ValueError, AttributeError):
        return DEFAULT_THEME
    return name if isinstance(name, str) and name.strip() else DEFAULT_THEME


def save_theme_name(name: str, directory: Path | None = None) -> Path:
    """Remember `name` (ours or any Textual theme's), keeping any other settings already in the file."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"unknown theme {name!r}; choose one of {', '.join(THEME_NAMES)}")
    path = (directory or config_dir()) / SETTINGS_FILE
    try:
        settings = json.loads(path.read_text())
        if not isinstance(settings, dict):
            settings = {}
    except (OSError, ValueError):
        settings = {}
    settings["theme"] = name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def next_theme(name: str) -> str:
    """The theme after `name` in the cycle dark → light → high-contrast → dark."""
    index = THEME_NAMES.index(name) if name in THEME_NAMES else -1
    return THEME_NAMES[(index + 1) % len(THEME_NAMES)]
