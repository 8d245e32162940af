"""A run's check run: created once, concluded from every open finding at its head (the
gate), sent whatever GitHub's weather (conclusions), and what a failure's code means."""
