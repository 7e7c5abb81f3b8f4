"""A workflow author's view: what a run writes, the action's shell steps, the
example workflows, and the errors a CI user meets."""
