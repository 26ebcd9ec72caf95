"""The app's panes, one widget per file."""
