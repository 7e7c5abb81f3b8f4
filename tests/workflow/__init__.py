"""A workflow author's view (issue 22): what a run writes, the action's shell steps, the
example workflows, and the errors a CI user meets."""
