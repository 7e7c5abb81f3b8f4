"""Tests of `hil dashboard`: its model, its command line, and its page in a real browser."""
