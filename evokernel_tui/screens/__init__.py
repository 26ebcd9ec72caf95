"""The app's screens: the live session, replay, and the modals they open."""
