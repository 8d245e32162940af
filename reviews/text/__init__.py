"""What Tasuku writes on GitHub, as text: escaping of others' words, Tasuku's hidden
markers, and the rendering of review bodies, comments and check-run output."""
