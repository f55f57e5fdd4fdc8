"""The run's attacks in the shell: the plan and its scoring, users' attributes, attribute inference."""
